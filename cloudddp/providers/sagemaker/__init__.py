"""`--provider sagemaker`: Amazon SageMaker training jobs, submitted with boto3 (see provider.py).

This file only declares the provider (see cloudddp.providers.registry); boto3 is imported
by provider.py, when the provider is created.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.providers.sagemaker.instance_groups import InstanceGroupSetting
from cloudddp.secrets_policy import HYPERPARAMETERS, InClear
from cloudddp.spec import Section


class SageMakerSettings(Section):
    """Amazon SageMaker training jobs (submitted with boto3)."""

    region: str | None = None
    role: str | None = None
    instance_type: str = "ml.m5.xlarge"
    image: str | None = None
    framework_version: str = "2.5"
    py_version: str | None = None  # default: the image table's Python for framework_version (py311 for 2.5)
    bucket: str | None = None
    prefix: str = "cloudddp"
    volume_size_gb: int = Field(default=30, ge=1)
    spot: bool = False
    max_wait: int | None = Field(default=None, ge=1)
    checkpoint_s3: str | None = None
    subnets: list[str] = Field(default_factory=list)
    security_groups: list[str] = Field(default_factory=list)
    kms_key: str | None = None
    network_isolation: bool = False
    inter_container_encryption: bool = False
    tags: dict[str, str] = Field(default_factory=dict)
    # A heterogeneous cluster (ResourceConfig.InstanceGroups) instead of instance_type x nodes, and the groups
    # that join the distributed job (default: all): see instance_groups.py.
    instance_groups: list[InstanceGroupSetting] = Field(default_factory=list)
    distribution_groups: list[str] | None = None
    checkpoint_local_path: str | None = None  # CheckpointConfig.LocalPath (default /opt/ml/checkpoints)
    # AlgorithmSpecification.TrainingInputMode: File downloads the channels, FastFile streams them from S3 on demand
    # at the same paths (Pipe needs a reader of its own and is not offered).
    input_mode: Literal["File", "FastFile"] = "File"


PROVIDER = ProviderInfo(
    name="sagemaker",
    title="SageMaker",
    summary="Amazon SageMaker training jobs (boto3), data staged to S3",
    settings=SageMakerSettings,
    options=(
        Option("--region", "region", help="AWS region"),
        Option("--instance-type", "instance_type"),
        Option("--role", "role", help="IAM role ARN (or CLOUDDDP_SAGEMAKER_ROLE)"),
        Option("--image", "image", help="container image URI"),
        Option("--framework-version", "framework_version"),
        Option("--py-version", "py_version"),
        Option("--bucket", "bucket", help="staging bucket"),
        Option("--prefix", "prefix", help="staging key prefix"),
        Option("--spot", "spot", type=bool, off_flag="--on-demand"),
        Option("--max-wait", "max_wait", type=int, help="spot: seconds to wait for capacity"),
        Option("--checkpoint-s3", "checkpoint_s3"),
        Option("--subnet", "subnets", multiple=True),
        Option("--security-group", "security_groups", multiple=True),
        Option("--kms-key", "kms_key"),
        Option("--network-isolation", "network_isolation", type=bool),
        Option("--inter-container-encryption", "inter_container_encryption", type=bool),
        Option("--tag", "tags", key_value=True, help="K=V (repeatable)"),
    ),
    interrupt_stops_job=False,  # Ctrl-C asks before stopping a job that bills by the second
    factory="cloudddp.providers.sagemaker.provider:SageMakerProvider",
    applies_metric_definitions=True,  # AlgorithmSpecification.MetricDefinitions: SageMaker extracts to CloudWatch
    # The script's arguments are staged to S3 with the code (cloudddp_job.json), not in the request. A secret in
    # the Environment, which DescribeTrainingJob shows too, is warned about (request.py), as it always was.
    in_clear=InClear(
        fields=(HYPERPARAMETERS,),
        where="stored in clear with the training job (DescribeTrainingJob shows its HyperParameters)",
        by_reference=lambda variable: (
            f"Put it in AWS Secrets Manager, pass the secret's name in a variable (-e {variable}_SECRET=NAME), allow "
            f"the job's role secretsmanager:GetSecretValue on it and read it in the script with boto3 "
            f"(docs/guides/secrets.md)."
        ),
    ),
)

__all__ = ["PROVIDER", "SageMakerSettings"]
