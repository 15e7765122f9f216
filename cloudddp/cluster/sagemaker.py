"""Amazon SageMaker training jobs: the reader (`plan`) and the local emulation (`emulate`).

Contract: https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-running-container.html
and the training toolkit itself (aws/sagemaker-training-toolkit, `src/sagemaker_training/`
`environment.py`, `mapping.py`, `torch_distributed.py`, `params.py`), whose rules are copied here:

- `resourceconfig.json` in `$SM_INPUT_CONFIG_DIR` (default /opt/ml/input/config) is the source of
  truth, since bring-your-own containers get only the files; framework containers also export SM_*.
- Node rank = index of the current host among the distribution hosts, master = the first of them,
  port 7777. Heterogeneous clusters: the distribution groups come from `--instance-groups`, else the
  hyperparameter `sagemaker_distribution_instance_groups` (how the SageMaker SDK sends them); hosts
  of other groups sit the job out.
- Hyperparameters: each value in hyperparameters.json is JSON-decoded when it decodes; keys starting
  with `sagemaker_` are the platform's. Script arguments follow `mapping.to_cmd_args` (keys sorted,
  one-letter keys as `-k`, dicts as `k=v,k2=v2`, everything else `str()`), variables follow
  `mapping.to_env_vars` (`SM_HP_<KEY>` upper-cased, non-strings as compact sorted JSON).
- Processes per node: SM_NUM_GPUS, else SM_NUM_NEURONS, else (bring-your-own images) the Neuron core
  count as the toolkit finds it (64 on trn2.48xlarge, else `neuron-ls -j`), else visible GPUs or 1.
- The script's variables: every one the toolkit exports (`Environment.to_env_vars`: SM_TRAINING_ENV,
  SM_MODULE_DIR, SM_NUM_GPUS, ...), computed from the config files in `sagemaker_toolkit_env` for the local
  emulation (`emulate`) and bring-your-own images (`framework_environment`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cloudddp.cluster.claims import Claim
from cloudddp.cluster.environment import EmulatedCluster, EmulatedNode, host_map_arg
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import ClusterPlan, EnvReader, read_text
from cloudddp.cluster.sagemaker_toolkit_env import (
    MachineCounts,
    gpu_count,
    split_hyperparameters,
    to_cmd_args,
    to_env_value,
    toolkit_variables,
)
from cloudddp.errors import CloudDDPError

NAME = "sagemaker"
DEFAULT_CONFIG_DIR = "/opt/ml/input/config"
MASTER_PORT = 7777
DISTRIBUTION_GROUPS = "sagemaker_distribution_instance_groups"


def config_dir(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("SM_INPUT_CONFIG_DIR") or DEFAULT_CONFIG_DIR)


def config_file_exists(path: Path, environ: Mapping[str, str]) -> bool:
    """Whether a config file is there. A folder that cannot be looked into (no permission, a name too long) is an
    error naming it: pathlib's exists() lets such an OSError out (Python 3.11 swallows only ENOENT, ENOTDIR, EBADF,
    ELOOP), and detection runs on every platform, so it was a traceback on any of them."""
    try:
        return path.exists()
    except OSError as exc:
        where = "SM_INPUT_CONFIG_DIR" if environ.get("SM_INPUT_CONFIG_DIR") else "SageMaker's default"
        raise CloudDDPError(
            f"sagemaker: cannot look for {path} (the config folder from {where}): {exc.strerror or exc}. Make the "
            f"folder readable, point SM_INPUT_CONFIG_DIR at the right one, or name this job's platform with "
            f"--provider (or CLOUDDDP_PROVIDER) to skip detection."
        ) from None


def detect(environ: Mapping[str, str]) -> bool:
    if environ.get("SM_HOSTS") or environ.get("SM_CURRENT_HOST"):
        return True
    return has_resource_config(environ)


def has_resource_config(environ: Mapping[str, str]) -> bool:
    return config_file_exists(config_dir(environ) / "resourceconfig.json", environ)


# Framework containers export both (the toolkit's Environment.to_env_vars, aws/sagemaker-training-toolkit commit
# 33839372faf8017edb7dafc6290c1ef63557b404, src/sagemaker_training/environment.py); bring-your-own images get
# resourceconfig.json instead, which meets the contract on its own.
CLAIMS = (
    Claim(
        NAME, "a SageMaker training job", ("SM_HOSTS", "SM_CURRENT_HOST"),
        upstream="aws/sagemaker-training-toolkit 33839372faf8017edb7dafc6290c1ef63557b404 environment.py",
        met_otherwise=has_resource_config,
    ),
)  # fmt: skip


def read_json_file(path: Path, expected: type) -> Any:
    """A JSON config file (None when absent); anything else is an error naming the file."""
    text = read_text(path, "sagemaker: the file")  # read_text names the path itself
    if text is None:
        return None
    try:
        data = json.loads(text or ("{}" if expected is dict else "null"))
    except json.JSONDecodeError as exc:
        raise CloudDDPError(f"sagemaker: the file {path} is not valid JSON ({exc.msg}).") from None
    if not isinstance(data, expected):
        raise CloudDDPError(f"sagemaker: the file {path} must hold a JSON {expected.__name__}, got {data!r:.200}.")
    return data


def check_host_list(value: Any, what: str) -> list[str]:
    """A non-empty list of unique host-name strings, else an error naming `what`."""
    if not isinstance(value, list) or not value or not all(isinstance(h, str) and h for h in value):
        raise CloudDDPError(f"sagemaker: {what} must be a non-empty list of host names, got {value!r:.200}.")
    if len(set(value)) != len(value):
        raise CloudDDPError(f"sagemaker: {what} names a host twice: {value!r:.200}.")
    return value


def check_instance_groups(value: Any, what: str) -> list[dict[str, Any]]:
    """resourceconfig's `instance_groups`: a list of {instance_group_name: str, hosts: [str]}."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise CloudDDPError(f"sagemaker: {what} must be a list of instance groups, got {value!r:.200}.")
    for group in value:
        if not isinstance(group, dict) or not isinstance(group.get("instance_group_name"), str):
            raise CloudDDPError(
                f"sagemaker: {what} has an entry without a string 'instance_group_name': {group!r:.200}."
            )
        check_host_list(group.get("hosts"), f"{what} (group {group['instance_group_name']!r}) 'hosts'")
    return value


def read_resource_config(environ: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """resourceconfig.json if present, else one built from SM_* variables."""
    path = config_dir(environ) / "resourceconfig.json"
    data = read_json_file(path, dict)
    if data is not None:
        if not isinstance(data.get("current_host"), str) or not data["current_host"]:
            raise CloudDDPError(
                f"sagemaker: the file {path} has no valid 'current_host' (found {data.get('current_host')!r})."
            )
        check_host_list(data.get("hosts"), f"'hosts' in {path}")
        check_instance_groups(data.get("instance_groups"), f"'instance_groups' in {path}")
        return data, str(path)
    env = EnvReader(environ, NAME)
    hosts = env.json(
        "SM_HOSTS",
        lambda v: isinstance(v, list) and bool(v) and all(isinstance(h, str) and h for h in v),
        'a non-empty JSON list of host names, like ["algo-1","algo-2"]',
    )
    check_host_list(hosts, "SM_HOSTS")
    data = {
        "current_host": env.str("SM_CURRENT_HOST"),
        "hosts": hosts,
        "network_interface_name": environ.get("SM_NETWORK_INTERFACE_NAME") or None,
        "current_instance_type": environ.get("SM_CURRENT_INSTANCE_TYPE") or "",
        "current_group_name": environ.get("SM_CURRENT_INSTANCE_GROUP") or None,
    }
    if environ.get("SM_INSTANCE_GROUPS_DICT"):
        groups = env.json("SM_INSTANCE_GROUPS_DICT", lambda v: isinstance(v, dict), "a JSON object of instance groups")
        data["instance_groups"] = check_instance_groups(list(groups.values()), "SM_INSTANCE_GROUPS_DICT")
    return data, "SM_HOSTS/SM_CURRENT_HOST"


# -- hyperparameters: the toolkit's rules (environment.read_hyperparameters, mapping.to_cmd_args/to_env_vars)


def read_hyperparameters(environ: Mapping[str, str]) -> dict[str, Any]:
    """hyperparameters.json with each value JSON-decoded where it decodes (environment.read_hyperparameters)."""
    path = config_dir(environ) / "hyperparameters.json"
    raw = read_json_file(path, dict) or {}
    decoded: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            decoded[key] = json.loads(value)
        except (ValueError, TypeError):
            decoded[key] = value
    return decoded


def user_hyperparameters(hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
    """Without the SDK's and the toolkit's own keys: environment.py splits them off with
    mapping.split_by_criteria(keys=params.SAGEMAKER_HYPERPARAMETERS, prefix=params.SAGEMAKER_PREFIX) (hyperparameter
    tuning adds _tuning_objective_metric to every training job it starts; it does not reach the script either)."""
    return split_hyperparameters(hyperparameters)[1]


def hyperparameter_args(environ: Mapping[str, str]) -> list[str]:
    """The script arguments the toolkit would pass for hyperparameters.json (bring-your-own images)."""
    return to_cmd_args(user_hyperparameters(read_hyperparameters(environ)))


def hyperparameter_variables(hyperparameters: Mapping[str, Any]) -> dict[str, str]:
    """SM_HPS, SM_HP_<KEY> and SM_USER_ARGS as the toolkit exports them (Environment.to_env_vars)."""
    user = user_hyperparameters(hyperparameters)
    variables = {"SM_HPS": to_env_value(user), "SM_USER_ARGS": to_env_value(to_cmd_args(user))}
    variables.update({f"SM_HP_{key.upper()}": to_env_value(value) for key, value in user.items()})
    return variables


# -- the plan


def distribution_groups(
    environ: Mapping[str, str], options: DetectOptions, hyperparameters: Mapping[str, Any]
) -> tuple[list[str] | None, str]:
    """Instance groups chosen for distribution, and where that choice came from."""
    if options.instance_groups is not None:
        return options.instance_groups, "--instance-groups"
    if environ.get("CLOUDDDP_SAGEMAKER_INSTANCE_GROUPS"):
        groups = [g.strip() for g in environ["CLOUDDDP_SAGEMAKER_INSTANCE_GROUPS"].split(",") if g.strip()]
        return groups, "CLOUDDDP_SAGEMAKER_INSTANCE_GROUPS"
    if DISTRIBUTION_GROUPS in hyperparameters:
        value = hyperparameters[DISTRIBUTION_GROUPS]
        if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
            raise CloudDDPError(
                f"sagemaker: the hyperparameter {DISTRIBUTION_GROUPS}={value!r:.200} in hyperparameters.json "
                f'must be a JSON list of instance group names, like ["train"].'
            )
        return value, f"hyperparameters.json {DISTRIBUTION_GROUPS}"
    return None, "default (every host)"


def participating_hosts(config: dict[str, Any], chosen_groups: list[str] | None, source: str) -> list[str]:
    """Hosts that join the distributed job, in SageMaker's order."""
    hosts: list[str] = list(config["hosts"])
    groups = config.get("instance_groups") or []
    if not chosen_groups or not groups:
        return hosts
    known = {g["instance_group_name"]: g for g in groups}
    unknown = [g for g in chosen_groups if g not in known]
    if unknown:
        raise CloudDDPError(
            f"sagemaker: instance group(s) {', '.join(unknown)} chosen for distribution are not "
            f"in {source} (its groups: {', '.join(sorted(map(str, known)))})."
        )
    # The toolkit's order (environment.py get_distribution_hosts, aws/sagemaker-training-toolkit commit
    # 33839372faf8017edb7dafc6290c1ef63557b404): each chosen group's hosts as listed, the groups in
    # resourceconfig.json's order; the first is the master. Not config["hosts"] filtered: its order may differ.
    return [h for g in groups if g["instance_group_name"] in chosen_groups for h in g["hosts"]]


def neuron_cores(instance_type: str, environ: Mapping[str, str]) -> int:
    """Neuron cores the way the toolkit counts them (environment.num_neurons), 0 without Neuron."""
    if "trn2.48xlarge" in instance_type:
        return 64
    tool = shutil.which("neuron-ls", path=environ.get("PATH"))
    if not tool:
        return 0
    try:
        output = subprocess.run([tool, "-j"], capture_output=True, check=True, timeout=30).stdout
        devices = json.loads(output.decode("utf-8"))
        return sum(int(d.get("nc_count", 0)) for d in devices if isinstance(d, dict))
    except (OSError, subprocess.SubprocessError, ValueError, TypeError, AttributeError):
        return 0  # as the toolkit: no usable neuron-ls means no Neuron cores


def nproc_for(environ: Mapping[str, str], config: Mapping[str, Any]) -> tuple[int, str]:
    """Processes per node from SageMaker's accelerator counts, else Neuron cores; 0 for the default."""
    env = EnvReader(environ, NAME)
    for name in ("SM_NUM_GPUS", "SM_NUM_NEURONS"):
        count = env.int(name, 0, minimum=0)
        if count > 0:
            return count, name
    instance_type = str(config.get("current_instance_type") or "")
    if any(kind in instance_type for kind in ("trn", "inf")):
        cores = neuron_cores(instance_type, environ)
        return cores, f"Neuron cores on {instance_type} (as the SageMaker toolkit counts them)"
    return 0, ""


def failure_file(environ: Mapping[str, str]) -> str | None:
    """Where SageMaker reads a failure reason: only where SageMaker's layout exists (never invented)."""
    if environ.get("SM_OUTPUT_DIR"):
        return os.path.join(environ["SM_OUTPUT_DIR"], "failure")
    output = config_dir(environ).parent.parent / "output"  # /opt/ml/output beside /opt/ml/input/config
    try:
        return str(output / "failure") if output.is_dir() else None
    except OSError:  # a folder that cannot be looked into: no reason file, the log still has the message
        return None


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    config, source = read_resource_config(environ)
    current = config["current_host"]
    if current not in config["hosts"]:
        raise CloudDDPError(
            f"sagemaker: the current host {current!r} is not among the hosts {config['hosts']!r} in {source}."
        )
    chosen, chosen_source = distribution_groups(environ, options, read_hyperparameters(environ))
    hosts = participating_hosts(config, chosen, source)
    result = ClusterPlan(provider=NAME)
    if environ.get("TRAINING_JOB_NAME"):
        result.set("rdzv_id", environ["TRAINING_JOB_NAME"], "TRAINING_JOB_NAME")
    result.set("failure_file", failure_file(environ), "SM_OUTPUT_DIR, else /opt/ml/output if it exists")
    if current not in hosts:
        result.participates = False
        result.skip_reason = (
            f"host {current} is in instance group {config.get('current_group_name')!r}, "
            f"not among the groups chosen for distribution ({', '.join(chosen or [])}, from {chosen_source}); "
            f"it sits this job out."
        )
        return result
    result.set("hosts", hosts, source if not chosen else f"{source}, groups from {chosen_source}")
    result.set("nnodes", len(hosts), source)
    result.set("node_rank", hosts.index(current), f"{source} (index of {current})")
    result.set("master_addr", hosts[0], f"{source} (first host)")
    result.set("master_port", MASTER_PORT, "SageMaker convention (AWS drivers use 7777)")
    result.set_nproc_per_node(*nproc_for(environ, config))
    ifname = config.get("network_interface_name") or environ.get("SM_NETWORK_INTERFACE_NAME")
    if ifname:
        result.set("network_interface", ifname, source)
    return result


def machine_counts(environ: Mapping[str, str], instance_type: str) -> MachineCounts:
    """CPUs, GPUs and Neuron cores as the toolkit counts them (os.cpu_count, `nvidia-smi --list-gpus`, neuron_cores);
    SM_NUM_GPUS or SM_NUM_NEURONS set already is the caller's pin."""
    env = EnvReader(environ, NAME)
    gpus = env.int("SM_NUM_GPUS", minimum=0) if env.has("SM_NUM_GPUS") else gpu_count(environ)
    if env.has("SM_NUM_NEURONS"):
        neurons = env.int("SM_NUM_NEURONS", minimum=0)
    else:
        neurons = neuron_cores(instance_type, environ)
    return MachineCounts(cpus=os.cpu_count() or 1, gpus=gpus, neurons=neurons)


def toolkit_variables_from_files(environ: Mapping[str, str]) -> dict[str, str]:
    """The training toolkit's variables (SM_TRAINING_ENV and the rest) from the config files and `environ`."""
    config = config_dir(environ)
    resource, _ = read_resource_config(environ)
    channels = read_json_file(config / "inputdataconfig.json", dict) or {}
    counts = machine_counts(environ, str(resource.get("current_instance_type", "local")))
    return toolkit_variables(config.parent.parent, resource, channels, read_hyperparameters(environ), environ, counts)


def framework_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables AWS's framework containers give the script (the training toolkit's), derived from the
    config files.

    Bring-your-own containers get only /opt/ml/input/config/*.json; exporting the same
    variables there lets one training script run unchanged in both. Only variables that
    are not set already are returned; where the toolkit ran (SM_TRAINING_ENV is set), only the
    cheap ones are derived (no nvidia-smi, no neuron-ls).
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
    has_resources = config_file_exists(config / "resourceconfig.json", environ)
    if has_resources and not environ.get("SM_TRAINING_ENV"):
        derived.update(toolkit_variables_from_files(environ))
        return {k: v for k, v in derived.items() if not environ.get(k)}
    if has_resources:
        data, _ = read_resource_config(environ)
        derived["SM_HOSTS"] = to_env_value(data["hosts"])
        derived["SM_CURRENT_HOST"] = data["current_host"]
        if data.get("network_interface_name"):
            derived["SM_NETWORK_INTERFACE_NAME"] = data["network_interface_name"]
    channel_config = read_json_file(config / "inputdataconfig.json", dict)
    if channel_config is not None:
        channels = sorted(channel_config)
        derived["SM_CHANNELS"] = to_env_value(channels)
        for channel in channels:
            derived[f"SM_CHANNEL_{channel.upper()}"] = str(config.parent / "data" / channel)
    if config_file_exists(config / "hyperparameters.json", environ):
        derived.update(hyperparameter_variables(read_hyperparameters(environ)))
    return {k: v for k, v in derived.items() if not environ.get(k)}


def code_on_python_path(environ: Mapping[str, str], code_dir: str) -> dict[str, str]:
    """PYTHONPATH with the code folder first, as the training toolkit sets it for the script.

    The toolkit puts its code folder on sys.path (sagemaker-training-toolkit 33839372, entry_point.py `install`:
    sys.path.insert(0, code_dir)) and exports sys.path as PYTHONPATH (environment.py `write_env_vars`), so an entry
    point in a subfolder (`sub/train.py`) imports modules at the top of source_dir. Python alone puts only the
    script's own folder on sys.path. Every SageMaker path runs the launcher in the code folder (the toolkit's
    cwd, the bring-your-own entry command's `cd /opt/ml/code`, the emulation's source_dir): `code_dir` is that.
    The folders already on PYTHONPATH stay, after it.
    """
    present = [part for part in environ.get("PYTHONPATH", "").split(os.pathsep) if part]
    if code_dir in present:
        return {}
    return {"PYTHONPATH": os.pathsep.join([code_dir, *present])}


# -- the local emulation: each node as a SageMaker container sees it


def checkpoint_folder(local_path: str | None) -> str:
    """CheckpointConfig.LocalPath under an emulated host's /opt/ml folder (default: checkpoints)."""
    chosen = local_path or "/opt/ml/checkpoints"
    relative = (chosen[len("/opt/ml/") :] if chosen.startswith("/opt/ml/") else chosen).strip(
        "/"
    )  # 3.8: no removeprefix
    if local_path and (not local_path.startswith("/opt/ml/") or not relative or ".." in relative.split("/")):
        raise CloudDDPError(
            f"sagemaker: checkpoint_local_path {local_path!r} is not a folder under /opt/ml/, which each emulated "
            f"host has in its own folder; use a path like /opt/ml/checkpoints."
        )
    return relative


def emulated_node(
    cluster: EmulatedCluster, hosts: list[str], rank: int, environ: Mapping[str, str], counts: MachineCounts
) -> EmulatedNode:
    """One host's folders, config files and variables: those of a framework container (training toolkit)."""
    host, channels = hosts[rank], sorted(cluster.channels)
    hyperparameters = dict(cluster.hyperparameters)
    if "sagemaker_job_name" in hyperparameters:  # the SDK v2's own keys (cloudddp.sagemaker local mode): this job
        hyperparameters["sagemaker_job_name"] = cluster.job_name
    root = cluster.run_dir / "nodes" / host
    config = root / "input" / "config"
    node = EmulatedNode(name=host, rank=rank, root=root)
    node.model_dir, node.checkpoint_dir = root / "model", root / checkpoint_folder(cluster.checkpoint_path)
    node.channels = {c: root / "input" / "data" / c for c in channels}
    node.dirs = [config, node.model_dir, root / "output" / "data", node.checkpoint_dir]
    group = {"instance_group_name": "homogeneousCluster", "instance_type": "local", "hosts": hosts}
    resource = {"current_host": host, "current_instance_type": "local", "current_group_name": "homogeneousCluster",
                "hosts": hosts, "instance_groups": [group], "network_interface_name": "lo"}  # fmt: skip
    data = {c: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}
            for c in channels}  # fmt: skip
    node.files = {
        config / "resourceconfig.json": resource,
        # The SDK JSON-encodes every value (sagemaker-python-sdk: EstimatorBase.set_hyperparameters + json.dumps).
        config / "hyperparameters.json": {k: json.dumps(v) for k, v in hyperparameters.items()},
        config / "inputdataconfig.json": data,
        config / "checkpointconfig.json": {"LocalPath": str(node.checkpoint_dir)},
    }
    decoded = {k: json.loads(json.dumps(v)) for k, v in hyperparameters.items()}  # as the toolkit reads the file
    container = {**environ, "TRAINING_JOB_NAME": cluster.job_name}  # what the node's processes inherit
    node.env = {
        "TRAINING_JOB_NAME": cluster.job_name,
        **toolkit_variables(root, resource, data, decoded, container, counts),
    }
    node.launcher_args = ["--host-map", host_map_arg(hosts), "--hyperparameters-as-args"]
    return node


def emulate(cluster: EmulatedCluster, environ: Mapping[str, str] | None = None) -> list[EmulatedNode]:
    """`<run>/nodes/algo-N/` laid out like /opt/ml, with the variables SageMaker's training toolkit gives the script
    in a framework container (SM_TRAINING_ENV and the rest, cloudddp.cluster.sagemaker_toolkit_env).

    `environ` is what the nodes inherit (default: this process's environment). SM_NUM_GPUS there pins the GPU
    count; else it is this machine's, counted as the toolkit counts (nvidia-smi), once for every node."""
    environ = os.environ if environ is None else environ
    hosts = [f"algo-{i + 1}" for i in range(cluster.nodes)]
    counts = machine_counts(environ, "local")
    return [emulated_node(cluster, hosts, rank, environ, counts) for rank in range(len(hosts))]


def worker_environment(environ: Mapping[str, str], code_dir: str) -> dict[str, str]:
    """What the training toolkit adds before it starts the script: the framework variables a bring-your-own image
    lacks (they get only the files) and the code folder on PYTHONPATH."""
    merged = {**framework_environment(environ), **environ}
    merged.update(code_on_python_path(merged, code_dir))
    return merged
