"""The variables SageMaker's training toolkit exports to the training script, computed as the toolkit computes them.

Source: aws/sagemaker-training-toolkit, commit 33839372faf8017edb7dafc6290c1ef63557b404, `src/sagemaker_training/`:
`environment.py` (`Environment.__init__`, its properties, `to_env_vars`, `num_gpus`), `mapping.py` (`to_env_vars`,
`to_cmd_args`, `split_by_criteria`, `MappingMixin`) and `params.py`. A framework container (AWS's PyTorch images)
builds `Environment()` from /opt/ml/input/config/*.json and its process environment, and hands the script
`to_env_vars()` (trainer.train -> entry_point.run -> environment.write_env_vars) plus the variables `__init__` sets
in os.environ (CURRENT_HOST, SAGEMAKER_JOB_NAME, SAGEMAKER_REGION). Bring-your-own images get only the files and
the local emulation has no toolkit at all: both get the same variables from here (`toolkit_variables`).

Values that exist only on an instance take the caller's honest equivalents: the folders are under the caller's
`base` (/opt/ml on SageMaker, the emulated host's folder locally), the counts are this machine's (`MachineCounts`).
Standard library only, Python 3.8: this module runs inside training images.
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INFO = 20  # logging.INFO: the toolkit's log level without `sagemaker_container_log_level`
PREFIX = "sagemaker_"  # params.SAGEMAKER_PREFIX
# params.SAGEMAKER_HYPERPARAMETERS: the toolkit's own keys, in neither SM_HPS nor SM_FRAMEWORK_PARAMS.
SAGEMAKER_HYPERPARAMETERS = (
    "sagemaker_program",
    "sagemaker_submit_directory",
    "sagemaker_enable_cloudwatch_metrics",
    "sagemaker_region",
    "sagemaker_container_log_level",
    "sagemaker_job_name",
    "default_user_module_name",
    "_tuning_objective_metric",
    "sagemaker_s3_output",
)
# Environment.get_distribution_instance_groups_from_resource_config: any of these makes the current group distributed.
DISTRIBUTION_FLAGS = (
    "sagemaker_mpi_enabled",
    "sagemaker_parameter_server_enabled",
    "sagemaker_distributed_dataparallel_enabled",
    "sagemaker_pytorch_ddp_enabled",
    "sagemaker_pytorch_xla_multi_worker_enabled",
    "sagemaker_multi_worker_mirrored_strategy_enabled",
    "sagemaker_torch_distributed_enabled",
)
DEFAULT_GROUP = "homogeneousCluster"


@dataclass(frozen=True)
class MachineCounts:
    """Environment.num_cpus, num_gpus and num_neurons: what the instance has (here: this machine)."""

    cpus: int
    gpus: int
    neurons: int


# -- mapping.py


def _decode(value: Any) -> str:
    """mapping._decode: None -> "", bytes -> latin-1 text, anything else str()."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("latin1")
    return str(value)


def to_cmd_args(hyperparameters: Mapping[str, Any]) -> list[str]:
    """mapping.to_cmd_args: sorted keys; `-k` for one-letter keys, else `--key`; dicts as `k=v,...`."""
    args: list[str] = []
    for key in sorted(hyperparameters):
        name = _decode(key)
        value = hyperparameters[key]
        rendered = ",".join(f"{k}={v}" for k, v in sorted(value.items())) if hasattr(value, "items") else _decode(value)
        args += [(f"--{name}" if len(name) > 1 else f"-{name}") if name else "", rendered]
    return args


def to_env_value(value: Any) -> str:
    """mapping.to_env_vars' format_value: strings as they are, None as "", the rest compact sorted JSON."""
    if value is None or isinstance(value, (str, bytes)):
        return _decode(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def split_hyperparameters(hyperparameters: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(SageMaker's, the user's): mapping.split_by_criteria(keys=SAGEMAKER_HYPERPARAMETERS, prefix=PREFIX)."""
    platform = {k: v for k, v in hyperparameters.items() if k in SAGEMAKER_HYPERPARAMETERS or k.startswith(PREFIX)}
    return platform, {k: v for k, v in hyperparameters.items() if k not in platform}


# -- what the instance has


# The device nodes of a machine (or a container given GPUs) with NVIDIA GPUs: none, no nvidia-smi to run. Every
# launcher start on SageMaker and every local launch count GPUs; on a CPU machine that now costs one glob.
GPU_DEVICES = "/dev/nvidia[0-9]*"
# The toolkit waits for nvidia-smi without a limit (environment.num_gpus, check_output); a hung driver would hang
# every node's start, so ours gives up after this long, says so, and counts no GPU.
NVIDIA_SMI_SECONDS = 10.0


def gpu_count(environ: Mapping[str, str]) -> int:
    """GPUs as environment.num_gpus counts them: the lines of `nvidia-smi --list-gpus` starting with "GPU ", 0 when
    nvidia-smi is missing or fails, or when the machine has no GPU device node. Where CUDA_VISIBLE_DEVICES is set,
    no more than it names (the script's processes see only those; an empty one hides them all). Torch is never
    imported: it costs seconds."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    named = None if visible is None else len([v for v in visible.split(",") if v.strip() and v.strip() != "-1"])
    tool = shutil.which("nvidia-smi", path=environ.get("PATH"))
    if named == 0 or not tool or not glob.glob(GPU_DEVICES):
        return 0
    try:
        output = subprocess.run(
            [tool, "--list-gpus"], capture_output=True, check=True, timeout=NVIDIA_SMI_SECONDS
        ).stdout
    except subprocess.TimeoutExpired:
        print(
            f"cloudddp: warning: `nvidia-smi --list-gpus` did not answer within {NVIDIA_SMI_SECONDS:g} s; "
            f"SM_NUM_GPUS=0 (set SM_NUM_GPUS to the GPU count to skip the question).",
            file=sys.stderr,
            flush=True,
        )
        return 0
    except (OSError, subprocess.SubprocessError):
        return 0
    found = sum(1 for line in output.decode("utf-8", "replace").split("\n") if line.startswith("GPU "))
    return found if named is None else min(found, named)


# -- environment.Environment


def _module_fields(platform: Mapping[str, Any], environ: Mapping[str, str], code_dir: str) -> dict[str, Any]:
    """module_name, user_entry_point, module_dir, log_level, framework_module as Environment.__init__ sets them:
    SAGEMAKER_PROGRAM (process environment) before the hyperparameter sagemaker_program (module_name is the
    string "None" with neither, as str(None)); module_dir and log_level from the hyperparameters only."""
    from_env = environ.get("SAGEMAKER_PROGRAM")
    module_name = from_env if from_env is not None else str(platform.get("sagemaker_program"))
    return {
        "module_name": module_name[:-3] if module_name.endswith(".py") else module_name,  # _parse_module_name
        "user_entry_point": from_env or platform.get("sagemaker_program"),
        "module_dir": str(platform.get("sagemaker_submit_directory", code_dir)),
        "log_level": platform.get("sagemaker_container_log_level", INFO),
        "framework_module": environ.get("SAGEMAKER_TRAINING_MODULE"),
    }


def _group_fields(resource_config: Mapping[str, Any], framework: Mapping[str, Any]) -> dict[str, Any]:
    """The heterogeneous-cluster properties (Environment.get_* and the lines of __init__ after them)."""
    hosts = list(resource_config["hosts"])
    current_group = resource_config.get("current_group_name", DEFAULT_GROUP)
    groups = resource_config.get("instance_groups") or []
    flagged = any(framework.get(flag, False) for flag in DISTRIBUTION_FLAGS)
    chosen = framework.get("sagemaker_distribution_instance_groups", [current_group] if flagged else [])
    if groups:
        distribution_hosts = [h for g in groups if g["instance_group_name"] in chosen for h in g["hosts"]]
    else:
        distribution_hosts = list(hosts)  # "local mode" in get_distribution_hosts
    master = distribution_hosts[0] if distribution_hosts else hosts[0]
    names = [g["instance_group_name"] for g in groups]
    current_hosts = next((g["hosts"] for g in groups if g["instance_group_name"] == current_group), [])
    return {
        "current_instance_group": current_group,
        "current_instance_group_hosts": current_hosts,
        "instance_groups": names,
        "instance_groups_dict": {g["instance_group_name"]: g for g in groups},
        "distribution_instance_groups": chosen,
        "distribution_hosts": distribution_hosts,
        "is_hetero": len(names) > 1,
        "master_hostname": master,
        "is_master": resource_config["current_host"] == master,
    }


def training_environment(
    base: Path,
    resource_config: Mapping[str, Any],
    input_data_config: Mapping[str, Any],
    hyperparameters: Mapping[str, Any],
    environ: Mapping[str, str],
    counts: MachineCounts,
) -> dict[str, Any]:
    """`dict(Environment())`: every property of the toolkit's Environment by name, the value of SM_TRAINING_ENV.

    `base` stands for the toolkit's base_dir (/opt/ml); `hyperparameters` are hyperparameters.json decoded
    (environment.read_hyperparameters); `environ` is the container's process environment."""
    platform, user = split_hyperparameters(hyperparameters)
    framework = {k: v for k, v in platform.items() if k not in SAGEMAKER_HYPERPARAMETERS}
    mp_parameters = environ.get("SM_HP_MP_PARAMETERS")
    return {
        "additional_framework_parameters": framework,
        "channel_input_dirs": {c: str(base / "input" / "data" / c) for c in input_data_config},
        "current_host": resource_config["current_host"],
        "current_instance_type": resource_config.get("current_instance_type", "local"),
        **_group_fields(resource_config, framework),
        **_module_fields(platform, environ, str(base / "code")),
        "hosts": resource_config["hosts"],
        "hyperparameters": user,
        "input_config_dir": str(base / "input" / "config"),
        "input_data_config": input_data_config,
        "input_dir": str(base / "input"),
        "is_modelparallel_enabled": mp_parameters and mp_parameters != "{}",
        "is_smddpmprun_installed": shutil.which("smddpmprun", path=environ.get("PATH")) is not None,
        "is_smddprun_installed": shutil.which("smddprun", path=environ.get("PATH")) is not None,
        "job_name": environ.get("TRAINING_JOB_NAME"),
        "model_dir": str(base / "model"),
        "network_interface_name": resource_config.get("network_interface_name", "eth0"),
        "num_cpus": counts.cpus,
        "num_gpus": counts.gpus,
        "num_neurons": counts.neurons,
        "output_data_dir": str(base / "output" / "data"),
        "output_dir": str(base / "output"),
        "output_intermediate_dir": str(base / "output" / "intermediate"),
        "resource_config": resource_config,
        "topology": resource_config.get("topology", []),
    }


# The names and order of Environment.to_env_vars' mapping (each becomes SM_<NAME>), as training_environment's keys.
EXPORTED = (
    ("hosts", "hosts"),
    ("network_interface_name", "network_interface_name"),
    ("hps", "hyperparameters"),
    ("user_entry_point", "user_entry_point"),
    ("framework_params", "additional_framework_parameters"),
    ("resource_config", "resource_config"),
    ("input_data_config", "input_data_config"),
    ("output_data_dir", "output_data_dir"),
    ("current_host", "current_host"),
    ("current_instance_type", "current_instance_type"),
    ("current_instance_group", "current_instance_group"),
    ("current_instance_group_hosts", "current_instance_group_hosts"),
    ("instance_groups", "instance_groups"),
    ("instance_groups_dict", "instance_groups_dict"),
    ("distribution_instance_groups", "distribution_instance_groups"),
    ("is_hetero", "is_hetero"),
    ("module_name", "module_name"),
    ("log_level", "log_level"),
    ("framework_module", "framework_module"),
    ("input_dir", "input_dir"),
    ("input_config_dir", "input_config_dir"),
    ("output_dir", "output_dir"),
    ("num_cpus", "num_cpus"),
    ("num_gpus", "num_gpus"),
    ("num_neurons", "num_neurons"),
    ("model_dir", "model_dir"),
    ("module_dir", "module_dir"),
    ("output_intermediate_dir", "output_intermediate_dir"),
)


def exported_variables(training_env: Mapping[str, Any]) -> dict[str, str]:
    """Environment.to_env_vars through mapping.to_env_vars: SM_<NAME> for each entry, SM_CHANNEL_<CHANNEL> and
    SM_HP_<KEY> (upper-cased as they are), SM_TOPOLOGY only where resourceconfig.json has a topology."""
    env: dict[str, Any] = {name: training_env[key] for name, key in EXPORTED}
    env.update(
        channels=sorted(training_env["channel_input_dirs"]),
        training_env=dict(training_env),
        user_args=to_cmd_args(training_env["hyperparameters"]),
    )
    if training_env["topology"]:
        env["topology"] = training_env["topology"]
    env.update({f"channel_{name}": path for name, path in training_env["channel_input_dirs"].items()})
    env.update({f"hp_{key}": value for key, value in training_env["hyperparameters"].items()})
    return {f"SM_{str(key).upper()}" if key else "": to_env_value(value) for key, value in env.items()}


def process_variables(
    training_env: Mapping[str, Any], hyperparameters: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, str]:
    """What Environment.__init__ writes to os.environ, which the script inherits. The region falls back on boto3's
    (here AWS_DEFAULT_REGION, the variable boto3 reads; its config file is not)."""
    platform, _ = split_hyperparameters(hyperparameters)
    region = platform.get("sagemaker_region", environ.get("AWS_DEFAULT_REGION"))
    return {
        "SAGEMAKER_JOB_NAME": to_env_value(platform.get("sagemaker_job_name", "")),
        "CURRENT_HOST": training_env["current_host"],
        "SAGEMAKER_REGION": to_env_value(region or ""),
    }


def toolkit_variables(
    base: Path,
    resource_config: Mapping[str, Any],
    input_data_config: Mapping[str, Any],
    hyperparameters: Mapping[str, Any],
    environ: Mapping[str, str],
    counts: MachineCounts,
) -> dict[str, str]:
    """Every variable a framework container's script gets from the toolkit (see the module docstring)."""
    training_env = training_environment(base, resource_config, input_data_config, hyperparameters, environ, counts)
    return {**exported_variables(training_env), **process_variables(training_env, hyperparameters, environ)}
