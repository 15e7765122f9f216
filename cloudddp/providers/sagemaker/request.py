"""From a `JobSpec` to the exact `CreateTrainingJob` request: pure, no AWS calls.

This is what `--dry-run` prints and what `submit` sends. Two ways to start cloudddp's
bootstrap on every instance, chosen by the image:

- AWS's PyTorch Deep Learning Containers (`pytorch-training` images) run SageMaker's
  training toolkit: it downloads `sagemaker_submit_directory` (our tar.gz), runs
  `sagemaker_program` (cloudddp_bootstrap.py) on every host and passes the
  hyperparameters as `--key value` arguments, with SM_* variables set.
  With network isolation the archive comes as the `cloudddp_code` input channel instead
  (the container cannot reach S3), the way the SageMaker SDK does it.
- Any other image (bring your own): `AlgorithmSpecification.ContainerEntrypoint` runs a
  short shell command that extracts the archive from the `cloudddp_code` channel and
  runs the bootstrap with `--hyperparameters-as-args` (the launcher reads
  hyperparameters.json). The launcher also derives SM_HPS, SM_HP_<KEY> and SM_USER_ARGS
  from that file, formatted as the toolkit formats them (cloudddp.cluster.sagemaker
  framework_environment), so none go into `Environment`: hyperparameters keep
  SageMaker's own limits there, not those of variables. The image needs only
  python3 and tar.

Hyperparameter values are JSON-encoded strings, as the SageMaker SDK sends them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudddp.errors import CloudDDPError
from cloudddp.metrics import as_definitions
from cloudddp.providers.sagemaker import validation as check
from cloudddp.providers.sagemaker.aws import check_endpoint_variables
from cloudddp.providers.sagemaker.images import is_dlc
from cloudddp.providers.sagemaker.instance_groups import check_instance_groups
from cloudddp.providers.sagemaker.service_model import maximum
from cloudddp.providers.sagemaker.validation import CODE_CHANNEL
from cloudddp.redact import secret_environment_warning
from cloudddp.staging.archive import BOOTSTRAP_NAME

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

ARCHIVE_NAME = "sourcedir.tar.gz"
CODE_DIR = "/opt/ml/code"
CHECKPOINT_DIR = "/opt/ml/checkpoints"
TOOLKIT, ENTRYPOINT = "toolkit", "entrypoint"
SECRET_STORE = "AWS Secrets Manager (or SSM Parameter Store SecureString), readable by the job's role"
# Fits SageMaker's 256-character limit on one container argument (checked below).
ENTRYPOINT_COMMAND = (
    "set -e; mkdir -p {code}; tar -xzf /opt/ml/input/data/{channel}/*.tar.gz -C {code}; cd {code}; "
    'exec "$(command -v python3 || command -v python)" {bootstrap}'
)
# Instance families with local NVMe storage: SageMaker rejects VolumeKmsKeyId for them
# (their instance store is encrypted by the hardware).
INSTANCE_STORAGE = re.compile(
    r"^ml\.(g4dn|g5|g6|g6e|g7|g7e|p3dn|p4d|p4de|p5|p5e|p5en|p6-b200|p6-b300|p6e-gb200|trn1|trn1n|trn2|"
    r"m5d|c5d|r5d|m6id|c6id|r6id)\."
)


@dataclass
class Staging:
    """Where things go in S3 for one job."""

    bucket: str
    prefix: str
    job_name: str

    def key(self, *parts: str) -> str:
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p.strip("/"))

    def uri(self, *parts: str) -> str:
        return f"s3://{self.bucket}/{self.key(*parts)}"

    def folder_uri(self, *parts: str) -> str:
        """The folder's URI ending in one "/": `s3://bucket/` when the prefix normalises to nothing ("" or "/"),
        as the code and input keys drop the empty prefix (never `s3://bucket//`)."""
        key = self.key(*parts)
        return f"s3://{self.bucket}/" + (f"{key}/" if key else "")

    @property
    def code_uri(self) -> str:
        return self.uri(self.job_name, "source", ARCHIVE_NAME)

    def input_prefix(self, local: str) -> str:
        """A stable prefix per local folder: a re-launch finds the data already there and skips it."""
        path = Path(local).resolve()
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
        name = re.sub(r"[^A-Za-z0-9._-]", "-", path.name) or "data"
        return self.key("inputs", f"{name}-{digest}") + "/"


@dataclass
class Upload:
    """A local folder `submit` stages in S3 before the job starts (no channel: the checkpoint to resume from)."""

    source: str
    target: str
    channel: str | None = None

    def to_document(self) -> dict[str, str]:
        channel = {"channel": self.channel} if self.channel else {}
        return {**channel, "from": self.source, "to": self.target}


@dataclass
class CodeUpload:
    """The source folder, packed with the job side and `cloudddp_job.json`, uploaded as one archive."""

    source: str
    target: str
    job_config: dict[str, Any]

    def to_document(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "cloudddp_job.json": self.job_config}


@dataclass
class SageMakerStaging:
    """What `submit` does before CreateTrainingJob, typed; the dry run prints it as `before_submit`."""

    bucket: str
    code: CodeUpload
    inputs: list[Upload]
    mode: str
    region: str
    checkpoint: Upload | None = None
    encryption: str | None = None
    warnings: list[str] = field(default_factory=list)
    bucket_is_default: bool = False

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "bucket": self.bucket, "code": self.code.to_document(), "inputs": [u.to_document() for u in self.inputs],
            "mode": self.mode, "region": self.region,
        }  # fmt: skip
        if self.checkpoint:
            document["checkpoint"] = self.checkpoint.to_document()
        if self.encryption:
            document["encryption"] = self.encryption
        if self.warnings:
            document["warnings"] = list(self.warnings)
        document["bucket_is_default"] = self.bucket_is_default
        return document


@dataclass
class Rendered:
    """The CreateTrainingJob parameters (as boto3 takes them) and what must be staged first."""

    payload: dict[str, Any]
    staging: SageMakerStaging


def default_bucket(account: str, region: str) -> str:
    return f"cloudddp-{account}-{region}"


def job_name_for(spec: JobSpec, now: float | None = None) -> str:
    """`<name>-YYYYmmdd-HHMMSS-mmm`, checked against SageMaker's rule."""
    moment = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(moment)) + f"-{int(moment * 1000) % 1000:03d}"
    return check.check_job_name(f"{spec.name}-{stamp}", spec.name)


def encode_hyperparameter(value: Any) -> str:
    """JSON, as the SDK v2's framework estimators send every value (`EstimatorBase._json_encode_hyperparameters`).

    A string stays the string it was ("1.10" is sent as '"1.10"'; the training toolkit and
    cloudddp's launcher decode it back to 1.10). NaN and infinities are not JSON: refused.
    """
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        raise CloudDDPError(
            f"hyperparameter value {value!r} is not a finite number; SageMaker's hyperparameters are JSON, which "
            f"has no NaN or Infinity. Pass it as text (-H name=nan on the command line, or quote it in YAML)."
        ) from None


@dataclass
class CheckpointPlan:
    """Where the job's /opt/ml/checkpoints syncs to, and the local folder to seed it from first."""

    uri: str | None = None
    upload: Upload | None = None
    warnings: list[str] = field(default_factory=list)


def plan_checkpoint(spec: JobSpec, staging: Staging) -> CheckpointPlan:
    """SageMaker's CheckpointConfig for the spec; a spot job always gets one.

    A local `checkpoint` folder is uploaded under this job's prefix before the job starts
    (so the job resumes from it): the job's own checkpoints then live in S3, not locally.
    """
    sm = spec.sagemaker
    local = spec.checkpoint if spec.checkpoint and not spec.checkpoint.startswith("s3://") else None
    remote = sm.checkpoint_s3 or (spec.checkpoint if local is None else None)
    if local is None and remote is None:
        if not sm.spot:
            return CheckpointPlan()
        uri = staging.uri(staging.job_name, "checkpoints") + "/"
        return CheckpointPlan(uri=uri, warnings=[
            f"spot job without a checkpoint location: /opt/ml/checkpoints syncs to {uri} (set checkpoint or "
            f"--checkpoint-s3 to choose; a job interrupted without checkpoints restarts from scratch)"
        ])  # fmt: skip
    if remote is not None:
        return CheckpointPlan(uri=check.check_s3_uri(remote, "--checkpoint-s3" if sm.checkpoint_s3 else "checkpoint"))
    uri = staging.uri(staging.job_name, "checkpoints") + "/"
    path = Path(local).resolve()  # type: ignore[arg-type]
    if not path.is_dir():
        return CheckpointPlan(uri=uri, warnings=[
            f"checkpoint {local!r}: the local folder {path} does not exist, so there is nothing to resume from; "
            f"the job's checkpoints sync to {uri}"
        ])  # fmt: skip
    return CheckpointPlan(uri=uri, upload=Upload(source=str(path), target=uri), warnings=[
        f"checkpoint {local!r} is a local folder: it is uploaded to {uri} before the job starts, and the job's "
        f"checkpoints sync there (not back to {path})"
    ])  # fmt: skip


def launcher_args(spec: JobSpec, mode: str) -> list[str]:
    args: list[str] = []
    if spec.nproc_per_node is not None:
        args.append(f"--nproc-per-node={spec.nproc_per_node}")
    if spec.sagemaker.distribution_groups:
        args.append(f"--instance-groups={','.join(spec.sagemaker.distribution_groups)}")
    if mode == ENTRYPOINT:
        args.append("--hyperparameters-as-args")
    return args


def job_config(spec: JobSpec, mode: str) -> dict[str, Any]:
    """`cloudddp_job.json` in the archive: what the bootstrap runs on every host."""
    return {
        "entry_point": spec.entry_point,
        "module": spec.module,
        "args": list(spec.args),
        "launcher_args": launcher_args(spec, mode),
        "provider": "sagemaker",
        "mode": mode,
    }


def entrypoint_command() -> str:
    command = ENTRYPOINT_COMMAND.format(code=CODE_DIR, channel=CODE_CHANNEL, bootstrap=BOOTSTRAP_NAME)
    assert len(command) <= maximum("AlgorithmSpecification.ContainerArguments.member"), len(command)
    return command


def s3_channel(name: str, uri: str) -> dict[str, Any]:
    return {
        "ChannelName": name,
        "DataSource": {
            "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri, "S3DataDistributionType": "FullyReplicated"}
        },
    }


# A staged folder's channel reads the version `submit` publishes (`<prefix>/v-<content hash>/`, see
# cloudddp.staging.engine); the hash is only known once the data is read, so the dry run says so.
# S3Prefix channels take every object whose key starts with S3Uri (API reference, S3DataSource): ending in
# "/", the version excludes the manifest beside it and every other version.
VERSION_AT_SUBMIT = "v-<content-hash-decided-at-submit>/"
# The version folder as submit sends it (staging.engine: VERSION_FOLDER, "v-" and 16 hex digits): its URI's length.
SENT_VERSION = "v-" + "0" * 16 + "/"


def input_channels(spec: JobSpec, staging: Staging) -> tuple[list[dict[str, Any]], list[Upload]]:
    """One S3 channel per input; a local folder is staged under a prefix of its own first."""
    channels: list[dict[str, Any]] = []
    uploads: list[Upload] = []
    for channel, where in sorted(spec.inputs.items()):
        if where.startswith("s3://"):
            channels.append(s3_channel(channel, where))
            continue
        target = f"s3://{staging.bucket}/{staging.input_prefix(where)}"
        uploads.append(Upload(channel=channel, source=str(Path(where).resolve()), target=target))
        channels.append(s3_channel(channel, target + VERSION_AT_SUBMIT))
    return channels, uploads


def container_settings(
    spec: JobSpec, mode: str, image: str, staging: Staging, code_channel: bool, region: str
) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """AlgorithmSpecification, HyperParameters and Environment for the toolkit or the entrypoint mode."""
    hyperparameters = {k: encode_hyperparameter(v) for k, v in spec.hyperparameters.items()}
    environment = dict(spec.environment)
    algorithm: dict[str, Any] = {"TrainingImage": image, "TrainingInputMode": spec.sagemaker.input_mode}
    if mode == TOOLKIT:
        submit_dir = f"/opt/ml/input/data/{CODE_CHANNEL}/{ARCHIVE_NAME}" if code_channel else staging.code_uri
        hyperparameters.update(
            sagemaker_program=encode_hyperparameter(BOOTSTRAP_NAME),
            sagemaker_submit_directory=encode_hyperparameter(submit_dir),
            sagemaker_region=encode_hyperparameter(region),
            sagemaker_container_log_level=encode_hyperparameter(20),
            sagemaker_job_name=encode_hyperparameter(staging.job_name),
        )
    else:
        algorithm["ContainerEntrypoint"] = ["/bin/sh", "-c"]
        algorithm["ContainerArguments"] = [entrypoint_command()]
    if spec.metrics:  # as the SDK v2 sends metric_definitions; SageMaker turns the log lines into CloudWatch metrics
        algorithm["MetricDefinitions"] = check.check_metric_definitions(as_definitions(spec.metrics))
    check.check_hyperparameters(hyperparameters)
    check.check_environment(environment)
    return algorithm, hyperparameters, environment


def output_path(spec: JobSpec, staging: Staging, warnings: list[str]) -> str:
    if spec.output and spec.output.startswith("s3://"):
        return check.check_s3_uri(spec.output, "output")
    output = staging.folder_uri()  # its length is checked with the other staging URIs (check_staging_uris)
    if spec.output:
        warnings.append(f"output {spec.output!r} is local; on SageMaker the model goes to {output}<job>/output/")
    return output


def check_staging_uris(spec: JobSpec, staging: Staging, payload: dict[str, Any], uploads: list[Upload]) -> None:
    """The S3 URIs built from the staging bucket and --prefix fit S3Uri's 1024 characters (botocore's SageMaker
    model, shape S3Uri; checked before anything is uploaded, dry runs too). The prefix is the only part without a
    bound of its own (bucket 63, job name 63, input folder name 255 characters), so the message names it."""
    built = [(f"the input channel {u.channel!r} (InputDataConfig S3Uri)", u.target + SENT_VERSION) for u in uploads]
    built.append(("the source archive (the code channel's S3Uri, or sagemaker_submit_directory)", staging.code_uri))
    if not (spec.output and spec.output.startswith("s3://")):
        built.append(("OutputDataConfig.S3OutputPath", payload["OutputDataConfig"]["S3OutputPath"]))
    checkpoint = payload.get("CheckpointConfig", {}).get("S3Uri")
    given = spec.sagemaker.checkpoint_s3 or (spec.checkpoint if (spec.checkpoint or "").startswith("s3://") else None)
    if checkpoint and not given:  # else the user's own URI, checked as given (check_s3_uri)
        built.append(("CheckpointConfig.S3Uri", checkpoint))
    for what, uri in built:
        if len(uri) > maximum("S3Uri"):
            shown = repr(staging.prefix[:40]) + ("..." if len(staging.prefix) > 40 else "")
            raise CloudDDPError(
                f"--prefix (sagemaker.prefix) {shown} is {len(staging.prefix)} characters, which makes {what} "
                f"{len(uri)} characters long ({uri[:80]}...); SageMaker's S3Uri takes at most {maximum('S3Uri')}. "
                f"Shorten the prefix."
            )


def add_options(payload: dict[str, Any], spec: JobSpec, checkpoint: CheckpointPlan, warnings: list[str]) -> None:
    """Spot, checkpoints, KMS, VPC and tags: the parts of the request only some jobs have."""
    sm = spec.sagemaker
    if sm.spot:
        payload["StoppingCondition"]["MaxWaitTimeInSeconds"] = sm.max_wait
    if checkpoint.uri:
        payload["CheckpointConfig"] = {"S3Uri": checkpoint.uri, "LocalPath": sm.checkpoint_local_path or CHECKPOINT_DIR}
        warnings += checkpoint.warnings
    if sm.kms_key:
        payload["OutputDataConfig"]["KmsKeyId"] = sm.kms_key
        stored = [t for t in instance_types(spec) if INSTANCE_STORAGE.match(t)]
        if stored:
            warnings.append(
                f"{stored[0]} has instance storage, encrypted by its hardware: VolumeKmsKeyId is left out "
                f"(SageMaker rejects it for such instances)"
            )
        else:
            payload["ResourceConfig"]["VolumeKmsKeyId"] = sm.kms_key
    if sm.subnets:
        payload["VpcConfig"] = {"SecurityGroupIds": list(sm.security_groups), "Subnets": list(sm.subnets)}
    if sm.tags:
        payload["Tags"] = [{"Key": k, "Value": v} for k, v in sm.tags.items()]


def instance_types(spec: JobSpec) -> list[str]:
    """Every instance type the job runs on: its groups', else `instance_type`."""
    return [g.instance_type for g in spec.sagemaker.instance_groups] or [spec.sagemaker.instance_type]


def resource_config(spec: JobSpec) -> dict[str, Any]:
    """ResourceConfig: the heterogeneous cluster's InstanceGroups, else InstanceType x InstanceCount."""
    sm = spec.sagemaker
    if sm.instance_groups:
        return {"InstanceGroups": [g.to_request() for g in sm.instance_groups], "VolumeSizeInGB": sm.volume_size_gb}
    return {"InstanceType": sm.instance_type, "InstanceCount": spec.nodes, "VolumeSizeInGB": sm.volume_size_gb}


def check_cluster(spec: JobSpec) -> None:
    """The instance type and count, or the instance groups (never both), as SageMaker would check them."""
    sm = spec.sagemaker
    check_instance_groups(
        sm.instance_groups, sm.distribution_groups, check.training_instance_types(),
        instance_type_set="instance_type" in sm.model_fields_set, nodes_set="nodes" in spec.model_fields_set,
    )  # fmt: skip
    if not sm.instance_groups:
        check.check_instance(sm.instance_type)
    if sm.checkpoint_local_path is not None and not 1 <= len(sm.checkpoint_local_path) <= maximum(
        "CheckpointConfig.LocalPath"
    ):
        raise CloudDDPError(
            f"sagemaker.checkpoint_local_path is {len(sm.checkpoint_local_path)} characters; SageMaker's "
            f"CheckpointConfig.LocalPath takes 1-{maximum('CheckpointConfig.LocalPath')}."
        )


REQUIREMENTS = "requirements.txt"


def requirements_warning(source_dir: str, mode: str) -> str | None:
    """A requirements.txt the job will not install. SageMaker's training toolkit pip-installs the code folder's
    requirements.txt before the script (aws/sagemaker-training-toolkit 33839372, src/sagemaker_training/
    entry_point.py `install` -> modules.py `install_requirements`); the ContainerEntrypoint mode runs no toolkit."""
    path = Path(source_dir) / REQUIREMENTS
    if mode != ENTRYPOINT or not path.is_file():
        return None
    return (
        f"{path} is not installed: the image is not an AWS PyTorch training image (pytorch-training), so the job "
        f"starts without SageMaker's training toolkit, which is what pip-installs {REQUIREMENTS}. Bake the packages "
        f"into the image (`RUN pip install -r {REQUIREMENTS}` in its Dockerfile), or use a pytorch-training image"
    )


def build_request(spec: JobSpec, *, job_name: str, region: str, role: str, image: str, bucket: str) -> Rendered:
    """The CreateTrainingJob request and the staging plan for it (validated, nothing sent)."""
    sm = spec.sagemaker
    mode = TOOLKIT if is_dlc(image) else ENTRYPOINT
    if len(image) > maximum("AlgorithmSpecification.TrainingImage"):
        raise CloudDDPError(
            f"--image is {len(image)} characters; SageMaker allows at most {maximum('AlgorithmSpecification.TrainingImage')}."
        )
    staging = Staging(bucket=bucket, prefix=sm.prefix, job_name=job_name)
    channels, uploads = input_channels(spec, staging)
    code_channel = mode == ENTRYPOINT or sm.network_isolation
    if code_channel:
        channels.append(s3_channel(CODE_CHANNEL, staging.code_uri))
    algorithm, hyperparameters, environment = container_settings(spec, mode, image, staging, code_channel, region)
    exposed = secret_environment_warning(spec.environment, "SageMaker", SECRET_STORE)
    warnings = [w for w in (exposed, requirements_warning(spec.source_dir, mode)) if w]
    payload: dict[str, Any] = {
        "TrainingJobName": job_name,
        "RoleArn": role,
        "AlgorithmSpecification": algorithm,
        "InputDataConfig": channels,
        "OutputDataConfig": {"S3OutputPath": output_path(spec, staging, warnings)},
        "ResourceConfig": resource_config(spec),
        "StoppingCondition": {"MaxRuntimeInSeconds": spec.runtime_limit(check.DEFAULT_MAX_RUNTIME_SECONDS)},
        "HyperParameters": hyperparameters,
        "Environment": environment,
        "EnableNetworkIsolation": sm.network_isolation,
        "EnableInterContainerTrafficEncryption": sm.inter_container_encryption,
        "EnableManagedSpotTraining": sm.spot,
    }  # fmt: skip
    if not channels:
        del payload["InputDataConfig"]
    if not environment:
        del payload["Environment"]
    checkpoint = plan_checkpoint(spec, staging)
    add_options(payload, spec, checkpoint, warnings)
    check_staging_uris(spec, staging, payload, uploads)
    code = CodeUpload(source=str(Path(spec.source_dir).resolve()), target=staging.code_uri,
                      job_config=job_config(spec, mode))  # fmt: skip
    plan = SageMakerStaging(
        bucket=bucket, code=code, inputs=uploads, mode=mode, region=region, checkpoint=checkpoint.upload,
        encryption=f"SSE-KMS with {sm.kms_key}" if sm.kms_key else None, warnings=warnings,
    )  # fmt: skip
    return Rendered(payload=payload, staging=plan)


def validate_spec(spec: JobSpec) -> None:
    """Every check that needs no AWS call and no region."""
    sm = spec.sagemaker
    check_cluster(spec)
    check.check_stopping(spec.runtime_limit(check.DEFAULT_MAX_RUNTIME_SECONDS), sm.spot, sm.max_wait)
    check.check_inputs(spec.inputs)
    check.check_network(sm.subnets, sm.security_groups)
    check.check_kms_key(sm.kms_key)
    check.check_tags(sm.tags)
    if sm.bucket is not None and not check.S3_URI.fullmatch(f"s3://{sm.bucket}"):
        raise CloudDDPError(f"--bucket {sm.bucket!r} is not a valid S3 bucket name (just the name, no s3://).")
    if sm.checkpoint_s3:
        check.check_s3_uri(sm.checkpoint_s3, "--checkpoint-s3")
    check.check_checkpoint(spec.checkpoint, sm.checkpoint_s3)
    check_endpoint_variables(os.environ)
    for value in spec.hyperparameters.values():
        encode_hyperparameter(value)
    spec.require_source()
