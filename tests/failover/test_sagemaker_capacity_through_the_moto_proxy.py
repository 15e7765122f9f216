"""Failover against the moto server through a proxy that answers as SageMaker without capacity (issue 41's test):
CreateTrainingJob for ml.p4d.24xlarge is refused with ResourceLimitExceeded in the service's error shape, the job for
ml.g5.12xlarge is created and ends Failed with a CapacityError reason, and the job lands on the third target. Every
SageMaker request is recorded by the proxy; each attempt's job name is the one the index held before it was sent."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers.capacity_proxy import CapacityProxy

from cloudddp import config, job_index
from cloudddp.config import target_specs
from cloudddp.failover import Failover, run_name, targets_from

TARGETS = [
    {"name": "p4d", "provider": "sagemaker", "sagemaker": {"instance_type": "ml.p4d.24xlarge"}},
    {"name": "g5", "provider": "sagemaker", "sagemaker": {"instance_type": "ml.g5.12xlarge"}},
    {"name": "m5", "provider": "sagemaker", "sagemaker": {"instance_type": "ml.m5.xlarge"}},
]


def test_the_job_lands_on_the_third_target(
    moto_server: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in moto_server.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('training')\n")
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"name": "fo", "entry_point": "train.py", "targets": TARGETS}))
    said: list[str] = []
    with CapacityProxy(moto_server["AWS_ENDPOINT_URL"], refused={"ml.p4d.24xlarge"},
                       no_capacity={"ml.g5.12xlarge"}) as proxy:  # fmt: skip
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        found = targets_from(target_specs(config.job_spec("sagemaker", job, {}), job, {}))
        code = Failover(found, say=said.append, poll=0.05).run(logs=False)

    assert code == 0, said
    creates = [(instance, name) for operation, instance, name in proxy.requests if operation == "CreateTrainingJob"]
    assert [instance for instance, _ in creates] == ["ml.p4d.24xlarge", "ml.g5.12xlarge", "ml.m5.xlarge"]
    attempts = job_index.attempts(run_name(found))
    assert [(a.target, a.state) for a in attempts] == [("p4d", "moved on"), ("g5", "moved on"), ("m5", "succeeded")]
    assert [a.job_id for a in attempts] == [name for _, name in creates]  # recorded before it was sent
    assert "ResourceLimitExceeded" in attempts[0].reason and attempts[1].reason.startswith("CapacityError")
    described = {name for operation, _, name in proxy.requests if operation == "DescribeTrainingJob"}
    assert creates[0][1] not in described and creates[1][1] in described  # the refused one never existed
    assert [entry.job_id for entry in job_index.entries()] == [creates[2][1], creates[1][1]]
    assert any("no capacity on target 1 (p4d, sagemaker): ResourceLimitExceeded" in line for line in said)
    assert any("no capacity on target 2 (g5, sagemaker): CapacityError" in line for line in said)


def test_the_proxy_refuses_in_the_shape_botocore_reads(moto_server: dict[str, str]) -> None:
    """The proxy's refusal read by botocore's own client: a ClientError whose code and message are the shape's."""
    import boto3
    from botocore.exceptions import ClientError

    with CapacityProxy(moto_server["AWS_ENDPOINT_URL"], refused={"ml.p4d.24xlarge"}) as proxy:
        client = boto3.client("sagemaker", endpoint_url=proxy.url, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
        with pytest.raises(ClientError) as refused:
            client.create_training_job(
                TrainingJobName="refused", RoleArn="arn:aws:iam::123456789012:role/r",
                AlgorithmSpecification={"TrainingImage": "image", "TrainingInputMode": "File"},
                OutputDataConfig={"S3OutputPath": "s3://b/o"},
                ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
                StoppingCondition={"MaxRuntimeInSeconds": 60},
            )  # fmt: skip
    error = refused.value.response["Error"]
    assert error["Code"] == "ResourceLimitExceeded" and "ml.p4d.24xlarge for training job usage" in error["Message"]
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
