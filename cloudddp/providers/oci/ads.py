"""Oracle ADS `opctl` distributed-training YAML (`kind: distributed`) as a cloudddp job spec.

The ADS guide's `train.yaml` (infrastructure / cluster / runtime) maps onto one JobSpec:

    spec.infrastructure.spec  projectId, compartmentId, logGroupId, logId, subnetId,
                              shapeName, blockStorageSize, shapeConfigDetails  -> oci.*
                              displayName (else spec.name)                     -> name
    spec.cluster              kind PYTORCH only; spec.image -> oci.image;
                              spec.workDir -> oci.work_dir; config.env -> environment;
                              main.replicas + worker.replicas -> nodes
    spec.runtime.spec         entryPoint -> entry_point; args -> args; env -> environment

ADS copies the folder it runs in into the image at /code; cloudddp ships the folder that
holds the YAML (source_dir) with the job instead, so the image need not be rebuilt when the
code changes. Fields cloudddp cannot honour are errors naming them, never ignored.
No `oci` import here: reading a spec must not need the SDK.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError

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
CLUSTER_FIELDS = {"image", "workDir", "config", "main", "worker", "name"}
RUNTIME_FIELDS = {"entryPoint", "args", "env"}
ROLE_FIELDS = {"name", "replicas", "config"}


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
            f"(supported: {', '.join(sorted(known))}). Remove them, or write a cloudddp job spec."
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


def replicas(role: dict[str, Any], where: str, origin: str) -> int:
    count = role.get("replicas", 1 if where.endswith("main") else 0)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise CloudDDPError(f"{origin}: {where}.replicas must be a whole number >= 0, got {count!r}.")
    return count


def spec_dict_from_ads(data: dict[str, Any], origin: str) -> dict[str, Any]:
    """The JobSpec fields (a dict for `build_spec`) an ADS `kind: distributed` YAML describes."""
    api = data.get("apiVersion")
    if api not in (None, "v1.0"):
        raise CloudDDPError(f"{origin}: apiVersion {api!r}; cloudddp reads ADS distributed specs v1.0.")
    spec = mapping(data.get("spec"), "spec", origin)
    infrastructure = mapping(spec.get("infrastructure"), "spec.infrastructure", origin)
    infra_type = infrastructure.get("type", "dataScienceJob")
    if infra_type != "dataScienceJob":
        raise CloudDDPError(f"{origin}: spec.infrastructure.type is {infra_type!r}; cloudddp runs dataScienceJob.")
    infra = mapping(infrastructure.get("spec"), "spec.infrastructure.spec", origin)
    reject_unknown(infra, set(INFRASTRUCTURE_FIELDS) | INFRASTRUCTURE_OTHER, "spec.infrastructure.spec", origin)
    cluster = mapping(spec.get("cluster"), "spec.cluster", origin)
    kind = str(cluster.get("kind", "")).upper()
    if kind != "PYTORCH":
        raise CloudDDPError(
            f"{origin}: spec.cluster.kind is {cluster.get('kind')!r}; cloudddp runs PyTorch DDP (kind: PYTORCH). "
            f"Dask, TensorFlow and Horovod clusters stay with ADS."
        )
    cluster_spec = mapping(cluster.get("spec"), "spec.cluster.spec", origin)
    reject_unknown(cluster_spec, CLUSTER_FIELDS, "spec.cluster.spec", origin)
    runtime = mapping(spec.get("runtime"), "spec.runtime", origin)
    runtime_kind = runtime.get("kind", "python")
    if runtime_kind != "python":
        raise CloudDDPError(f"{origin}: spec.runtime.kind is {runtime_kind!r}; cloudddp runs python runtimes.")
    runtime_spec = mapping(runtime.get("spec"), "spec.runtime.spec", origin)
    reject_unknown(runtime_spec, RUNTIME_FIELDS, "spec.runtime.spec", origin)
    entry_point = runtime_spec.get("entryPoint")
    if not entry_point:
        raise CloudDDPError(f"{origin}: spec.runtime.spec.entryPoint (the training script) is required.")

    environment = env_list(mapping(cluster_spec.get("config"), "spec.cluster.spec.config", origin).get("env"),
                           "spec.cluster.spec.config.env", origin)  # fmt: skip
    nodes = 0
    for role_name in ("main", "worker"):
        where = f"spec.cluster.spec.{role_name}"
        role = mapping(cluster_spec.get(role_name), where, origin)
        reject_unknown(role, ROLE_FIELDS, where, origin)
        nodes += replicas(role, where, origin)
        role_env = env_list(mapping(role.get("config"), f"{where}.config", origin).get("env"), f"{where}.config.env",
                            origin)  # fmt: skip
        for key, value in role_env.items():
            if key in environment and environment[key] != value and role_name == "worker":
                raise CloudDDPError(
                    f"{origin}: {key} differs between main ({environment[key]!r}) and worker ({value!r}); cloudddp "
                    f"runs one node group, so every node gets the same environment."
                )
            environment[key] = value
    if nodes < 1:
        raise CloudDDPError(f"{origin}: main.replicas + worker.replicas must be at least 1.")
    environment.update(env_list(runtime_spec.get("env"), "spec.runtime.spec.env", origin))

    oci: dict[str, Any] = {}
    for ads_name, field in INFRASTRUCTURE_FIELDS.items():
        if infra.get(ads_name) is not None:
            oci[field] = infra[ads_name]
    shape_config = mapping(infra.get("shapeConfigDetails"), "spec.infrastructure.spec.shapeConfigDetails", origin)
    reject_unknown(shape_config, {"ocpus", "memoryInGBs"}, "spec.infrastructure.spec.shapeConfigDetails", origin)
    if shape_config.get("ocpus") is not None:
        oci["ocpus"] = shape_config["ocpus"]
    if shape_config.get("memoryInGBs") is not None:
        oci["memory_in_gbs"] = shape_config["memoryInGBs"]
    if cluster_spec.get("image"):
        oci["image"] = cluster_spec["image"]
    if cluster_spec.get("workDir"):
        oci["work_dir"] = str(cluster_spec["workDir"])

    args = runtime_spec.get("args") or []
    if not isinstance(args, list):
        raise CloudDDPError(f"{origin}: spec.runtime.spec.args must be a list, got {args!r}.")
    name = infra.get("displayName") or spec.get("name") or "cloudddp-job"
    source_dir = Path(origin).parent if origin and Path(origin).suffix in (".yaml", ".yml") else Path(".")
    return {
        "name": label(str(name)),
        "entry_point": str(entry_point),
        "args": [str(a) for a in args],
        "source_dir": str(source_dir) if str(source_dir) else ".",
        "nodes": nodes,
        "environment": environment,
        "oci": oci,
    }
