"""Amazon SageMaker training jobs.

Contract: https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-running-container.html
`resourceconfig.json` in `$SM_INPUT_CONFIG_DIR` (default /opt/ml/input/config) is the
source of truth, since bring-your-own containers get only that file; framework
containers also export SM_HOSTS / SM_CURRENT_HOST / SM_NUM_GPUS. Node rank is the index
of the current host among the participating hosts, master is the first of them, port
7777 as AWS's own drivers use. Heterogeneous clusters: only the instance groups chosen
for distribution join; other hosts sit the job out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import NPROC_GPUS_OR_ONE, ClusterPlan, EnvReader
from cloudddp.errors import CloudDDPError

NAME = "sagemaker"
DEFAULT_CONFIG_DIR = "/opt/ml/input/config"
MASTER_PORT = 7777


def config_dir(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("SM_INPUT_CONFIG_DIR") or DEFAULT_CONFIG_DIR)


def detect(environ: Mapping[str, str]) -> bool:
    if environ.get("SM_HOSTS") or environ.get("SM_CURRENT_HOST"):
        return True
    return (config_dir(environ) / "resourceconfig.json").is_file()


def read_resource_config(environ: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """resourceconfig.json if present, else one built from SM_* variables."""
    path = config_dir(environ) / "resourceconfig.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CloudDDPError(f"sagemaker: the file {path} is not valid JSON ({exc}).") from None
        if not isinstance(data, dict):
            raise CloudDDPError(f"sagemaker: the file {path} must hold a JSON object, got {data!r}.")
        for key, kind in (("current_host", str), ("hosts", list)):
            if not isinstance(data.get(key), kind):
                raise CloudDDPError(
                    f"sagemaker: the file {path} has no valid {key!r} "
                    f"(found {data.get(key)!r}); expected a {kind.__name__}."
                )
        return data, str(path)
    env = EnvReader(environ, NAME)
    hosts = env.json(
        "SM_HOSTS",
        lambda v: isinstance(v, list) and bool(v) and all(isinstance(h, str) for h in v),
        'a non-empty JSON list of host names, like ["algo-1","algo-2"]',
    )
    data = {
        "current_host": env.str("SM_CURRENT_HOST"),
        "hosts": hosts,
        "network_interface_name": environ.get("SM_NETWORK_INTERFACE_NAME") or None,
    }
    if environ.get("SM_INSTANCE_GROUPS_DICT"):
        groups = json.loads(environ["SM_INSTANCE_GROUPS_DICT"])
        data["instance_groups"] = list(groups.values()) if isinstance(groups, dict) else groups
    return data, "SM_HOSTS/SM_CURRENT_HOST"


def participating_hosts(config: dict[str, Any], chosen_groups: list[str] | None, source: str) -> list[str]:
    """Hosts that join the distributed job, in SageMaker's order."""
    hosts: list[str] = list(config["hosts"])
    groups = config.get("instance_groups") or []
    if not chosen_groups or not groups:
        return hosts
    known = {g.get("instance_group_name"): g for g in groups}
    unknown = [g for g in chosen_groups if g not in known]
    if unknown:
        raise CloudDDPError(
            f"sagemaker: instance group(s) {', '.join(unknown)} chosen for distribution are not "
            f"in {source} (its groups: {', '.join(sorted(map(str, known)))})."
        )
    members = {h for g in chosen_groups for h in known[g].get("hosts", [])}
    return [h for h in hosts if h in members]


def nproc_from_env(environ: Mapping[str, str]) -> tuple[int | str, str] | None:
    """Processes per node from SageMaker's accelerator counts, when it gave them."""
    env = EnvReader(environ, NAME)
    for name in ("SM_NUM_GPUS", "SM_NUM_NEURONS"):
        if env.has(name):
            count = env.int(name, minimum=0)
            if count > 0:
                return count, name
    return None


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    config, source = read_resource_config(environ)
    current = config["current_host"]
    all_hosts = config["hosts"]
    if not all_hosts or len(set(all_hosts)) != len(all_hosts):
        raise CloudDDPError(f"sagemaker: hosts in {source} must be non-empty and unique, got {all_hosts!r}.")
    if current not in all_hosts:
        raise CloudDDPError(
            f"sagemaker: the current host {current!r} is not among the hosts {all_hosts!r} in {source}."
        )
    chosen = options.instance_groups
    groups_env = environ.get("CLOUDDDP_SAGEMAKER_INSTANCE_GROUPS")
    if chosen is None and groups_env:
        chosen = [g.strip() for g in groups_env.split(",") if g.strip()]
    hosts = participating_hosts(config, chosen, source)
    result = ClusterPlan(provider=NAME, rdzv_id=environ.get("TRAINING_JOB_NAME", "cloudddp"))
    output_dir = environ.get("SM_OUTPUT_DIR") or "/opt/ml/output"
    result.set("failure_file", os.path.join(output_dir, "failure"), "SM_OUTPUT_DIR or /opt/ml/output")
    if current not in hosts:
        result.participates = False
        result.skip_reason = (
            f"host {current} is in instance group {config.get('current_group_name')!r}, "
            f"not among the groups chosen for distribution ({', '.join(chosen or [])}); it sits this job out."
        )
        return result
    result.set("hosts", hosts, source)
    result.set("nnodes", len(hosts), source)
    result.set("node_rank", hosts.index(current), f"{source} (index of {current})")
    result.set("master_addr", hosts[0], f"{source} (first host)")
    result.set("master_port", MASTER_PORT, "SageMaker convention (AWS drivers use 7777)")
    nproc = nproc_from_env(environ)
    if nproc:
        result.set("nproc_per_node", nproc[0], nproc[1])
    else:
        result.set("nproc_per_node", NPROC_GPUS_OR_ONE, "default: visible GPUs, else 1")
    ifname = config.get("network_interface_name") or environ.get("SM_NETWORK_INTERFACE_NAME")
    if ifname:
        result.set("network_interface", ifname, source)
    return result


def hyperparameter_args(environ: Mapping[str, str]) -> list[str]:
    """hyperparameters.json as `--key value` arguments, as SageMaker's training toolkit passes them.

    Values arrive as strings, often JSON-encoded by the SDK ('"0.1"', '"resnet"'); they
    are decoded when they decode. Keys starting with `sagemaker_` are the platform's own.
    """
    path = config_dir(environ) / "hyperparameters.json"
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text() or "{}")
    except json.JSONDecodeError as exc:
        raise CloudDDPError(f"sagemaker: the file {path} is not valid JSON ({exc.msg}).") from None
    if not isinstance(data, dict):
        raise CloudDDPError(f"sagemaker: the file {path} must hold a JSON object, got {data!r}.")
    args: list[str] = []
    for key, raw in data.items():
        if key.startswith("sagemaker_"):
            continue
        value: Any = raw
        if isinstance(raw, str):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
        text = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        args += [f"--{key}", text]
    return args


def framework_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The SM_* variables AWS's framework containers export, derived from the config files.

    Bring-your-own containers get only /opt/ml/input/config/*.json; exporting the same
    variables there lets one training script run unchanged in both. Only variables that
    are not set already are returned.
    """
    config = config_dir(environ)
    root = config.parent.parent  # /opt/ml
    derived: dict[str, str] = {
        "SM_INPUT_CONFIG_DIR": str(config),
        "SM_INPUT_DIR": str(config.parent),
        "SM_MODEL_DIR": str(root / "model"),
        "SM_OUTPUT_DIR": str(root / "output"),
        "SM_OUTPUT_DATA_DIR": str(root / "output" / "data"),
    }
    resource = config / "resourceconfig.json"
    if resource.is_file():
        data, _ = read_resource_config(environ)
        derived["SM_HOSTS"] = json.dumps(data["hosts"])
        derived["SM_CURRENT_HOST"] = data["current_host"]
        if data.get("network_interface_name"):
            derived["SM_NETWORK_INTERFACE_NAME"] = data["network_interface_name"]
    channels_file = config / "inputdataconfig.json"
    if channels_file.is_file():
        try:
            channels = sorted(json.loads(channels_file.read_text() or "{}"))
        except json.JSONDecodeError as exc:
            raise CloudDDPError(f"sagemaker: the file {channels_file} is not valid JSON ({exc.msg}).") from None
        derived["SM_CHANNELS"] = json.dumps(channels)
        for channel in channels:
            derived[f"SM_CHANNEL_{channel.upper()}"] = str(config.parent / "data" / channel)
    hyperparameters = config / "hyperparameters.json"
    if hyperparameters.is_file():
        args = hyperparameter_args(environ)
        values = dict(zip(args[::2], args[1::2], strict=True))
        derived["SM_HPS"] = json.dumps({k[2:]: v for k, v in values.items()})
        for key, value in values.items():
            derived[f"SM_HP_{key[2:].upper().replace('-', '_')}"] = value
    return {k: v for k, v in derived.items() if not environ.get(k)}
