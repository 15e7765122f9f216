"""The drop-in's `estimator.training_job_analytics` (cloudddp/sagemaker/analytics.py): a SageMaker job's metric values
read back from CloudWatch Metrics as the SDK v2's TrainingJobAnalytics reads them (namespace /aws/sagemaker/TrainingJobs,
dimension TrainingJobName, GetMetricStatistics' Average per 60 s). moto does not turn logs into metrics: each test
puts the data points itself, in moto's CloudWatch, in process."""

from __future__ import annotations

import datetime
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cloudddp.errors import CloudDDPError
from cloudddp.providers import JobHandle
from cloudddp.sagemaker import PyTorch, Session
from cloudddp.sagemaker.analytics import TrainingJobAnalytics
from cloudddp.sagemaker.estimator import TrainingJob

pandas = pytest.importorskip("pandas")
REGION, NAME = "us-east-1", "train-2026-11-29"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
NAMESPACE = "/aws/sagemaker/TrainingJobs"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": REGION,
                        "AWS_DEFAULT_REGION": REGION, "AWS_CONFIG_FILE": str(tmp_path / "none"),
                        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        session.client("sagemaker").create_training_job(
            TrainingJobName=NAME, RoleArn=ROLE,
            AlgorithmSpecification={"TrainingImage": "image:1", "TrainingInputMode": "File",
                                    "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]},
            OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
            ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
            StoppingCondition={"MaxRuntimeInSeconds": 3600},
        )  # fmt: skip
        yield session


def started(session: Any) -> datetime.datetime:
    return session.client("sagemaker").describe_training_job(TrainingJobName=NAME)["TrainingStartTime"]


def put(session: Any, metric: str, points: list[tuple[float, float]], at: datetime.datetime) -> None:
    """(seconds after `at`, value) data points of `metric` for the job, as SageMaker publishes them."""
    session.client("cloudwatch").put_metric_data(Namespace=NAMESPACE, MetricData=[
        {"MetricName": metric, "Dimensions": [{"Name": "TrainingJobName", "Value": NAME}],
         "Timestamp": at + datetime.timedelta(seconds=seconds), "Value": value} for seconds, value in points])  # fmt: skip


def test_each_metric_is_averaged_per_minute_and_timed_from_its_first_point(aws: Any) -> None:
    start = started(aws).replace(microsecond=0)
    put(aws, "loss", [(0, 0.9), (30, 0.7), (65, 0.5), (130, 0.25)], start)
    put(aws, "acc", [(10, 0.5), (70, 0.75)], start)
    asked: list[dict[str, Any]] = []
    aws.events.register(
        "provide-client-params.cloudwatch.GetMetricStatistics", lambda params, **_: asked.append(dict(params))
    )
    end = start + datetime.timedelta(minutes=5)
    analytics = TrainingJobAnalytics(NAME, metric_names=["loss", "acc"], sagemaker_session=Session(boto_session=aws),
                                     start_time=start, end_time=end)  # fmt: skip
    frame = analytics.dataframe()
    assert list(frame.columns) == ["timestamp", "metric_name", "value"]
    assert frame.to_dict("list") == {
        "timestamp": [0.0, 60.0, 120.0, 0.0, 60.0], "metric_name": ["loss"] * 3 + ["acc"] * 2,
        "value": [0.8, 0.5, 0.25, 0.5, 0.75]}  # fmt: skip
    assert asked[0] == {"Namespace": NAMESPACE, "MetricName": "loss", "Dimensions": [{"Name": "TrainingJobName", "Value": NAME}],
                        "StartTime": start, "EndTime": end, "Period": 60, "Statistics": ["Average"]}  # fmt: skip
    assert analytics.dataframe() is frame and len(asked) == 2  # cached, as v2
    assert analytics.dataframe(force_refresh=True).equals(frame) and len(asked) == 4
    assert analytics.name == NAME and repr(analytics) == f"<sagemaker.TrainingJobAnalytics for {NAME}>"


def test_the_estimators_property_reads_the_jobs_own_definitions_over_its_run(
    aws: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "train.py").write_text("")
    estimator = PyTorch(entry_point="train.py", source_dir=str(tmp_path), role=ROLE, framework_version="2.5",
                        py_version="py311", instance_count=1, instance_type="ml.g5.xlarge",
                        sagemaker_session=Session(boto_session=aws))  # fmt: skip
    with pytest.raises(ValueError, match="Estimator is not associated with a TrainingJob"):
        estimator.training_job_analytics  # noqa: B018 - v2 raises on reading it
    sagemaker: Any = SimpleNamespace(name="sagemaker")
    estimator.latest_training_job = TrainingJob(estimator, sagemaker, JobHandle("sagemaker", NAME), NAME)
    # moto describes every job with MetricDefinitions of its own (test:dcg) and its start and end times as its
    # creation: the interval is [start, start + 1 min), as v2 widens it.
    start = started(aws)
    put(aws, "test:dcg", [(5, 1.0), (15, 3.0)], start)
    frame = estimator.training_job_analytics.dataframe()
    assert frame.to_dict("records") == [{"timestamp": 0.0, "metric_name": "test:dcg", "value": 2.0}]
    with caplog.at_level(logging.WARNING):
        empty = TrainingJobAnalytics(NAME, metric_names=["nothing"], sagemaker_session=Session(boto_session=aws))
        assert empty.dataframe().empty
    assert "No metrics called nothing found" in caplog.text
    local: Any = SimpleNamespace(name="local")
    estimator.latest_training_job = TrainingJob(estimator, local, JobHandle("local", "/r/j"), "j")
    with pytest.raises(CloudDDPError, match=r"only SageMaker publishes a job's metrics.*cloudddp metrics /r/j"):
        estimator.training_job_analytics  # noqa: B018
