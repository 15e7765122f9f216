"""Oracle ADS `opctl` distributed-training YAML (`kind: distributed`) as a cloudddp job spec.

How ADS reads the file, from oracle/accelerated-data-science at
0e785b9fd36fb354019e0924b94ac2b0ec6f235a (`ads/opctl/config/yaml_parsers/distributed/yaml_parser.py`,
`ads/opctl/distributed/common/cluster_config_helper.py`, `ads/opctl/backend/ads_ml_job.py`
`MLJobDistributedBackend.prepare_job_config` and `run`), and what cloudddp does:

- Nodes: ADS starts one main job run whatever `main.replicas` says (it warns above 1), and
  `worker.replicas or 1` worker runs when a `worker` section exists (so `replicas: 0` still
  gives one worker), none without one. cloudddp counts the same way and warns in both cases.
- Job name: `cluster.spec.name`, else `infrastructure.spec.displayName` (ADS); cloudddp falls
  back to the top-level `spec.name`, which ADS never reads, and warns when it does, or when
  the name must change to be a cloudddp name (letters, digits, hyphens).
- Image: `cluster.spec.image`, else `main.image`, else `worker.image` (ADS).
- Environment: `cluster.spec.config.env`, then `main`/`worker` `config.env` (ADS sets these per
  job run), then `runtime.spec.env`. cloudddp runs one node group, so main and worker must agree.

`FIELDS` lists every ADS field and what cloudddp does with it (the README's table says the
same). Fields cloudddp cannot honour are errors naming them, never silently dropped. Errors
about a value read from the file name the file's own field (`compartmentId`), also when the
check runs later at render (`source_of`). No `oci` import here: reading a spec needs no SDK.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError

Warn = Callable[[str], None]

# Every field of ADS's distributed spec -> what cloudddp does with it.
FIELDS: dict[str, str] = {
    "kind": "must be `distributed`",
    "apiVersion": "v1.0 only",
    "spec.name": "job name when neither cluster.spec.name nor displayName is set (ADS ignores it; warning)",
    "spec.infrastructure.type": "dataScienceJob only",
    "spec.infrastructure.kind / apiVersion": "ignored, as ADS does",
    "spec.infrastructure.spec.projectId": "oci.project_id",
    "spec.infrastructure.spec.compartmentId": "oci.compartment_id",
    "spec.infrastructure.spec.displayName": "job name when cluster.spec.name is unset",
    "spec.infrastructure.spec.logGroupId": "oci.log_group_id",
    "spec.infrastructure.spec.logId": "oci.log_id",
    "spec.infrastructure.spec.subnetId": "oci.subnet_id",
    "spec.infrastructure.spec.shapeName": "oci.shape",
    "spec.infrastructure.spec.blockStorageSize": "oci.block_storage_gb",
    "spec.infrastructure.spec.shapeConfigDetails.ocpus": "oci.ocpus",
    "spec.infrastructure.spec.shapeConfigDetails.memoryInGBs": "oci.memory_in_gbs",
    "spec.infrastructure.spec.jobType / jobInfrastructureType": "error: cloudddp always creates a multi-node job",
    "spec.infrastructure.spec.storageMount": "error: use oci:// inputs, output and checkpoint",
    "spec.infrastructure.spec.freeformTags / definedTags": "error: not supported",
    "spec.cluster.kind": "PYTORCH only (Dask, TensorFlow, Horovod stay with ADS)",
    "spec.cluster.spec.name": "job name (as ADS)",
    "spec.cluster.spec.image": "oci.image (else main.image, else worker.image, as ADS)",
    "spec.cluster.spec.workDir": "oci.work_dir",
    "spec.cluster.spec.config.env": "environment",
    "spec.cluster.spec.config.startOptions": "error: pass launcher options as cloudddp flags",
    "spec.cluster.spec.ephemeral": "ignored with a warning (cloudddp clusters always end with the job)",
    "spec.cluster.spec.main.name / worker.name": "ignored: one job run, one node group",
    "spec.cluster.spec.main.replicas": "1 main node, as ADS (warning above 1)",
    "spec.cluster.spec.main.image / worker.image": "the image when cluster.spec.image is unset; must agree",
    "spec.cluster.spec.main.config.env / worker.config.env": "environment (main and worker must agree)",
    "spec.cluster.spec.worker.replicas": "worker nodes; 0 counts as 1, as ADS (warning)",
    "spec.cluster.spec.ps / certificate": "error: TensorFlow parameter servers and Dask TLS are not PyTorch DDP",
    "spec.runtime.kind": "python only",
    "spec.runtime.spec.entryPoint": "entry_point",
    "spec.runtime.spec.args": "args",
    "spec.runtime.spec.env": "environment",
    "spec.runtime.spec.kwargs / uri / branch / commit / gitSecretId / codeDir / pythonPath": (
        "error: cloudddp ships the folder that holds the YAML instead"
    ),
}
INFRASTRUCTURE_FIELDS = {
    "projectId": "project_id",
    "compartmentId": "compartment_id",
    "logGroupId": "log_group_id",
    "logId": "log_id",
    "subnetId": "subnet_id",
    "shapeName": "shape",
    "blockStorageSize": "block_storage_gb",
}
INFRASTRUCTURE_OTHER = {"displayName", "shapeConfigDetails"}
CLUSTER_FIELDS = {"image", "workDir", "config", "main", "worker", "name", "ephemeral"}
CONFIG_FIELDS = {"env"}
RUNTIME_FIELDS = {"entryPoint", "args", "env"}
ROLE_FIELDS = {"name", "replicas", "config", "image"}
INFRASTRUCTURE_PATH = "spec.infrastructure.spec"

# (oci field, value) -> (ADS field, file) it was read from: lets later checks name the YAML's field.
_SOURCES: dict[tuple[str, str], tuple[str, str]] = {}


def source_of(field: str, value: Any) -> tuple[str, str] | None:
    """(ADS field, file) if this value of oci.<field> was read from an ADS file, e.g.
    ("spec.infrastructure.spec.compartmentId", "train.yaml"); None otherwise (a flag, a cloudddp spec)."""
    return _SOURCES.get((field, str(value)))


def print_warning(message: str) -> None:
    print(f"cloudddp: warning: {message}", file=sys.stderr)


def mapping(value: Any, where: str, origin: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CloudDDPError(f"{origin}: {where} must be a mapping, got {type(value).__name__}.")
    return value


def reject_unknown(section: dict[str, Any], known: set[str], where: str, origin: str) -> None:
    unknown = sorted(set(section) - known)
    if unknown:
        raise CloudDDPError(
            f"{origin}: {where} has field(s) {', '.join(unknown)} that cloudddp does not support for ADS specs "
            f"(supported: {', '.join(sorted(known))}). Remove them, or write a cloudddp job spec; the README's ADS "
            f"table says what each field becomes."
        )


def env_list(value: Any, where: str, origin: str) -> dict[str, str]:
    """ADS `env: [{name, value}]` as a dict (values as strings, like the job receives them)."""
    result: dict[str, str] = {}
    for item in value or []:
        if not isinstance(item, dict) or "name" not in item:
            raise CloudDDPError(f"{origin}: {where} entries must be {{name: ..., value: ...}}, got {item!r}.")
        result[str(item["name"])] = "" if item.get("value") is None else str(item["value"])
    return result


def label(value: str) -> str:
    """A display name as a cloudddp job name (letters, digits, hyphens)."""
    cleaned = re.sub(r"[^A-Za-z0-9-]+", "-", value).strip("-")[:63]
    return cleaned or "cloudddp-job"


def count(role: dict[str, Any], where: str, origin: str) -> int | None:
    value = role.get("replicas")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise CloudDDPError(f"{origin}: {where}.replicas must be a whole number >= 0, got {value!r}.")
    return value


def node_count(cluster_spec: dict[str, Any], origin: str, warn: Warn) -> int:
    """1 main + (`worker.replicas or 1` if there is a worker section), as ADS starts its job runs."""
    where = "spec.cluster.spec"
    if cluster_spec.get("main") is None:
        raise CloudDDPError(f"{origin}: {where}.main is required (ADS needs it too): the main node, rank 0.")
    main = count(mapping(cluster_spec["main"], f"{where}.main", origin), f"{where}.main", origin)
    if main and main > 1:
        warn(f"{origin}: {where}.main.replicas is {main}; ADS runs one main node (and warns), and so does cloudddp.")
    if not cluster_spec.get("worker"):
        return 1
    workers = count(mapping(cluster_spec["worker"], f"{where}.worker", origin), f"{where}.worker", origin)
    if workers == 0:
        warn(
            f"{origin}: {where}.worker.replicas is 0; ADS reads it as 1 (`replicas or 1`), so this is 2 nodes, as "
            f"with ADS. Remove the worker section for a single node."
        )
    return 1 + (workers or 1)


def job_name(spec: dict[str, Any], cluster_spec: dict[str, Any], infra: dict[str, Any], origin: str, warn: Warn) -> str:
    name = cluster_spec.get("name") or infra.get("displayName")
    if not name and spec.get("name"):
        name = spec["name"]
        warn(
            f"{origin}: the job is named after spec.name {name!r}, which ADS does not read (it uses "
            f"spec.cluster.spec.name, else {INFRASTRUCTURE_PATH}.displayName)."
        )
    chosen = label(str(name or "cloudddp-job"))
    if name and chosen != str(name):
        warn(f"{origin}: the job name {str(name)!r} becomes {chosen!r} (cloudddp names are letters, digits, hyphens).")
    return chosen


def image_of(cluster_spec: dict[str, Any], origin: str) -> str | None:
    """cluster.spec.image, else main.image, else worker.image (ADS); one node group runs one image."""
    roles = {role: (cluster_spec.get(role) or {}).get("image") for role in ("main", "worker")}
    chosen = cluster_spec.get("image") or roles["main"] or roles["worker"]
    different = {role: image for role, image in roles.items() if image and image != chosen}
    if different:
        role, image = next(iter(different.items()))
        raise CloudDDPError(
            f"{origin}: spec.cluster.spec.{role}.image is {image!r} but the job runs {chosen!r}; cloudddp runs one "
            f"node group, so every node runs one image."
        )
    return chosen


def environment_of(cluster_spec: dict[str, Any], runtime_spec: dict[str, Any], origin: str) -> dict[str, str]:
    where = "spec.cluster.spec"
    config = mapping(cluster_spec.get("config"), f"{where}.config", origin)
    reject_unknown(config, CONFIG_FIELDS, f"{where}.config", origin)
    environment = env_list(config.get("env"), f"{where}.config.env", origin)
    per_role: dict[str, dict[str, str]] = {}
    for role in ("main", "worker"):
        section = mapping(cluster_spec.get(role), f"{where}.{role}", origin)
        reject_unknown(section, ROLE_FIELDS, f"{where}.{role}", origin)
        role_config = mapping(section.get("config"), f"{where}.{role}.config", origin)
        reject_unknown(role_config, CONFIG_FIELDS, f"{where}.{role}.config", origin)
        per_role[role] = env_list(role_config.get("env"), f"{where}.{role}.config.env", origin)
    if cluster_spec.get("worker"):
        for key in sorted(set(per_role["main"]) | set(per_role["worker"])):
            main, worker = per_role["main"].get(key), per_role["worker"].get(key)
            if main != worker:
                raise CloudDDPError(
                    f"{origin}: {key} differs between main ({main!r}) and worker ({worker!r}); cloudddp runs one "
                    f"node group, so every node gets the same environment."
                )
    environment.update(per_role["main"])
    environment.update(per_role["worker"])
    environment.update(env_list(runtime_spec.get("env"), "spec.runtime.spec.env", origin))
    return environment


def oci_settings(infra: dict[str, Any], cluster_spec: dict[str, Any], origin: str) -> dict[str, Any]:
    """The `oci:` section, remembering where each value came from (`source_of`)."""
    oci: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for ads_name, field in INFRASTRUCTURE_FIELDS.items():
        if infra.get(ads_name) is not None:
            oci[field], sources[field] = infra[ads_name], f"{INFRASTRUCTURE_PATH}.{ads_name}"
    shape_path = f"{INFRASTRUCTURE_PATH}.shapeConfigDetails"
    shape_config = mapping(infra.get("shapeConfigDetails"), shape_path, origin)
    reject_unknown(shape_config, {"ocpus", "memoryInGBs"}, shape_path, origin)
    for ads_name, field in (("ocpus", "ocpus"), ("memoryInGBs", "memory_in_gbs")):
        if shape_config.get(ads_name) is not None:
            oci[field], sources[field] = shape_config[ads_name], f"{shape_path}.{ads_name}"
    image = image_of(cluster_spec, origin)
    if image:
        oci["image"], sources["image"] = image, "spec.cluster.spec.image"
    if cluster_spec.get("workDir"):
        oci["work_dir"], sources["work_dir"] = str(cluster_spec["workDir"]), "spec.cluster.spec.workDir"
    for field, where in sources.items():
        _SOURCES[(field, str(oci[field]))] = (where, origin)
    return oci


def sections(data: dict[str, Any], origin: str) -> tuple[dict[str, Any], ...]:
    """(spec, infrastructure.spec, cluster.spec, runtime.spec), each checked for fields cloudddp cannot honour."""
    api = data.get("apiVersion")
    if api not in (None, "v1.0"):
        raise CloudDDPError(f"{origin}: apiVersion {api!r}; cloudddp reads ADS distributed specs v1.0.")
    spec = mapping(data.get("spec"), "spec", origin)
    infrastructure = mapping(spec.get("infrastructure"), "spec.infrastructure", origin)
    infra_type = infrastructure.get("type", "dataScienceJob")
    if infra_type != "dataScienceJob":
        raise CloudDDPError(f"{origin}: spec.infrastructure.type is {infra_type!r}; cloudddp runs dataScienceJob.")
    infra = mapping(infrastructure.get("spec"), INFRASTRUCTURE_PATH, origin)
    reject_unknown(infra, set(INFRASTRUCTURE_FIELDS) | INFRASTRUCTURE_OTHER, INFRASTRUCTURE_PATH, origin)
    cluster = mapping(spec.get("cluster"), "spec.cluster", origin)
    if str(cluster.get("kind", "")).upper() != "PYTORCH":
        raise CloudDDPError(
            f"{origin}: spec.cluster.kind is {cluster.get('kind')!r}; cloudddp runs PyTorch DDP (kind: PYTORCH). "
            f"Dask, TensorFlow and Horovod clusters stay with ADS."
        )
    cluster_spec = mapping(cluster.get("spec"), "spec.cluster.spec", origin)
    reject_unknown(cluster_spec, CLUSTER_FIELDS, "spec.cluster.spec", origin)
    runtime = mapping(spec.get("runtime"), "spec.runtime", origin)
    if runtime.get("kind", "python") != "python" or runtime.get("type"):
        shown = runtime.get("type") or runtime.get("kind")
        raise CloudDDPError(f"{origin}: spec.runtime is {shown!r}; cloudddp runs python runtimes from this folder.")
    runtime_spec = mapping(runtime.get("spec"), "spec.runtime.spec", origin)
    reject_unknown(runtime_spec, RUNTIME_FIELDS, "spec.runtime.spec", origin)
    return spec, infra, cluster_spec, runtime_spec


def spec_dict_from_ads(data: dict[str, Any], origin: str, warn: Warn = print_warning) -> dict[str, Any]:
    """The JobSpec fields (a dict for `build_spec`) an ADS `kind: distributed` YAML describes.

    `warn` receives one message per place where ADS and cloudddp differ (default: stderr).
    """
    spec, infra, cluster_spec, runtime_spec = sections(data, origin)
    entry_point = runtime_spec.get("entryPoint")
    if not entry_point:
        raise CloudDDPError(f"{origin}: spec.runtime.spec.entryPoint (the training script) is required.")
    args = runtime_spec.get("args") or []
    if not isinstance(args, list):
        raise CloudDDPError(f"{origin}: spec.runtime.spec.args must be a list, got {args!r}.")
    if cluster_spec.get("ephemeral") is not None:
        warn(f"{origin}: spec.cluster.spec.ephemeral is ignored: a cloudddp cluster always ends with its job.")
    nodes = node_count(cluster_spec, origin, warn)
    environment = environment_of(cluster_spec, runtime_spec, origin)
    name = job_name(spec, cluster_spec, infra, origin, warn)
    source_dir = Path(origin).parent if origin and Path(origin).suffix in (".yaml", ".yml") else Path(".")
    return {
        "name": name,
        "entry_point": str(entry_point),
        "args": [str(a) for a in args],
        "source_dir": str(source_dir) if str(source_dir) else ".",
        "nodes": nodes,
        "environment": environment,
        "oci": oci_settings(infra, cluster_spec, origin),
    }
