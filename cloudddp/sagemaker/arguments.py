"""The SageMaker SDK v2 `PyTorch(...)` arguments: which ones cloudddp takes, and what each becomes.

Semantics from aws/sagemaker-python-sdk at tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0):
`src/sagemaker/estimator.py` (EstimatorBase, Framework), `src/sagemaker/pytorch/estimator.py`,
`src/sagemaker/fw_utils.py`. Every v2 argument is either taken (`Arguments`), or refused by
name with the reason (`NOT_SUPPORTED`): none is silently ignored.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cloudddp.errors import CloudDDPError
from cloudddp.metrics import definition_problem
from cloudddp.providers.sagemaker import validation
from cloudddp.providers.sagemaker.instance_groups import InstanceGroupSetting
from cloudddp.providers.sagemaker.service_model import check_shape, maximum
from cloudddp.redact import REDACTED, is_secret_name
from cloudddp.sagemaker.distribution_table import distribution_problems
from cloudddp.sagemaker.tensorboard import tensorboard_request
from cloudddp.terminal import emit

logger = logging.getLogger(__name__)

LOCAL_TYPES = ("local", "local_gpu")
DEFAULT_MAX_RUN = 24 * 60 * 60  # v2's EstimatorBase default
DEFAULT_VOLUME_SIZE = 30
OPT_ML = "/opt/ml/"
DEFAULT_CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"  # the service's default (CheckpointConfig.LocalPath)
# Both mean "run the entry point under torchrun on every host": cloudddp's launcher does exactly that.
LAUNCHER_DISTRIBUTIONS = ("torch_distributed", "pytorchddp")
# Sent as AlgorithmSpecification.TrainingInputMode, as v2 sends input_mode (src/sagemaker/estimator.py
# `_TrainingJob._get_train_args`: train_args["input_mode"] = estimator.input_mode); local mode reads every channel
# as File (src/sagemaker/local/image.py `write_config_files`: {"TrainingInputMode": "File"}).
INPUT_MODES = ("File", "FastFile")

NOT_SUPPORTED: dict[str, str] = {
    "git_config": "clone the repository yourself and pass its folder as source_dir",
    "code_location": "the source archive goes where the SDK's default puts it ({output bucket}/{job}/source/)",
    "compiler_config": "SageMaker Training Compiler needs the SDK's own launcher, not cloudddp's",
    "training_recipe": "HyperPod recipes need the SDK's recipe launcher",
    "recipe_overrides": "HyperPod recipes need the SDK's recipe launcher",
    "model_uri": "pass the model's S3 URI as a channel in fit(inputs={'model': ...})",
    "model_channel_name": "pass the model's S3 URI as a channel in fit(inputs={'model': ...})",
    "enable_sagemaker_metrics": "the metrics time series flag is not sent",
    "rules": "SageMaker Debugger rules are not configured by cloudddp",
    "profiler_config": "the SageMaker profiler is not configured by cloudddp (disable_profiler=True is accepted)",
    "max_retry_attempts": "automatic job retries are not requested",
    "keep_alive_period_in_seconds": "warm pools are not requested",
    "training_repository_access_mode": "private image repositories are not configured",
    "training_repository_credentials_provider_arn": "private image repositories are not configured",
    "enable_infra_check": "infrastructure health checks are not requested",
    "container_entry_point": "cloudddp's bootstrap is the entry point inside the container",
    "container_arguments": "cloudddp's bootstrap is the entry point inside the container",
    "disable_output_compression": "the model always comes as model.tar.gz",
    "enable_remote_debug": "remote debugging is not requested",
    "enable_session_tag_chaining": "session tag chaining is not requested",
    "training_plan": "training plans are not requested",
    "instance_placement_config": "instance placement is not requested",
}
# v2's pre-2.0 names, still taken (aws/sagemaker-python-sdk v2.257.6, src/sagemaker/estimator.py
# `EstimatorBase.__init__`: `renamed_kwargs("train_instance_count", "instance_count", instance_count, kwargs)`, ...).
RENAMED: dict[str, str] = {
    "train_instance_count": "instance_count", "train_instance_type": "instance_type", "train_max_run": "max_run",
    "train_use_spot_instances": "use_spot_instances", "train_max_wait": "max_wait",
    "train_volume_size": "volume_size", "train_volume_kms_key": "volume_kms_key",
}  # fmt: skip
V2_URL = "https://sagemaker.readthedocs.io/en/stable/v2.html"  # src/sagemaker/deprecations.py, same tag
# The role v2 requires (src/sagemaker/estimator.py `EstimatorBase.__init__`, v2.257.6); v2 also reads it from its
# config file, cloudddp's SageMaker provider from validation.ROLE_VARIABLE.
ROLE_REQUIRED = "An AWS IAM role is required to create an estimator."
NOT_SUPPORTED_METHODS = (
    "deploy", "attach", "compile_model", "create_model", "register", "transformer",
    "update_profiler", "enable_default_profiling", "disable_profiling", "latest_job_debugger_artifacts_path",
    "latest_job_profiler_artifacts_path", "latest_job_tensorboard_artifacts_path", "get_app_url",
    "enable_remote_debug", "disable_remote_debug", "delete_endpoint", "prepare_workflow_for_training",
)  # fmt: skip


@dataclass
class Arguments:
    """The accepted v2 constructor arguments, checked and normalised."""

    entry_point: str
    source_dir: str | None = None
    role: str | None = None
    framework_version: str | None = None
    py_version: str | None = None
    image_uri: str | None = None
    instance_count: int = 1
    instance_type: str = ""
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    distribution: str | None = None  # "torch_distributed" or "pytorchddp" when asked for
    output_path: str | None = None
    checkpoint_s3_uri: str | None = None
    checkpoint_local_path: str | None = None
    use_spot_instances: bool = False
    max_run: int = DEFAULT_MAX_RUN
    max_wait: int | None = None
    volume_size: int = DEFAULT_VOLUME_SIZE
    kms_key: str | None = None  # volume_kms_key / output_kms_key
    subnets: list[str] = field(default_factory=list)
    security_group_ids: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    base_job_name: str | None = None
    dependencies: list[str] = field(default_factory=list)
    network_isolation: bool = False
    inter_container_encryption: bool = False
    instance_groups: list[InstanceGroupSetting] = field(default_factory=list)
    distribution_groups: list[str] | None = None  # the groups that run the distributed job (None: all)
    disable_profiler: bool = False
    debugger_hook: bool = True  # debugger_hook_config=None (v2's default) sends a DebugHookConfig; False none
    input_mode: str = "File"  # INPUT_MODES
    metrics: dict[str, str] = field(default_factory=dict)  # metric_definitions: Name -> Regex, in order
    tensorboard: dict[str, str] | None = None  # tensorboard_output_config as the request's TensorBoardOutputConfig

    @property
    def local(self) -> bool:
        return self.instance_type in LOCAL_TYPES


def _refuse(name: str, value: Any, why: str) -> CloudDDPError:
    return CloudDDPError(f"PyTorch({name}={value!r}): {why}.")


def check_distribution(distribution: Any) -> str | None:
    """torch_distributed / pytorchddp (enabled) run under cloudddp's launcher; any other strategy is refused."""
    if distribution is None or distribution == {}:
        return None
    if not isinstance(distribution, dict):
        raise _refuse("distribution", distribution, "must be a dict such as {'torch_distributed': {'enabled': True}}")
    distribution = {k: v for k, v in distribution.items() if k != "instance_groups"}  # see check_instance_groups
    if not distribution:
        return None
    unknown = sorted(set(distribution) - set(LAUNCHER_DISTRIBUTIONS))
    if unknown:
        raise _refuse(
            "distribution", distribution,
            f"{', '.join(unknown)} is not supported: cloudddp runs the entry point with its own torchrun launcher "
            f"on every host, which is what {' and '.join(LAUNCHER_DISTRIBUTIONS)} ask for. Remove the key, or use "
            f"{{'torch_distributed': {{'enabled': True}}}}",
        )  # fmt: skip
    if len(distribution) > 1:
        raise _refuse("distribution", distribution, "give one of torch_distributed or pytorchddp, not both")
    ((name, settings),) = distribution.items()
    if not isinstance(settings, dict) or set(settings) - {"enabled"}:
        raise _refuse("distribution", distribution, f"{name} takes only {{'enabled': True|False}}")
    return name if settings.get("enabled") else None


def check_distribution_versions(args: Arguments) -> None:
    """SDK v2's framework-version tables for torch_distributed and pytorchddp, on every instance type that runs the
    distributed job (the chosen instance groups, else instance_type): distribution_table.py."""
    if args.distribution is None:
        return
    chosen = [g for g in args.instance_groups if args.distribution_groups is None or g.name in args.distribution_groups]
    for instance_type in [g.instance_type for g in chosen] or [args.instance_type]:
        problems = distribution_problems(args.distribution, instance_type, args.framework_version, args.py_version,
                                         args.image_uri, args.entry_point)  # fmt: skip
        if problems:
            raise CloudDDPError(
                f"PyTorch(distribution={{{args.distribution!r}: {{'enabled': True}}}}, "
                f"framework_version={args.framework_version!r}, instance_type={instance_type!r}): refused as the "
                f"SageMaker SDK v2 refuses it: " + " ".join(problems)
            )


def _group_setting(group: Any) -> InstanceGroupSetting:
    try:
        return InstanceGroupSetting(
            name=group.instance_group_name, instance_type=group.instance_type, count=group.instance_count
        )
    except (AttributeError, ValidationError):
        raise _refuse(
            "instance_groups", group, "each entry is an InstanceGroup(instance_group_name: str, instance_type: str, "
            "instance_count: int) (from cloudddp.sagemaker or sagemaker.instance_group)",
        ) from None  # fmt: skip


def check_instance_groups(kwargs: dict[str, Any]) -> tuple[list[InstanceGroupSetting], list[str] | None]:
    """The heterogeneous cluster and the groups that run the distributed job, by the SDK v2's rules.

    `fw_utils.validate_distribution` (v2.257.6): distribution["instance_groups"] needs the estimator's
    instance_groups, at most as many; with one group it defaults to that group, with more it must name
    exactly one; each must be one of the estimator's. `job.py: _prepare_resource_config`: instance_count
    and instance_type cannot be set beside instance_groups. The groups are checked against the service's
    rules by the SageMaker provider (names, counts, instance types).
    """
    groups, distribution = kwargs.get("instance_groups"), kwargs.get("distribution")
    chosen = distribution.get("instance_groups") if isinstance(distribution, dict) else None
    if not groups:
        if chosen:
            raise _refuse("distribution", distribution, "names instance_groups, but the estimator has none; pass "
                          "instance_groups=[InstanceGroup(...), ...] too")  # fmt: skip
        return [], None
    if not isinstance(groups, list):
        raise _refuse("instance_groups", groups, "must be a list of InstanceGroup")
    for name in ("instance_count", "instance_type"):
        if kwargs.get(name) is not None:
            raise _refuse(name, kwargs[name], "cannot be set when instance_groups is set (as in the SDK v2): the "
                          "groups give the instance types and counts")  # fmt: skip
    settings = [_group_setting(g) for g in groups]
    if kwargs.get("instance_type") in LOCAL_TYPES or any(g.instance_type in LOCAL_TYPES for g in settings):
        raise _refuse("instance_groups", groups, "heterogeneous clusters run on SageMaker only (the SDK v2's local "
                      "mode has none either); use instance_type='local' with instance_count")  # fmt: skip
    if distribution is None:
        return settings, None
    chosen = list(chosen or [])
    if len(chosen) > len(settings):
        raise _refuse("distribution", distribution, "names more instance groups than the estimator has")
    if len(settings) == 1 and not chosen:
        return settings, [settings[0].name]
    if len(chosen) != 1:
        raise _refuse("distribution", distribution, "must name exactly one of the instance groups under "
                      "'instance_groups' when there are several (as in the SDK v2)")  # fmt: skip
    names = [getattr(g, "instance_group_name", g) for g in chosen]
    unknown = [n for n in names if n not in {g.name for g in settings}]
    if unknown:
        raise _refuse("distribution", distribution, f"instance group {unknown[0]!r} is not one of instance_groups")
    return settings, names


def shown_hyperparameters(hyperparameters: dict[Any, Any]) -> dict[Any, Any]:
    """The dict as a message may show it: a secret-named key's value (`api_key`, `hf_token`) is ***, whatever its
    type (cloudddp.redact)."""
    return {k: REDACTED if is_secret_name(str(k)) else v for k, v in hyperparameters.items()}


def check_hyperparameters(hyperparameters: Any) -> dict[str, Any]:
    """The hyperparameters as the job receives them. v2 (aws/sagemaker-python-sdk v2.257.6, src/sagemaker/
    estimator.py `EstimatorBase._json_encode_hyperparameters`) sends `{str(k): json.dumps(v)}` for any value, and
    the training toolkit decodes each (sagemaker-training-toolkit 33839372, environment.py `read_hyperparameters`):
    kept here as that decoded value (a tuple is a list, a dict's keys are strings), which encodes as v2 sent it.
    Messages never show a secret-named key's value."""
    if hyperparameters is None:
        return {}
    if not isinstance(hyperparameters, dict):
        raise CloudDDPError(
            f"PyTorch(hyperparameters=<{type(hyperparameters).__name__}>): must be a dict of name to value."
        )
    checked: dict[str, Any] = {}
    for key, value in hyperparameters.items():
        shown = repr(REDACTED) if is_secret_name(str(key)) else f"<{type(value).__name__}>"
        try:
            encoded = json.dumps(value, allow_nan=False)  # NaN and Infinity: not JSON, refused as the provider does
        except (TypeError, ValueError) as exc:
            raise CloudDDPError(
                f"PyTorch(hyperparameters={{{key!r}: {shown}}}): the value is not JSON ({exc}). The SDK v2 sends "
                f"json.dumps(value) and SageMaker's hyperparameters are JSON: pass numbers, strings or booleans."
            ) from None
        checked[str(key)] = json.loads(encoded)
    scalar = (str, int, float, bool)
    other = next((k for k, v in checked.items() if not isinstance(v, scalar)), None)
    if other is not None:  # the job spec's hyperparameters are scalars (cloudddp/spec.py), on every provider
        raise CloudDDPError(
            f"PyTorch(hyperparameters={shown_hyperparameters({other: checked[other]})}): cloudddp passes str, int, "
            f"float or bool values (JSON-encoded as the SDK does); pass json.dumps(value) as a string and parse it "
            f"in the script."
        )
    return checked


def check_tags(tags: Any) -> dict[str, str]:
    """v2 takes [{'Key': k, 'Value': v}, ...] (or a dict); the order is kept."""
    if not tags:
        return {}
    if isinstance(tags, dict):
        return {str(k): str(v) for k, v in tags.items()}
    if isinstance(tags, list) and all(isinstance(t, dict) and set(t) == {"Key", "Value"} for t in tags):
        return {str(t["Key"]): str(t["Value"]) for t in tags}
    raise _refuse("tags", tags, "must be a list of {'Key': ..., 'Value': ...} dicts")


def check_metric_definitions(definitions: Any) -> dict[str, str]:
    """v2 takes [{'Name': ..., 'Regex': ...}, ...] and sends it as AlgorithmSpecification.MetricDefinitions."""
    if not definitions:
        return {}
    if not isinstance(definitions, list) or not all(
        isinstance(d, dict) and set(d) == {"Name", "Regex"} and all(isinstance(v, str) for v in d.values())
        for d in definitions
    ):
        raise _refuse("metric_definitions", definitions, "must be a list of {'Name': ..., 'Regex': ...} dicts")
    names = [d["Name"] for d in definitions]
    if len(set(names)) < len(names):
        raise _refuse("metric_definitions", definitions, "names a metric twice; give each Name once")
    for definition in definitions:
        if problem := definition_problem(definition["Name"], definition["Regex"]):
            raise _refuse("metric_definitions", definitions, problem)
    return {d["Name"]: d["Regex"] for d in definitions}


def check_kms(volume_kms_key: str | None, output_kms_key: str | None) -> str | None:
    if volume_kms_key and output_kms_key and volume_kms_key != output_kms_key:
        raise CloudDDPError(
            f"PyTorch(volume_kms_key={volume_kms_key!r}, output_kms_key={output_kms_key!r}): cloudddp uses one KMS "
            f"key for the volume and the output; give the same key to both, or only one."
        )
    return volume_kms_key or output_kms_key


def _expect(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if value is not None and not isinstance(value, kind):
        raise _refuse(name, value, f"must be {what}")
    return value


ACCEPTED = (
    "entry_point", "source_dir", "role", "framework_version", "py_version", "image_uri", "instance_count",
    "instance_type", "hyperparameters", "environment", "distribution", "output_path", "checkpoint_s3_uri",
    "checkpoint_local_path", "use_spot_instances", "max_run", "max_wait", "volume_size", "volume_kms_key",
    "output_kms_key", "subnets", "security_group_ids", "tags", "base_job_name", "dependencies", "disable_profiler",
    "debugger_hook_config", "sagemaker_session", "enable_network_isolation", "encrypt_inter_container_traffic",
    "metric_definitions", "tensorboard_output_config",
    "container_log_level", "input_mode", "instance_groups",
)  # fmt: skip


def check_names(kwargs: dict[str, Any]) -> None:
    """Refused arguments by name with the reason; unknown names as Python would."""
    for name, value in kwargs.items():
        if name in NOT_SUPPORTED and value not in (None, False, [], {}):
            raise _refuse(name, value, f"not supported by cloudddp's drop-in: {NOT_SUPPORTED[name]}")
    unknown = sorted(set(kwargs) - set(ACCEPTED) - set(NOT_SUPPORTED))
    if unknown:
        raise CloudDDPError(f"PyTorch() got unexpected keyword argument(s): {', '.join(unknown)}.")


# Arguments cloudddp takes only at the values it sends: name -> (the values taken, absent is the first; why not
# another). Beside NOT_SUPPORTED (arguments taken at no value but their "off").
FIXED_VALUES: dict[str, tuple[tuple[Any, ...], str]] = {
    "input_mode": (INPUT_MODES, "only 'File' and 'FastFile' are supported (Pipe needs a reader of its own)"),
    "container_log_level": ((logging.INFO,), "only logging.INFO (20) is sent"),
    "debugger_hook_config": ((None, False), "SageMaker Debugger hooks are not configured; pass False"),
}


def check_fixed_values(kwargs: dict[str, Any]) -> None:
    """The arguments v2 requires, those cloudddp takes only at the value it sends, and the paths' shapes."""
    if not kwargs.get("entry_point"):
        raise CloudDDPError("PyTorch(entry_point=...) is required: the training script, relative to source_dir.")
    if not kwargs.get("instance_type") and not kwargs.get("instance_groups"):
        raise CloudDDPError(
            "PyTorch(instance_type=...) is required: an ml.* instance type, 'local' or 'local_gpu' (or "
            "instance_groups=[InstanceGroup(...), ...] for a heterogeneous cluster)."
        )
    for name, (taken, why) in FIXED_VALUES.items():
        if kwargs.get(name, taken[0]) not in taken:
            raise _refuse(name, kwargs[name], why)
    _expect("disable_profiler", kwargs.get("disable_profiler"), bool, "True or False")
    check_paths(kwargs)


def check_paths(kwargs: dict[str, Any]) -> None:
    """checkpoint_local_path, output_path and source_dir where v2 and the service take them; the versions an
    image needs."""
    local_path = kwargs.get("checkpoint_local_path")
    if local_path is not None and (not isinstance(local_path, str) or not local_path.startswith("/")):
        raise _refuse(
            "checkpoint_local_path", local_path, "must be an absolute path in the container, like /opt/ml/ckpt"
        )
    if local_path and kwargs.get("instance_type") in LOCAL_TYPES and not local_path.startswith(OPT_ML):
        raise _refuse(
            "checkpoint_local_path", local_path,
            f"local mode lays out each host's {OPT_ML} in its own folder, so the checkpoint folder must be under "
            f"{OPT_ML} (the default is {DEFAULT_CHECKPOINT_LOCAL_PATH})",
        )  # fmt: skip
    if kwargs.get("image_uri") is None and kwargs.get("instance_type") not in LOCAL_TYPES:
        for name in ("framework_version", "py_version"):
            if not kwargs.get(name):
                raise CloudDDPError(
                    f"PyTorch({name}=None): framework_version and py_version are required unless image_uri is given "
                    f"(as in the SageMaker SDK v2)."
                )
    output_path = kwargs.get("output_path")
    cloud = kwargs.get("instance_type") not in LOCAL_TYPES
    if cloud and isinstance(output_path, str) and not output_path.startswith("s3://"):
        raise _refuse("output_path", output_path, "a SageMaker job writes to an s3:// URI (file:// works with "
                      "instance_type='local')")  # fmt: skip
    if cloud and isinstance(output_path, str) and not validation.S3_URI.match(output_path):
        raise _refuse("output_path", output_path, "is not an s3://bucket/prefix URI with a valid bucket name")
    source_dir = kwargs.get("source_dir")
    if isinstance(source_dir, str) and source_dir.startswith("s3://"):
        raise _refuse("source_dir", source_dir, "must be a local folder (cloudddp packs it with its launcher)")


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _refuse("instance_count", value, "must be a whole number >= 1")
    return value


# v2 sends max_run and volume_size as given (aws/sagemaker-python-sdk v2.257.6, commit fc582aaa46faf7b7e16ab1e13840869712174cd0,
# src/sagemaker/job.py `_prepare_stop_condition`: {"MaxRuntimeInSeconds": max_run}; `_prepare_resource_config`:
# {"VolumeSizeInGB": volume_size}). botocore's model refuses MaxRuntimeInSeconds < 1; it allows VolumeSizeInGB 0,
# which cloudddp's SageMaker provider does not send (at least 1 GB). A value is never replaced by the default
# (0 used to become 86400 s / 30 GB); only an absent (None) one takes it.
AT_LEAST_ONE_WHY = {
    "max_run": "SageMaker refuses a MaxRuntimeInSeconds below 1, as it does for the SDK v2, which sends it as given",
    "volume_size": "cloudddp sends a VolumeSizeInGB of at least 1 (the SDK v2 would send it as given)",
}


def _at_least_one(name: str, value: Any, default: int, unit: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _refuse(name, value, f"must be a whole number of {unit}, at least 1: {AT_LEAST_ONE_WHY[name]}. Leave "
                      f"it out for the default, {default}")  # fmt: skip
    return value


# v2 sends a true flag as given and none for a false one (src/sagemaker/session.py `_get_train_request`, same
# commit: `if use_spot_instances: train_request["EnableManagedSpotTraining"] = use_spot_instances`, likewise
# EnableNetworkIsolation and EnableInterContainerTrafficEncryption): botocore's model takes only a boolean there,
# so a true non-boolean such as the string "False" fails in v2; it must not become True here.
def _flag(name: str, value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if not value:  # 0, "": v2 sends nothing, the service's False
        return False
    raise _refuse(name, value, "must be True or False (not a string or number): the SDK v2 sends such a value as "
                  "given, and botocore, which takes only a boolean there, refuses it")  # fmt: skip


def take_renamed(kwargs: dict[str, Any]) -> dict[str, Any]:
    """kwargs with each old name of RENAMED under its new one, the old name's value winning if both are given, as
    v2's `renamed_kwargs` does (aws/sagemaker-python-sdk v2.257.6, src/sagemaker/deprecations.py: `value =
    kwargs.get(old_name, value)`), with v2's `renamed_warning` (a DeprecationWarning and a logged warning, same
    text); the estimator's attributes (`self.volume_kms_key = volume_kms_key`, ...) are set from that value."""
    taken = dict(kwargs)
    for old, new in RENAMED.items():
        if old in taken:
            message = f"{old} has been renamed in sagemaker>=2.\nSee: {V2_URL} for details."
            warnings.warn(message, DeprecationWarning, stacklevel=2)
            logger.warning(message)
            taken[new] = taken.pop(old)
    return taken


def parse(kwargs: dict[str, Any]) -> tuple[Arguments, Any]:
    """The checked arguments (the old names of RENAMED already taken: take_renamed) and the sagemaker_session (or
    None). Raises for anything not supported."""
    check_names(kwargs)
    check_fixed_values(kwargs)
    get = kwargs.get
    environment = _expect("environment", get("environment") or {}, dict, "a dict of str to str")
    groups, distribution_groups = check_instance_groups(kwargs)
    args = Arguments(
        entry_point=_expect("entry_point", kwargs["entry_point"], str, "a path relative to source_dir"),
        source_dir=_expect("source_dir", get("source_dir"), str, "a local folder"),
        role=get("role"), framework_version=get("framework_version"), py_version=get("py_version"),
        image_uri=get("image_uri"),
        instance_count=sum(g.count for g in groups) if groups else _count(get("instance_count", 1)),
        instance_type=kwargs.get("instance_type") or "",
        hyperparameters=check_hyperparameters(get("hyperparameters")),
        environment={str(k): str(v) for k, v in environment.items()},
        distribution=check_distribution(get("distribution")),
        output_path=_expect("output_path", get("output_path"), str, "an s3:// URI"),
        checkpoint_s3_uri=_expect("checkpoint_s3_uri", get("checkpoint_s3_uri"), str, "an s3:// URI"),
        checkpoint_local_path=get("checkpoint_local_path"),
        use_spot_instances=_flag("use_spot_instances", get("use_spot_instances")),
        max_run=_at_least_one("max_run", get("max_run"), DEFAULT_MAX_RUN, "seconds"),
        max_wait=_expect("max_wait", get("max_wait"), int, "seconds"),
        volume_size=_at_least_one("volume_size", get("volume_size"), DEFAULT_VOLUME_SIZE, "GB"),
        kms_key=check_kms(get("volume_kms_key"), get("output_kms_key")),
        subnets=list(_expect("subnets", get("subnets") or [], list, "a list of subnet ids")),
        security_group_ids=list(_expect("security_group_ids", get("security_group_ids") or [], list, "a list")),
        tags=check_tags(get("tags")),
        base_job_name=_expect("base_job_name", get("base_job_name"), str, "a string"),
        dependencies=list(_expect("dependencies", get("dependencies") or [], list, "a list of paths")),
        network_isolation=_flag("enable_network_isolation", get("enable_network_isolation")),
        inter_container_encryption=_flag("encrypt_inter_container_traffic", get("encrypt_inter_container_traffic")),
        instance_groups=groups, distribution_groups=distribution_groups,
        disable_profiler=bool(get("disable_profiler")), debugger_hook=get("debugger_hook_config") is None,
        input_mode=get("input_mode") or "File", metrics=check_metric_definitions(get("metric_definitions")),
        tensorboard=tensorboard_request(get("tensorboard_output_config")),
    )  # fmt: skip
    check_distribution_versions(args)
    if args.local:
        # v2's constructor (aws/sagemaker-python-sdk v2.257.6, src/sagemaker/estimator.py, EstimatorBase.__init__):
        # the emulated hosts would share this machine's GPUs, every rank of each host on the same devices.
        if args.instance_type == "local_gpu" and args.instance_count > 1:
            raise RuntimeError("Distributed Training in Local GPU is not supported. Set instance_count to 1.")
        warn_requirements(args)
    else:
        check_role(args)
        check_network(args)
        check_stopping(args)
        check_service_fields(args, "volume_kms_key" if get("volume_kms_key") else "output_kms_key")
    return args, get("sagemaker_session")


# -- the attributes v2's estimator exposes, as it stores them ---------------------------------------------------
# aws/sagemaker-python-sdk v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0).


def v2_distribution(distribution: dict[str, Any] | None, distribution_groups: list[str] | None) -> dict[str, Any]:
    """`estimator.distribution` as v2 stores it: src/sagemaker/pytorch/estimator.py `PyTorch.__init__` copies
    a pytorchddp distribution into `{"smdistributed": {"dataparallel": ...}}`, src/sagemaker/fw_utils.py
    `validate_distribution` sets "instance_groups" to the chosen groups' names, then `self.distribution =
    distribution or {}`."""
    if distribution is None:
        return {}
    stored = dict(distribution)
    if "pytorchddp" in stored:
        stored["smdistributed"] = {"dataparallel": stored["pytorchddp"]}
        del stored["pytorchddp"]
    if distribution_groups:
        stored["instance_groups"] = list(distribution_groups)
    return stored


def v2_tags(tags: Any) -> Any:
    """`estimator.tags` as v2 stores it: src/sagemaker/utils.py `format_tags` turns a dict into
    [{"Key": str(k), "Value": str(v)}, ...] and returns anything else as passed (a list, None); the JumpStart
    tags src/sagemaker/estimator.py `EstimatorBase.__init__` may add are for JumpStart URIs only."""
    if isinstance(tags, dict):
        return [{"Key": str(k), "Value": str(v)} for k, v in tags.items()]
    return tags


# -- checks the SageMaker provider makes too, made first with the v2 argument names -----------------------------


def check_role(args: Arguments) -> None:
    """v2 raises this ValueError in the constructor when no role is given (nor in its config file), before any
    AWS call; a notebook may catch it. Local mode runs no SageMaker job here, so it needs none."""
    if not args.role and not os.environ.get(validation.ROLE_VARIABLE):
        raise ValueError(
            f"{ROLE_REQUIRED} Please provide a valid `role` argument with the ARN of an IAM role that has the "
            f"necessary SageMaker permissions (cloudddp also reads it from {validation.ROLE_VARIABLE})."
        )


# The provider's checks of these fields name the CLI's flags (--instance-type, --env, --tag, --checkpoint-s3,
# --kms-key): made first here, named as the notebook wrote them.
DROP_IN = validation.Naming(
    instance_type="PyTorch(instance_type={value!r})", env_name="PyTorch(environment={{{key!r}: ...}})",
    env_value="PyTorch(environment={{{key!r}: ...}})", env_source="PyTorch(environment=...) and cloudddp's own",
    tag_key="PyTorch(tags=[{{'Key': {key!r}, ...}}])",
    tag_value="PyTorch(tags=[{{'Key': {key!r}, 'Value': {value!r}}}])",
)  # fmt: skip


def check_service_fields(args: Arguments, kms_name: str) -> None:
    """The instance type, image URI, environment, tags, checkpoint URI and KMS key (given as `kms_name`) as
    SageMaker takes them."""
    if not args.instance_groups:
        validation.check_instance(args.instance_type, DROP_IN)
    if args.image_uri is not None and len(args.image_uri) > maximum("AlgorithmSpecification.TrainingImage"):
        raise CloudDDPError(f"PyTorch(image_uri=...) is {len(args.image_uri)} characters; SageMaker allows at most "
                            f"{maximum('AlgorithmSpecification.TrainingImage')}.")  # fmt: skip
    validation.check_environment(args.environment, DROP_IN)
    validation.check_tags(args.tags, DROP_IN)
    uri = args.checkpoint_s3_uri
    if uri is not None and (not validation.S3_URI.fullmatch(uri) or len(uri) > maximum("S3Uri")):
        raise _refuse("checkpoint_s3_uri", uri, f"is not an s3://bucket/prefix URI of at most {maximum('S3Uri')} "
                      "characters")  # fmt: skip
    if args.kms_key is not None and (not args.kms_key or check_shape("KmsKeyId", args.kms_key)):
        raise _refuse(kms_name, args.kms_key, "is not a KMS key id, alias or ARN")


def warn_requirements(args: Arguments) -> None:
    """Local mode runs the script in this Python environment: a source_dir's requirements.txt, which SageMaker's
    training toolkit pip-installs first (sagemaker-training-toolkit 33839372, src/sagemaker_training/
    entry_point.py `install`), is not installed. Said, not done."""
    path = Path(args.source_dir) / "requirements.txt" if args.source_dir else None
    if path is not None and path.is_file():
        emit(
            f"cloudddp: warning: {path} is not installed: instance_type={args.instance_type!r} runs the script in "
            f"this Python environment, without SageMaker's training toolkit, which is what pip-installs "
            f"requirements.txt on SageMaker. Install it here first: pip install -r {path}"
        )


def check_network(args: Arguments) -> None:
    """subnets and security_group_ids go together. v2 (aws/sagemaker-python-sdk v2.257.6, commit
    fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/vpc_utils.py `to_dict`) silently sends no VpcConfig
    when either is None, so the job would run outside the VPC: refused here instead."""
    if bool(args.subnets) != bool(args.security_group_ids):
        given, missing = ("subnets", "security_group_ids") if args.subnets else ("security_group_ids", "subnets")
        raise CloudDDPError(
            f"PyTorch({given}={getattr(args, given)!r}): a VPC job needs both subnets and security_group_ids; "
            f"pass {missing}=[...] too (the SageMaker SDK v2 would drop the VpcConfig and run outside the VPC)."
        )


def check_stopping(args: Arguments) -> None:
    """use_spot_instances, max_wait and max_run as SageMaker checks them. v2 (same commit, src/sagemaker/job.py
    `_prepare_stop_condition`) sends MaxWaitTimeInSeconds whenever max_wait is set, spot or not, and the
    service refuses a max_wait without spot, a spot job without one, or one shorter than max_run."""
    spot, max_wait, max_run = args.use_spot_instances, args.max_wait, args.max_run
    if max_run > validation.MAX_RUNTIME_SECONDS:
        raise _refuse("max_run", max_run, f"SageMaker's maximum is 28 days ({validation.MAX_RUNTIME_SECONDS} seconds)")
    if max_wait is not None and not spot:
        raise _refuse("max_wait", max_wait, "applies to spot jobs only: pass use_spot_instances=True too, or "
                      "leave max_wait out")  # fmt: skip
    if spot and max_wait is None:
        raise CloudDDPError(
            f"PyTorch(use_spot_instances=True) needs max_wait=: the seconds to wait for spot capacity plus the run, "
            f"at least max_run ({max_run})."
        )
    if spot and max_wait is not None and max_wait < max_run:
        raise _refuse("max_wait", max_wait, f"is shorter than max_run={max_run}; SageMaker requires max_wait >= "
                      "max_run for spot jobs")  # fmt: skip


def check_channels(inputs: Any, channels: dict[str, str]) -> None:
    """fit(inputs) on a SageMaker instance type: channel names and URIs SageMaker takes (the provider's checks,
    named as the notebook wrote them). v2 (same commit, src/sagemaker/job.py `_format_string_uri_input`) takes
    s3:// URIs there; file:// is for local mode only."""
    for channel, uri in channels.items():
        where = f"fit(inputs={inputs!r})" if isinstance(inputs, str) else f"fit(inputs={{{channel!r}: {uri!r}}})"
        if not validation.is_channel_name(channel):
            raise CloudDDPError(f"{where}: channel names are 1-64 letters, digits, '.', '-' or '_'.")
        if channel == validation.CODE_CHANNEL:
            raise CloudDDPError(f"{where}: the channel name {validation.CODE_CHANNEL!r} is cloudddp's; rename it.")
        if uri.startswith("s3://"):
            if not validation.S3_URI.match(uri) or len(uri) > maximum("S3Uri"):
                raise CloudDDPError(f"{where}: {uri!r} is not an s3://bucket/prefix URI.")
        elif "://" in uri:
            local = " (file:// works with instance_type='local')" if uri.startswith("file://") else ""
            raise CloudDDPError(f"{where}: a SageMaker job reads s3:// URIs{local}.")
        elif not Path(uri).exists():
            raise CloudDDPError(f"{where}: the local path {Path(uri).resolve()} does not exist.")
