"""Checks SageMaker would make, made before anything is uploaded or created.

moto accepts requests the real service rejects (long names, too many variables), so
every limit of `CreateTrainingJob` that a user can hit is checked here, with a message
naming the field, the value and the limit. The numbers come from botocore's service
model for SageMaker (a test keeps them in step with it).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cloudddp.errors import CloudDDPError

# The patterns of botocore 1.44.8's SageMaker model (botocore/data/sagemaker/2017-07-24/service-2.json, the shapes
# TrainingJobName, RoleArn, ChannelName, TrainingEnvironmentKey, SubnetId/SecurityGroupId, KmsKeyId and S3Uri; the
# S3 one narrowed to bucket names). The service matches the whole value; botocore never checks a pattern, so one
# that fails is only refused by CreateTrainingJob, after the uploads. Used with fullmatch; the anchors are "^" and
# "\Z", not "$" (which also matches before a final newline), for callers elsewhere that use .match(). [0-9], not
# \d: Python's \d takes any Unicode digit.
JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z")
JOB_NAME_MAX = 63
ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::([0-9]{12}):role/?[a-zA-Z_0-9+=,.@\-_/]+\Z")
CHANNEL_NAME = re.compile(r"^[A-Za-z0-9.\-_]{1,64}\Z")
ENV_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*\Z")
VPC_ID = re.compile(r"^[-0-9a-zA-Z]{1,32}\Z")
KMS_KEY = re.compile(r"^[a-zA-Z0-9:/_-]{1,2048}\Z")
# The model's "." (Java's) matches no line terminator; Python's "." only leaves out "\n".
LINE_TERMINATORS = "\n\r\x85\u2028\u2029"
S3_URI = re.compile(rf"^s3://([a-z0-9][a-z0-9.\-]{{1,61}}[a-z0-9])(/[^{LINE_TERMINATORS}]*)?\Z")
# TagKey and TagValue (same file): `[\p{L}\p{Z}\p{N}_.:/=+\-@]*`. Python's re has no \p{..}: letters, separators and
# numbers are the Unicode categories L*, Z* and N* (\s would also take tab and newline, which are Cc).
TAG_PUNCTUATION = frozenset("_.:/=+-@")

MAX_HYPERPARAMETERS = 100
MAX_HYPERPARAMETER_KEY = 256
MAX_HYPERPARAMETER_VALUE = 2500
MAX_ENVIRONMENT = 100
MAX_ENVIRONMENT_KEY = 512
MAX_ENVIRONMENT_VALUE = 512
MAX_TAGS = 50
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
MAX_CHANNELS = 20
MAX_SUBNETS = 16
MAX_SECURITY_GROUPS = 5
MAX_CONTAINER_ARGUMENT = 256
MAX_IMAGE_URI = 255
MAX_S3_URI = 1024
# StoppingCondition.MaxRuntimeInSeconds: "The maximum value is 28 days." (botocore's service
# model for sagemaker, API 2017-07-24, the member's documentation; a test reads it there).
MAX_RUNTIME_SECONDS = 28 * 24 * 3600
# StoppingCondition is required: a job without max_runtime gets what the SDK v2 sends without max_run, 24 h
# (aws/sagemaker-python-sdk v2.257.6, commit fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/estimator.py
# EstimatorBase.__init__: max_run=24 * 60 * 60).
DEFAULT_MAX_RUNTIME_SECONDS = 24 * 3600

SOURCE_WARN_BYTES = 100 * 1024 * 1024
# No documented SageMaker limit exists for the code archive; past 1 GiB it is data
# shipped as code (every host downloads and extracts it before the script starts).
SOURCE_MAX_BYTES = int(os.environ.get("CLOUDDDP_MAX_SOURCE_MB", "1024")) * 1024 * 1024


@dataclass(frozen=True)
class Naming:
    """How a message names the setting the user wrote (str.format templates): the CLI's flags by default. The SDK
    v2 drop-in (cloudddp.sagemaker.arguments) names its constructor arguments instead, so a notebook's error
    says `PyTorch(environment=...)`, not `--env`."""

    instance_type: str = "--instance-type {value!r}"
    env_name: str = "--env {key!r}"
    env_value: str = "--env {key}"
    env_source: str = "--env and cloudddp's own"
    tag_key: str = "--tag {key!r}"
    tag_value: str = "--tag {key}={value!r}"


CLI = Naming()


def check_job_name(name: str, base: str | None = None) -> str:
    """SageMaker's job name rule; `base` is the spec name it was built from, for the message."""
    if len(name) > JOB_NAME_MAX:
        suffix = len(name) - len(base) if base else 0
        hint = (
            f" cloudddp appends a {suffix}-character timestamp to the spec's name {base!r}: "
            f"shorten `name` to at most {JOB_NAME_MAX - suffix} characters."
            if base
            else ""
        )
        raise CloudDDPError(
            f"the SageMaker training job name {name!r} is {len(name)} characters long; SageMaker allows at most "
            f"{JOB_NAME_MAX}.{hint}"
        )
    if not JOB_NAME.fullmatch(name):
        raise CloudDDPError(
            f"the SageMaker training job name {name!r} is invalid: use letters, digits and hyphens, starting "
            f"and ending with a letter or digit (pattern {JOB_NAME.pattern})."
        )
    return name


NO_ROLE = (
    "no IAM role for the SageMaker job: pass --role arn:aws:iam::ACCOUNT:role/NAME, set `sagemaker.role` in the job "
    "spec or a context, or set the environment variable CLOUDDDP_SAGEMAKER_ROLE. The role must trust "
    "sagemaker.amazonaws.com and may read the staging bucket."
)
NO_REGION = (
    "no AWS region: pass --region, set `sagemaker.region` in the job spec or a context, or set AWS_REGION "
    "(or AWS_DEFAULT_REGION, or `region` in your ~/.aws/config profile)."
)


def check_role(role: str | None) -> str:
    if not role:
        raise CloudDDPError(NO_ROLE)
    if not ROLE_ARN.fullmatch(role):
        raise CloudDDPError(
            f"the SageMaker role {role!r} is not an IAM role ARN (expected arn:aws:iam::123456789012:role/NAME)."
        )
    return role


def account_of_role(role: str) -> str:
    match = ROLE_ARN.fullmatch(role)
    return match.group(1) if match else ""


def check_region(region: str | None, known: list[str]) -> str:
    if not region:
        raise CloudDDPError(NO_REGION)
    if region not in known:
        close = [r for r in known if r.split("-")[0] == region.split("-")[0]][:6]
        raise CloudDDPError(
            f"unknown AWS region {region!r} for SageMaker (from --region, sagemaker.region or AWS_REGION). "
            f"Known regions include: {', '.join(close or known[:8])}."
        )
    return region


@functools.cache
def training_instance_types() -> frozenset[str]:
    """The `TrainingInstanceType` enum of botocore's offline service model (read once, on first use)."""
    # The loader reads botocore's bundled data only: no AWS config (a broken AWS_PROFILE is reported elsewhere).
    from botocore.loaders import create_loader
    from botocore.model import ServiceModel

    model = ServiceModel(create_loader().load_service_model("sagemaker", "service-2"), "sagemaker")
    return frozenset(model.shape_for("TrainingInstanceType").enum)


def check_instance(instance_type: str, naming: Naming = CLI) -> None:
    """The instance type is one SageMaker trains on (the count is the job spec's `nodes`, checked there)."""
    known = training_instance_types()
    if instance_type not in known:
        close = difflib.get_close_matches(instance_type, sorted(known), n=4, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else " They look like ml.g5.12xlarge or ml.m5.xlarge."
        raise CloudDDPError(
            f"{naming.instance_type.format(value=instance_type)} is not a SageMaker training instance type (not in "
            f"the TrainingInstanceType list of botocore's SageMaker service model; a newer botocore may know "
            f"newer types).{hint}"
        )


def check_stopping(max_runtime: int, spot: bool, max_wait: int | None) -> None:
    if max_runtime < 1:
        raise CloudDDPError(f"--max-runtime must be at least 1 second, got {max_runtime}.")
    if max_runtime > MAX_RUNTIME_SECONDS:
        raise CloudDDPError(
            f"--max-runtime {max_runtime} seconds ({max_runtime / 86400:.1f} days) is above SageMaker's maximum of "
            f"28 days ({MAX_RUNTIME_SECONDS} seconds)."
        )
    if spot and max_wait is None:
        raise CloudDDPError(
            f"a spot job (--spot) needs --max-wait: the seconds to wait for spot capacity plus the run, "
            f"at least --max-runtime ({max_runtime})."
        )
    if spot and max_wait is not None and max_wait < max_runtime:
        raise CloudDDPError(
            f"--max-wait {max_wait} is shorter than --max-runtime {max_runtime}; SageMaker requires "
            f"max wait >= max runtime for spot jobs."
        )
    if not spot and max_wait is not None:
        raise CloudDDPError(f"--max-wait {max_wait} only applies to spot jobs: add --spot or drop --max-wait.")


def check_s3_uri(uri: str, what: str) -> str:
    if len(uri) > MAX_S3_URI:  # botocore's S3Uri shape: max 1024
        raise CloudDDPError(
            f"{what} {uri[:80]!r}... is {len(uri)} characters; SageMaker's S3 URIs take at most {MAX_S3_URI}."
        )
    if not S3_URI.fullmatch(uri):
        raise CloudDDPError(f"{what} {uri!r} is not an s3://bucket/prefix URI.")
    return uri


def check_checkpoint(checkpoint: str | None, checkpoint_s3: str | None) -> None:
    """`checkpoint` (a local folder or s3:// URI) and `--checkpoint-s3` name one place, not two."""
    if checkpoint and checkpoint_s3 and checkpoint != checkpoint_s3:
        raise CloudDDPError(
            f"checkpoint {checkpoint!r} and --checkpoint-s3 {checkpoint_s3!r} both say where checkpoints go; "
            f"SageMaker syncs one S3 location. Keep one (a local checkpoint folder is uploaded to S3 first)."
        )
    if checkpoint and "://" in checkpoint and not checkpoint.startswith("s3://"):
        raise CloudDDPError(f"checkpoint {checkpoint!r}: SageMaker takes an s3:// URI or a local folder.")
    if checkpoint and checkpoint.startswith("s3://"):
        check_s3_uri(checkpoint, "checkpoint")


def check_inputs(inputs: Mapping[str, str], reserved: str) -> None:
    """Channels: names SageMaker accepts, s3:// URIs or local paths that exist."""
    if len(inputs) + 1 > MAX_CHANNELS:
        raise CloudDDPError(
            f"{len(inputs)} inputs: SageMaker takes at most {MAX_CHANNELS} channels per job, and cloudddp may "
            f"need one for the code."
        )
    for channel, where in inputs.items():
        if not CHANNEL_NAME.fullmatch(channel):
            raise CloudDDPError(f"--input {channel}=...: channel names are letters, digits, '.', '-' or '_'.")
        if channel == reserved:
            raise CloudDDPError(f"--input {channel}=...: the channel name {reserved!r} is cloudddp's; rename it.")
        if where.startswith("s3://"):
            check_s3_uri(where, f"--input {channel}")
        elif "://" in where:
            raise CloudDDPError(
                f"--input {channel}={where!r}: SageMaker reads s3:// URIs or local folders (staged to S3 first)."
            )
        elif not Path(where).exists():
            raise CloudDDPError(f"--input {channel}={where!r}: the local path {Path(where).resolve()} does not exist.")
        elif Path(where).is_dir() and not holds_a_file(Path(where)):
            # Staging refuses it too, but only after the source was uploaded.
            raise CloudDDPError(
                f"--input {channel}={where!r}: the local folder {Path(where).resolve()} holds no files, so there is "
                f"nothing to stage for the channel {channel!r}. Put the data there, or drop the input."
            )


def holds_a_file(folder: Path) -> bool:
    """Whether anything but folders is under `folder`, links followed as staging follows them; stops at the first.
    A folder it cannot read counts as holding something: staging then names the real problem."""
    seen: set[tuple[int, int]] = set()

    def unreadable(error: OSError) -> None:
        raise error

    try:
        for root, dirs, files in os.walk(folder, onerror=unreadable, followlinks=True):
            if files:
                return True
            here = os.stat(root)
            if (here.st_dev, here.st_ino) in seen:  # a symlink loop: its folders were walked already
                dirs[:] = []
            seen.add((here.st_dev, here.st_ino))
    except OSError:
        return True
    return False


def check_hyperparameters(hyperparameters: Mapping[str, str]) -> None:
    if len(hyperparameters) > MAX_HYPERPARAMETERS:
        raise CloudDDPError(
            f"{len(hyperparameters)} hyperparameters (with cloudddp's sagemaker_* entries): SageMaker accepts at "
            f"most {MAX_HYPERPARAMETERS}."
        )
    for key, value in hyperparameters.items():
        if not key or len(key) > MAX_HYPERPARAMETER_KEY:
            raise CloudDDPError(
                f"hyperparameter name {key[:40]!r}... is {len(key)} characters; SageMaker allows 1-"
                f"{MAX_HYPERPARAMETER_KEY}."
            )
        if any(ch in LINE_TERMINATORS for ch in key):  # HyperParameterKey's pattern is `.*`
            raise CloudDDPError(f"hyperparameter name {key[:60]!r} holds a line break; SageMaker's names take none.")
        if len(value) > MAX_HYPERPARAMETER_VALUE:
            raise CloudDDPError(
                f"hyperparameter {key!r} is {len(value)} characters once encoded; SageMaker allows at most "
                f"{MAX_HYPERPARAMETER_VALUE}. Put large values in a file in source_dir or an input channel."
            )


def check_environment(environment: Mapping[str, str], naming: Naming = CLI) -> None:
    if len(environment) > MAX_ENVIRONMENT:
        raise CloudDDPError(
            f"{len(environment)} environment variables ({naming.env_source}): SageMaker accepts at most "
            f"{MAX_ENVIRONMENT}."
        )
    for key, value in environment.items():
        if not ENV_NAME.fullmatch(key) or len(key) > MAX_ENVIRONMENT_KEY:
            raise CloudDDPError(
                f"{naming.env_name.format(key=key[:60])}: environment variable names are letters, digits and '_', "
                f"not starting with a digit, at most {MAX_ENVIRONMENT_KEY} characters."
            )
        if len(value) > MAX_ENVIRONMENT_VALUE:
            raise CloudDDPError(
                f"{naming.env_value.format(key=key)}: the value is {len(value)} characters; SageMaker allows at most "
                f"{MAX_ENVIRONMENT_VALUE}."
            )


def is_tag_text(text: str) -> bool:
    """`text` matches TagKey's and TagValue's pattern `[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*` (see TAG_PUNCTUATION)."""
    return all(ch in TAG_PUNCTUATION or unicodedata.category(ch)[0] in "LZN" for ch in text)


def check_tags(tags: Mapping[str, str], naming: Naming = CLI) -> None:
    if len(tags) > MAX_TAGS:
        raise CloudDDPError(f"{len(tags)} tags: SageMaker accepts at most {MAX_TAGS}.")
    for key, value in tags.items():
        if not key or len(key) > MAX_TAG_KEY or not is_tag_text(key) or key.lower().startswith("aws:"):
            raise CloudDDPError(
                f"{naming.tag_key.format(key=key)}: tag keys are 1-{MAX_TAG_KEY} letters, digits, spaces or "
                f"_.:/=+-@ and may not start with 'aws:'."
            )
        if len(value) > MAX_TAG_VALUE or not is_tag_text(value):
            raise CloudDDPError(
                f"{naming.tag_value.format(key=key, value=value[:40])}: tag values are at most {MAX_TAG_VALUE} "
                f"letters, digits, spaces or _.:/=+-@."
            )


def check_network(subnets: list[str], security_groups: list[str]) -> None:
    if bool(subnets) != bool(security_groups):
        missing = "--security-group" if subnets else "--subnet"
        raise CloudDDPError(f"a VPC job needs both --subnet and --security-group; {missing} is missing.")
    if len(subnets) > MAX_SUBNETS or len(security_groups) > MAX_SECURITY_GROUPS:
        raise CloudDDPError(
            f"SageMaker takes at most {MAX_SUBNETS} subnets and {MAX_SECURITY_GROUPS} security groups "
            f"(got {len(subnets)} and {len(security_groups)})."
        )
    for item in [*subnets, *security_groups]:
        if not VPC_ID.fullmatch(item):
            raise CloudDDPError(f"{item!r} is not a subnet or security group id (like subnet-0abc or sg-0abc).")


def check_kms_key(key: str | None) -> None:
    if key is not None and not KMS_KEY.fullmatch(key):
        raise CloudDDPError(f"--kms-key {key!r} is not a KMS key id, alias or ARN.")


def check_source_size(total: int, source_dir: str) -> str | None:
    """An error past the hard limit; a warning (returned) past 100 MB."""
    mb = total / 1024 / 1024
    if total > SOURCE_MAX_BYTES:
        raise CloudDDPError(
            f"source_dir {source_dir!r} holds {mb:.0f} MB to ship as code; the limit is "
            f"{SOURCE_MAX_BYTES // 1024 // 1024} MB (CLOUDDDP_MAX_SOURCE_MB). Move data into an --input channel "
            f"or list large files in {source_dir}/.cloudddpignore."
        )
    if total > SOURCE_WARN_BYTES:
        return (
            f"source_dir {source_dir!r} holds {mb:.0f} MB: every host downloads it before training starts. "
            f"Consider an --input channel for data, or a .cloudddpignore."
        )
    return None
