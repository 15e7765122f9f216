# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""wait() / fit(wait=True), the pre-2.0 argument names and get_execution_role's partition, against the SDK v2.

Upstream: aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0):
- src/sagemaker/estimator.py `EstimatorBase.fit` -> `_TrainingJob.wait(logs)` -> session.py `logs_for_job(wait=True)`
  or `wait_for_job`, both ending in `_check_job_status(job, desc, "TrainingJobStatus")`: Completed passes, Stopped
  is a warning, anything else raises exceptions.py `UnexpectedStatusException(message=..., allowed_statuses=
  ["Completed", "Stopped"], actual_status=status)` (`CapacityError` when the reason says CapacityError).
- src/sagemaker/estimator.py `EstimatorBase.__init__`: `volume_kms_key = renamed_kwargs("train_volume_kms_key",
  "volume_kms_key", volume_kms_key, kwargs)` (deprecations.py: the old name's value wins), then
  `self.volume_kms_key = ...volume_kms_key...`; likewise train_instance_count, train_instance_type, ...
- src/sagemaker/session.py `Session.get_caller_identity_arn`: `re.sub(r"^(.+)sts::(\\d+):assumed-role/(.+?)/.*$",
  r"\\1iam::\\2:role/\\3", assumed_role)` (and `role/service-role/` for a console role IAM cannot describe): the
  caller's `arn:<partition>:` prefix is kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from sdk2_moto import REGION, MotoServer, moto, source  # noqa: F401  (moto and source are fixtures)

from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker.provider import SageMakerProvider
from cloudddp.sagemaker import PyTorch, Session, get_execution_role
from cloudddp.sagemaker.estimator import CapacityError, UnexpectedStatusException
from cloudddp.sagemaker.session import role_from_identity

ACCOUNT = "123456789012"  # moto's account
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole"
CLOUD: dict[str, Any] = {"entry_point": "train.py", "role": ROLE, "framework_version": "2.5", "py_version": "py311",
                         "instance_count": 1, "instance_type": "ml.g5.xlarge"}  # fmt: skip
SECRET = "sk-live-1234567890"
TROUBLESHOOTING = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-python-sdk-troubleshooting.html"
FAILURES = [(f"AlgorithmError: ExitCode 1, token {SECRET}", UnexpectedStatusException),
            ("CapacityError: Unable to provision requested ML compute capacity.", CapacityError)]  # fmt: skip
STOPPED_WARNING = "Job ended with status 'Stopped' rather than 'Completed'"


def set_final_status(job: Any, status: str, reason: str | None) -> None:
    """moto's FakeTrainingJob `job` ends `status` with `reason` (moto answers with the attributes it holds)."""
    job.training_job_status, job.secondary_status = status, status
    if reason is not None:
        job.failure_reason = reason


def backend_job(name: str) -> Any:
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[ACCOUNT][REGION].training_jobs[name]


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SageMakerProvider, "final_grace", 0.0)


def estimator(source: Path) -> PyTorch:
    return PyTorch(source_dir=str(source), environment={"MY_API_KEY": SECRET}, sagemaker_session=Session(), **CLOUD)


def ending(monkeypatch: pytest.MonkeyPatch, status: str, reason: str | None) -> None:
    """Every training job moto creates from now on has already ended `status` (so fit(wait=True) sees it)."""
    from moto.sagemaker.models import SageMakerModelBackend

    create = SageMakerModelBackend.create_training_job

    def create_ended(self: Any, *args: Any, **kwargs: Any) -> Any:
        job = create(self, *args, **kwargs)
        set_final_status(job, status, reason)
        return job

    monkeypatch.setattr(SageMakerModelBackend, "create_training_job", create_ended)


def assert_v2s_exception(error: UnexpectedStatusException, name: str, reason: str) -> None:
    assert str(error) == (
        f"Error for Training job {name}: Failed. Reason: {reason.replace(SECRET, '***')}. "
        f"Check troubleshooting guide for common errors: {TROUBLESHOOTING}"
    )
    assert isinstance(error, ValueError) and isinstance(error, CloudDDPError)  # v2's type, and still cloudddp's
    assert (error.actual_status, error.allowed_statuses) == ("Failed", ["Completed", "Stopped"])


# -- 1: wait() and fit(wait=True) raise v2's UnexpectedStatusException / CapacityError -----------------------------


@pytest.mark.parametrize("logs", [False, "All"])
@pytest.mark.parametrize(("reason", "kind"), FAILURES)
def test_wait_on_a_failed_cloud_job_raises_v2s_unexpected_status_exception(
    reason: str, kind: type[UnexpectedStatusException], logs: bool | str, source: Path, moto: MotoServer, quick: None
) -> None:
    est = estimator(source)
    est.fit("s3://data/all", wait=False)
    job = est.latest_training_job
    assert job is not None
    set_final_status(backend_job(job.name), "Failed", reason)
    with pytest.raises(kind) as error:
        job.wait(logs=logs)
    assert_v2s_exception(error.value, job.name, reason)


@pytest.mark.parametrize("logs", [False, "All"])
@pytest.mark.parametrize(("reason", "kind"), FAILURES)
def test_fit_with_wait_on_a_failed_cloud_job_raises_v2s_unexpected_status_exception(
    reason: str,
    kind: type[UnexpectedStatusException],
    logs: bool | str,
    source: Path,
    moto: MotoServer,
    quick: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ending(monkeypatch, "Failed", reason)
    est = estimator(source)
    with pytest.raises(kind) as error:
        est.fit("s3://data/all", wait=True, logs=logs)
    job = est.latest_training_job
    assert job is not None and [r["TrainingJobName"] for r in moto.created()] == [job.name]
    assert_v2s_exception(error.value, job.name, reason)


def test_wait_and_fit_on_a_stopped_cloud_job_only_warn_as_v2_does(
    source: Path, moto: MotoServer, quick: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    est = estimator(source)
    est.fit("s3://data/all", wait=False)
    job = est.latest_training_job
    assert job is not None
    set_final_status(backend_job(job.name), "Stopped", None)
    job.wait(logs=False)  # v2: "Stopped" is an allowed status, only warned about
    assert STOPPED_WARNING in capsys.readouterr().out
    ending(monkeypatch, "Stopped", None)
    est.fit("s3://data/all", wait=True, logs=False)
    assert STOPPED_WARNING in capsys.readouterr().out
    assert est.latest_training_job is not None and est.latest_training_job.name != job.name


# -- 2: the pre-2.0 names set the attributes under the new names ---------------------------------------------------

KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
RENAMED_VALUES: dict[str, Any] = {
    "train_volume_kms_key": KEY, "train_instance_count": 2, "train_instance_type": "ml.g5.2xlarge",
    "train_volume_size": 50, "train_max_run": 7200, "train_use_spot_instances": True, "train_max_wait": 9000,
}  # fmt: skip


@pytest.mark.filterwarnings("ignore:train_:DeprecationWarning")
@pytest.mark.parametrize(("old", "value"), list(RENAMED_VALUES.items()))
def test_a_pre_2_0_argument_name_sets_the_new_attribute_as_v2_does(
    old: str, value: Any, source: Path, moto: MotoServer
) -> None:
    new = old.removeprefix("train_")
    spot = {
        "train_max_wait": {"use_spot_instances": True, "max_run": 3600},
        "train_use_spot_instances": {"max_wait": 90000},
    }
    spot = spot.get(old, {})
    with pytest.warns(DeprecationWarning, match=f"{old} has been renamed in sagemaker>=2"):
        est = PyTorch(**{**CLOUD, "source_dir": str(source), "sagemaker_session": Session(), **spot, old: value})
    assert getattr(est, new) == value


@pytest.mark.filterwarnings("ignore:train_:DeprecationWarning")
def test_train_volume_kms_key_reaches_the_attribute_and_the_job(source: Path, moto: MotoServer) -> None:
    ebs = {"instance_type": "ml.m5.xlarge"}  # an EBS volume: g5's own storage takes no VolumeKmsKeyId
    est = PyTorch(
        **{**CLOUD, **ebs, "source_dir": str(source), "sagemaker_session": Session(), "train_volume_kms_key": KEY}
    )
    assert est.volume_kms_key == KEY
    est.fit("s3://data/all", wait=False)
    assert moto.created()[0]["ResourceConfig"]["VolumeKmsKeyId"] == KEY


# -- 3: get_execution_role keeps the caller's partition ------------------------------------------------------------

PARTITIONS = [("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov"), (REGION, "aws")]


@pytest.mark.parametrize(("region", "partition"), PARTITIONS)
def test_role_from_identity_keeps_the_callers_partition(region: str, partition: str) -> None:
    caller = f"arn:{partition}:sts::{ACCOUNT}:assumed-role/Ops/session-1"
    assert role_from_identity(caller) == f"arn:{partition}:iam::{ACCOUNT}:role/Ops"
    role = f"arn:{partition}:iam::{ACCOUNT}:role/teams/Ops"
    assert role_from_identity(role) == role


@pytest.mark.parametrize(("region", "partition"), PARTITIONS)
def test_the_service_role_fallback_keeps_the_callers_partition(region: str, partition: str, moto: MotoServer) -> None:
    """An assumed console role in another partition, which IAM cannot describe: v2 puts it under service-role/."""
    name = "AmazonSageMaker-ExecutionRole-20240101T000000"
    iam = boto3.Session(region_name=region).client("iam")
    trust = json.dumps({"Version": "2012-10-17", "Statement": []})
    arn = iam.create_role(RoleName=name, Path="/service-role/", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    sts = boto3.Session(region_name=region).client("sts", region_name=region)
    credentials = sts.assume_role(RoleArn=arn, RoleSessionName="SageMaker")["Credentials"]
    boto_session = boto3.Session(
        aws_access_key_id=credentials["AccessKeyId"], aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"], region_name=region,
    )  # fmt: skip
    caller = boto_session.client("sts").get_caller_identity()["Arn"]
    assert caller == f"arn:{partition}:sts::{ACCOUNT}:assumed-role/{name}/SageMaker"
    iam.delete_role(RoleName=name)  # GetRole now fails (NoSuchEntity), as if refused
    expected = f"arn:{partition}:iam::{ACCOUNT}:role/service-role/{name}"
    assert get_execution_role(Session(boto_session=boto_session)) == expected
