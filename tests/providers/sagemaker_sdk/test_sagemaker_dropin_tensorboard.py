"""The drop-in's tensorboard_output_config (cloudddp/sagemaker/tensorboard.py): the request's TensorBoardOutputConfig
as SDK v2 builds it from its own class or cloudddp's (the whole request against a recorded v2 one is in
test_sagemaker_dropin_requests.py, cases tensorboard_output_config*); local mode uploads every host's LocalPath folder
to {S3OutputPath}/{job}/tensorboard-output/ when the job ends."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
from moto import mock_aws

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker import TensorBoardOutputConfig
from cloudddp.sagemaker.arguments import parse
from cloudddp.sagemaker.local_mode import LocalJob
from cloudddp.sagemaker.tensorboard import tensorboard_request

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def test_the_config_becomes_v2s_request_fields_from_either_class() -> None:
    assert tensorboard_request(None) is None
    assert tensorboard_request(TensorBoardOutputConfig("s3://b/tb")) == {"S3OutputPath": "s3://b/tb"}
    v2_like = SimpleNamespace(s3_output_path="s3://b/tb", container_local_output_path="/opt/ml/output/tb")
    assert tensorboard_request(v2_like) == {"S3OutputPath": "s3://b/tb", "LocalPath": "/opt/ml/output/tb"}


@pytest.mark.parametrize("config", [TensorBoardOutputConfig("/tmp/tb"), "s3://b/tb", SimpleNamespace(
    s3_output_path="s3://b/tb", container_local_output_path=3)])  # fmt: skip
def test_a_config_that_is_not_one_is_refused_naming_the_argument(config: object) -> None:
    with pytest.raises(CloudDDPError, match=r"PyTorch\(tensorboard_output_config=.*must be a TensorBoardOutputConfig"):
        tensorboard_request(config)


def test_the_estimator_takes_it() -> None:
    args, _ = parse({"entry_point": "train.py", "role": ROLE, "framework_version": "2.5", "py_version": "py311",
                     "instance_count": 1, "instance_type": "local",
                     "tensorboard_output_config": TensorBoardOutputConfig("s3://b/tb")})  # fmt: skip
    assert args.tensorboard == {"S3OutputPath": "s3://b/tb"}


def test_local_mode_uploads_each_hosts_tensorboard_folder_where_sagemaker_puts_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for host, name in (("algo-1", "events.out.tfevents.1"), ("algo-2", "events.out.tfevents.2")):
        (run / "nodes" / host / "output" / "tb").mkdir(parents=True)
        (run / "nodes" / host / "output" / "tb" / name).write_bytes(b"event")
    (run / "nodes" / "algo-1" / "model").mkdir()
    said: list[str] = []
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="out")
        job = LocalJob(work=tmp_path / "work", inputs={}, output_path="s3://out/models",
                       tensorboard={"S3OutputPath": "s3://out/tb/", "LocalPath": "/opt/ml/output/tb"})  # fmt: skip
        job.finish(s3, run, "job-1", said.append)
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="out")["Contents"])
    assert [k for k in keys if k.startswith("tb/")] == [
        "tb/job-1/tensorboard-output/events.out.tfevents.1", "tb/job-1/tensorboard-output/events.out.tfevents.2"]  # fmt: skip
    assert (
        "cloudddp: local mode: TensorBoard: 2 files from /opt/ml/output/tb -> s3://out/tb/job-1/tensorboard-output/"
        in said
    )
    job.tensorboard = {"S3OutputPath": "s3://out/tb", "LocalPath": "/opt/ml/../escape"}
    said.clear()
    job.upload_tensorboard(s3, [run / "nodes" / "algo-1"], "job-2", said.append)
    assert said == []  # nothing outside a host's own folder
