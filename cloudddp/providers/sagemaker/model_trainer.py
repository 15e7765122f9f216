"""The same job as a SageMaker SDK v3 `ModelTrainer`, for people who live in the SDK.

The trainer runs cloudddp's launcher, not the SDK's torchrun driver: the source goes up
as our archive (user files + bundled job side + bootstrap) and `SourceCode(command=...)`
runs the bootstrap after the SDK's `sm_train.sh` extracts it; no `distributed=` is
given. The launcher reads hyperparameters.json itself (`--hyperparameters-as-args` in
cloudddp_job.json), since the SDK does not pass hyperparameters to a `command`.

Needs `pip install 'cloudddp[sagemaker-sdk]'`; imported only when called.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker import validation as check
from cloudddp.providers.sagemaker.images import training_image
from cloudddp.providers.sagemaker.provider import SageMakerProvider, role_of
from cloudddp.providers.sagemaker.request import (
    ARCHIVE_NAME,
    CHECKPOINT_DIR,
    ENTRYPOINT,
    Staging,
    default_bucket,
    encode_hyperparameter,
    job_config,
    plan_checkpoint,
    validate_spec,
)
from cloudddp.staging.archive import BOOTSTRAP_NAME, pack_source

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

COMMAND = f"python3 {BOOTSTRAP_NAME}"


def sdk_classes() -> Any:
    """The SDK v3 classes the trainer is built from; a clear error when the SDK is missing."""
    try:
        from sagemaker.core.helper.session_helper import Session  # type: ignore[import-not-found]
        from sagemaker.core.training import configs  # type: ignore[import-not-found]
        from sagemaker.train import ModelTrainer  # type: ignore[import-not-found]
    except ImportError as exc:
        raise CloudDDPError(
            f"to_model_trainer() needs the SageMaker Python SDK v3 ({exc.name} is missing): "
            f"pip install 'cloudddp[sagemaker-sdk]'."
        ) from None
    return SimpleNamespace(Session=Session, ModelTrainer=ModelTrainer, configs=configs)


def trainer_options(spec: JobSpec, bucket: str, configs: Any) -> dict[str, Any]:
    """Output, networking, checkpoints, tags and inputs: the ModelTrainer arguments only some jobs need."""
    sm = spec.sagemaker
    options: dict[str, Any] = {}
    if sm.bucket or spec.output or sm.kms_key:
        output = spec.output if spec.output and spec.output.startswith("s3://") else None
        if output is None and sm.bucket:
            output = Staging(bucket=sm.bucket, prefix=sm.prefix, job_name=spec.name).folder_uri()
        options["output_data_config"] = configs.OutputDataConfig(s3_output_path=output, kms_key_id=sm.kms_key)
    if sm.subnets or sm.network_isolation or sm.inter_container_encryption:
        options["networking"] = configs.Networking(
            subnets=list(sm.subnets) or None, security_group_ids=list(sm.security_groups) or None,
            enable_network_isolation=sm.network_isolation,
            enable_inter_container_traffic_encryption=sm.inter_container_encryption,
        )  # fmt: skip
    checkpoint = plan_checkpoint(spec, Staging(bucket=bucket, prefix=sm.prefix, job_name=spec.name))
    if checkpoint.upload:
        raise CloudDDPError(
            f"checkpoint {spec.checkpoint!r} is a local folder: the ModelTrainer cannot upload it. Use Estimator.fit() "
            f"(it uploads the folder first), or pass an s3:// URI as checkpoint."
        )
    if checkpoint.uri:
        options["checkpoint_config"] = configs.CheckpointConfig(s3_uri=checkpoint.uri, local_path=CHECKPOINT_DIR)
    if sm.tags:
        options["tags"] = [configs.Tag(key=k, value=v) for k, v in sm.tags.items()]
    if spec.inputs:
        options["input_data_config"] = [
            configs.InputData(
                channel_name=name, data_source=where if where.startswith("s3://") else str(Path(where).resolve())
            )
            for name, where in sorted(spec.inputs.items())
        ]
    return options


def require_sagemaker(provider: str) -> None:
    """Estimator.to_model_trainer() is this provider's: the estimator of another one is refused."""
    if provider != "sagemaker":
        raise CloudDDPError(f"to_model_trainer() is for provider='sagemaker', not {provider!r}.")


def to_model_trainer(spec: JobSpec, region: str | None = None, boto_session: Any = None) -> Any:
    """A `sagemaker.train.ModelTrainer` for `spec`; `.train()` on it submits through the SDK."""
    sdk = sdk_classes()
    validate_spec(spec)
    sm = spec.sagemaker
    role = check.check_role(role_of(spec))
    chosen = SageMakerProvider(region=region).region(spec) if boto_session is None else str(boto_session.region_name)
    image = training_image(sm.image, chosen, sm.framework_version, sm.py_version, sm.instance_type)
    staging = Path(tempfile.mkdtemp(prefix="cloudddp-trainer-"))
    try:
        trainer = model_trainer(spec, sdk, role, chosen, image, staging, boto_session)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    # The SDK uploads the packed source from `staging` when train() is called: the folder lives as long as the
    # trainer (removed when it is collected, or at exit), not for ever in the user's temp folder.
    weakref.finalize(trainer, shutil.rmtree, staging, True)
    return trainer


def model_trainer(spec: JobSpec, sdk: Any, role: str, region: str, image: str, staging: Path, boto_session: Any) -> Any:
    """The trainer itself, its source packed into `staging`."""
    import boto3

    sm = spec.sagemaker
    archive = pack_source(spec.source_dir, staging / ARCHIVE_NAME, job_config(spec, ENTRYPOINT))
    # Staging in cloudddp's bucket also spares the SDK's STS lookup of its own default bucket.
    bucket = sm.bucket or default_bucket(check.account_of_role(role), region)
    session = sdk.Session(boto_session=boto_session or boto3.Session(region_name=region), default_bucket=bucket,
                          default_bucket_prefix=sm.prefix.strip("/") or None)  # fmt: skip
    options = trainer_options(spec, bucket, sdk.configs)
    configs = sdk.configs
    return sdk.ModelTrainer(
        sagemaker_session=session,
        role=role,
        base_job_name=spec.name,
        training_image=image,
        source_code=configs.SourceCode(source_dir=str(archive.path), command=COMMAND),
        compute=configs.Compute(
            instance_type=sm.instance_type, instance_count=spec.nodes, volume_size_in_gb=sm.volume_size_gb,
            enable_managed_spot_training=sm.spot or None,
        ),
        stopping_condition=configs.StoppingCondition(max_runtime_in_seconds=spec.runtime_limit(check.DEFAULT_MAX_RUNTIME_SECONDS),
                                                     max_wait_time_in_seconds=sm.max_wait if sm.spot else None),
        environment=dict(spec.environment),
        # Encoded here: v3's safe_serialize sends a string bare and the launcher's JSON decoding would
        # turn "1.10" into 1.1; a JSON string ('"1.10"') passes through safe_serialize unchanged.
        hyperparameters={k: encode_hyperparameter(v) for k, v in spec.hyperparameters.items()},
        **options,
    )  # fmt: skip
