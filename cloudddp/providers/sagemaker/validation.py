"""Checks SageMaker would make, made before anything is uploaded or created.

moto accepts requests the real service rejects (long names, too many variables), so
every limit of `CreateTrainingJob` that a user can hit is checked here, with a message
naming the field, the value and the limit. Limits and patterns are read from botocore's
service model for SageMaker at run time (service_model.py), except the few it cannot state.
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
from cloudddp.providers.sagemaker import service_model
from cloudddp.providers.sagemaker.service_model import LINE_TERMINATORS, check_shape, maximum

# Where the model cannot say it, cloudddp's own rules. S3Uri's pattern `(https|s3)://([^/]+)/?(.*)` also takes
# https URIs and any bucket text; cloudddp narrows it to s3:// and S3's bucket names. TagKey and TagValue
# (`[\p{L}\p{Z}\p{N}_.:/=+\-@]*`): Python's re has no \p{..}, so letters, separators and numbers are the Unicode
# categories L*, Z* and N* (is_tag_text).
S3_URI = re.compile(rf"^s3://([a-z0-9][a-z0-9.\-]{{1,61}}[a-z0-9])(/[^{LINE_TERMINATORS}]*)?\Z")
TAG_PUNCTUATION = frozenset("_.:/=+-@")
# StoppingCondition.MaxRuntimeInSeconds: "The maximum value is 28 days." (botocore's service
# model for sagemaker, API 2017-07-24, the member's documentation; a test reads it there).
MAX_RUNTIME_SECONDS = 28 * 24 * 3600
# StoppingCondition is required: a job without max_runtime gets what the SDK v2 sends without max_run, 24 h
# (aws/sagemaker-python-sdk v2.257.6, commit fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/estimator.py
# EstimatorBase.__init__: max_run=24 * 60 * 60).
DEFAULT_MAX_RUNTIME_SECONDS = 24 * 3600

CODE_CHANNEL = "cloudddp_code"  # the input channel cloudddp may send the source archive in (request.py)
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
    longest = maximum("TrainingJobName")
    if len(name) > longest:
        suffix = len(name) - len(base) if base else 0
        hint = (
            f" cloudddp appends a {suffix}-character timestamp to the spec's name {base!r}: "
            f"shorten `name` to at most {longest - suffix} characters."
            if base
            else ""
        )
        raise CloudDDPError(
            f"the SageMaker training job name {name!r} is {len(name)} characters long; SageMaker allows at most "
            f"{longest}.{hint}"
        )
    if check_shape("TrainingJobName", name):
        raise CloudDDPError(
            f"the SageMaker training job name {name!r} is invalid: use letters, digits and hyphens, starting "
            f"and ending with a letter or digit (pattern {service_model.shape('TrainingJobName').metadata['pattern']})."
        )
    return name


ROLE_VARIABLE = "CLOUDDDP_SAGEMAKER_ROLE"  # the role where none is given, for launch and the drop-in alike
NO_ROLE = (
    "no IAM role for the SageMaker job: pass --role arn:aws:iam::ACCOUNT:role/NAME, set `sagemaker.role` in the job "
    f"spec or a context, or set the environment variable {ROLE_VARIABLE}. The role must trust "
    "sagemaker.amazonaws.com and may read the staging bucket."
)
NO_REGION = (
    "no AWS region: pass --region, set `sagemaker.region` in the job spec or a context, or set AWS_REGION "
    "(or AWS_DEFAULT_REGION, or `region` in your ~/.aws/config profile)."
)


def check_role(role: str | None) -> str:
    if not role:
        raise CloudDDPError(NO_ROLE)
    if check_shape("RoleArn", role):
        raise CloudDDPError(
            f"the SageMaker role {role!r} is not an IAM role ARN (expected arn:aws:iam::123456789012:role/NAME)."
        )
    return role


def account_of_role(role: str) -> str:
    """The account id of a role ARN (arn:aws:iam::ACCOUNT:role/NAME); "" for anything else."""
    return role.split(":")[4] if not check_shape("RoleArn", role) else ""


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
    return frozenset(service_model.model().shape_for("TrainingInstanceType").enum)


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
    if len(uri) > maximum("S3Uri"):
        raise CloudDDPError(
            f"{what} {uri[:80]!r}... is {len(uri)} characters; SageMaker's S3 URIs take at most {maximum('S3Uri')}."
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


def check_inputs(inputs: Mapping[str, str]) -> None:
    """Channels: names SageMaker accepts, s3:// URIs or local paths that exist."""
    if len(inputs) + 1 > maximum("InputDataConfig"):
        raise CloudDDPError(
            f"{len(inputs)} inputs: SageMaker takes at most {maximum('InputDataConfig')} channels per job, and "
            f"cloudddp may need one for the code."
        )
    for channel, where in inputs.items():
        if not is_channel_name(channel):
            raise CloudDDPError(f"--input {channel}=...: channel names are letters, digits, '.', '-' or '_'.")
        if channel == CODE_CHANNEL:
            raise CloudDDPError(f"--input {channel}=...: the channel name {CODE_CHANNEL!r} is cloudddp's; rename it.")
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


def is_channel_name(name: str) -> bool:
    return check_shape("InputDataConfig.member.ChannelName", name) is None


def check_hyperparameters(hyperparameters: Mapping[str, str]) -> None:
    if len(hyperparameters) > maximum("HyperParameters"):
        raise CloudDDPError(
            f"{len(hyperparameters)} hyperparameters (with cloudddp's sagemaker_* entries): SageMaker accepts at "
            f"most {maximum('HyperParameters')}."
        )
    for key, value in hyperparameters.items():
        if not key or len(key) > maximum("HyperParameters.key"):
            raise CloudDDPError(
                f"hyperparameter name {key[:40]!r}... is {len(key)} characters; SageMaker allows 1-"
                f"{maximum('HyperParameters.key')}."
            )
        if check_shape("HyperParameters.key", key):  # its pattern `.*` takes no line break (Java's ".")
            raise CloudDDPError(f"hyperparameter name {key[:60]!r} holds a line break; SageMaker's names take none.")
        if len(value) > maximum("HyperParameters.value"):
            raise CloudDDPError(
                f"hyperparameter {key!r} is {len(value)} characters once encoded; SageMaker allows at most "
                f"{maximum('HyperParameters.value')}. Put large values in a file in source_dir or an input channel."
            )


def check_environment(environment: Mapping[str, str], naming: Naming = CLI) -> None:
    if len(environment) > maximum("Environment"):
        raise CloudDDPError(
            f"{len(environment)} environment variables ({naming.env_source}): SageMaker accepts at most "
            f"{maximum('Environment')}."
        )
    for key, value in environment.items():
        if not key or check_shape("Environment.key", key):
            raise CloudDDPError(
                f"{naming.env_name.format(key=key[:60])}: environment variable names are letters, digits and '_', "
                f"not starting with a digit, at most {maximum('Environment.key')} characters."
            )
        if len(value) > maximum("Environment.value"):
            raise CloudDDPError(
                f"{naming.env_value.format(key=key)}: the value is {len(value)} characters; SageMaker allows at most "
                f"{maximum('Environment.value')}."
            )


def check_metric_definitions(definitions: list[dict[str, str]]) -> list[dict[str, str]]:
    """AlgorithmSpecification.MetricDefinitions: how many, and each Name's and Regex's length (the model's)."""
    path = "AlgorithmSpecification.MetricDefinitions"
    if check_shape(path, definitions):
        raise CloudDDPError(f"metrics: {len(definitions)} metric definitions; SageMaker takes at most {maximum(path)}.")
    for definition in definitions:
        for part in ("Name", "Regex"):
            if problem := check_shape(f"{path}.member.{part}", definition[part]):
                raise CloudDDPError(f"metrics: the {part.lower()} of metric {definition['Name'][:60]!r} {problem}.")
    return definitions


def is_tag_text(text: str) -> bool:
    """`text` matches TagKey's and TagValue's pattern `[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*` (see TAG_PUNCTUATION)."""
    return all(ch in TAG_PUNCTUATION or unicodedata.category(ch)[0] in "LZN" for ch in text)


def check_tags(tags: Mapping[str, str], naming: Naming = CLI) -> None:
    if len(tags) > maximum("Tags"):
        raise CloudDDPError(f"{len(tags)} tags: SageMaker accepts at most {maximum('Tags')}.")
    for key, value in tags.items():
        if check_shape("TagKey", key) or not is_tag_text(key) or key.lower().startswith("aws:"):
            raise CloudDDPError(
                f"{naming.tag_key.format(key=key)}: tag keys are 1-{maximum('TagKey')} letters, digits, spaces or "
                f"_.:/=+-@ and may not start with 'aws:'."
            )
        if check_shape("TagValue", value) or not is_tag_text(value):
            raise CloudDDPError(
                f"{naming.tag_value.format(key=key, value=value[:40])}: tag values are at most {maximum('TagValue')} "
                f"letters, digits, spaces or _.:/=+-@."
            )


def check_network(subnets: list[str], security_groups: list[str]) -> None:
    if bool(subnets) != bool(security_groups):
        missing = "--security-group" if subnets else "--subnet"
        raise CloudDDPError(f"a VPC job needs both --subnet and --security-group; {missing} is missing.")
    most_subnets, most_groups = maximum("VpcConfig.Subnets"), maximum("VpcConfig.SecurityGroupIds")
    if len(subnets) > most_subnets or len(security_groups) > most_groups:
        raise CloudDDPError(
            f"SageMaker takes at most {most_subnets} subnets and {most_groups} security groups "
            f"(got {len(subnets)} and {len(security_groups)})."
        )
    ids = [("VpcConfig.Subnets.member", item) for item in subnets]
    for path, item in [*ids, *(("VpcConfig.SecurityGroupIds.member", item) for item in security_groups)]:
        if check_shape(path, item):
            raise CloudDDPError(f"{item!r} is not a subnet or security group id (like subnet-0abc or sg-0abc).")


def check_kms_key(key: str | None) -> None:
    if key is not None and (not key or check_shape("KmsKeyId", key)):
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
