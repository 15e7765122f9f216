"""Differential: the drop-in's TrainingJobAnalytics(...).dataframe() and the real SDK v2's (in .venv-sdk2) over the
same moto CloudWatch data points (put by the test: moto does not turn logs into metrics) return equal frames."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from typing import Any

import pytest
from helpers import REPO, require_environment
from sdk2_moto import MotoServer, moto  # noqa: F401  (moto is a fixture)

from cloudddp.sagemaker import Session
from cloudddp.sagemaker.analytics import TrainingJobAnalytics

pandas = pytest.importorskip("pandas")
SDK2_PYTHON = REPO / ".venv-sdk2" / "bin" / "python"  # `make sdk2-env`: sagemaker>=2.200,<3
NAME, ROLE = "analytics-job", "arn:aws:iam::123456789012:role/SageMakerRole"
NAMESPACE = "/aws/sagemaker/TrainingJobs"
SDK2_FRAMES = """\
import datetime, json, sys
import boto3, sagemaker
from sagemaker.analytics import TrainingJobAnalytics
name, start, end = sys.argv[1], datetime.datetime.fromisoformat(sys.argv[2]), datetime.datetime.fromisoformat(sys.argv[3])
session = sagemaker.Session(boto3.Session(region_name="us-east-1"))
frames = [TrainingJobAnalytics(name, metric_names=["loss", "acc"], sagemaker_session=session, start_time=start,
                               end_time=end).dataframe(),
          TrainingJobAnalytics(name, sagemaker_session=session).dataframe()]
print(json.dumps([frame.to_dict("list") for frame in frames]))
"""


@pytest.mark.slow  # the full tier: make test-all builds .venv-sdk2 first
@pytest.mark.sagemaker_sdk
def test_the_frames_equal_the_real_sdk_v2s_over_the_same_cloudwatch_data(moto: MotoServer) -> None:  # noqa: F811
    require_environment(SDK2_PYTHON, "make sdk2-env")
    moto.client("sagemaker").create_training_job(
        TrainingJobName=NAME, RoleArn=ROLE,
        AlgorithmSpecification={"TrainingImage": "image:1", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
        ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
    )  # fmt: skip
    start = moto.client("sagemaker").describe_training_job(TrainingJobName=NAME)["TrainingStartTime"]
    start = start.replace(microsecond=0)
    points = {"loss": [(0, 0.9), (30, 0.7), (65, 0.5), (130, 0.25)], "acc": [(10, 0.5), (70, 0.75)],
              "test:dcg": [(5, 1.0), (15, 3.0)]}  # moto describes every job with test:dcg as its definition  # fmt: skip
    moto.client("cloudwatch").put_metric_data(Namespace=NAMESPACE, MetricData=[
        {"MetricName": metric, "Dimensions": [{"Name": "TrainingJobName", "Value": NAME}],
         "Timestamp": start + datetime.timedelta(seconds=seconds), "Value": value}
        for metric, values in points.items() for seconds, value in values])  # fmt: skip
    end = start + datetime.timedelta(minutes=5)
    session = Session()
    ours: list[Any] = [
        TrainingJobAnalytics(NAME, metric_names=["loss", "acc"], sagemaker_session=session, start_time=start,
                             end_time=end).dataframe().to_dict("list"),
        TrainingJobAnalytics(NAME, sagemaker_session=session).dataframe().to_dict("list"),
    ]  # fmt: skip
    environment = {**os.environ, "SAGEMAKER_SUPPRESS_V2_WARNING": "1"}
    result = subprocess.run([str(SDK2_PYTHON), "-c", SDK2_FRAMES, NAME, start.isoformat(), end.isoformat()],
                            capture_output=True, text=True, timeout=300, env=environment)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = json.loads(result.stdout.strip().splitlines()[-1])
    assert ours == theirs
    assert ours[0]["value"] == [0.8, 0.5, 0.25, 0.5, 0.75] and ours[1]["metric_name"] == ["test:dcg"]
