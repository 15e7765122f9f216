# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""PyTorch(...).fit / logs / local mode against the SDK v2's own behaviour, on a moto server.

Upstream: aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0):
- src/sagemaker/estimator.py `EstimatorBase.logs` -> session.py `logs_for_job(name, wait=True)` -> `_logs_for_job`,
  which ends in `_check_job_status(job, desc, "TrainingJobStatus")`: Completed passes, Stopped is a warning, anything
  else raises exceptions.py `UnexpectedStatusException` (a ValueError; `CapacityError` when the reason says
  CapacityError) with "Error for Training job {name}: {status}. Reason: {reason}. Check troubleshooting guide for
  common errors: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-python-sdk-troubleshooting.html".
- src/sagemaker/estimator.py `EstimatorBase._prepare_for_training`: `self.output_path = s3_path_join("s3://",
  default_bucket(), default_bucket_prefix, with_end_slash=True)` when none was given, and `_get_or_create_name` ->
  `_ensure_base_job_name` (`base_name_from_image(training_image_uri(), default_base_name="estimator")`) when no job
  name is passed. The recorded v2 request sdk2_requests/sagemaker-2.257.7/defaults.json sends that output path
  (`"S3OutputPath": "s3://sagemaker-us-east-1-123456789012/"`).
- src/sagemaker/local/local_session.py `LocalSagemakerClient.create_training_job` -> local/entities.py
  `_LocalTrainingJob.start` -> local/image.py `_SageMakerContainer.train`: local mode trains inside the
  CreateTrainingJob call, so `fit(wait=False)` returns after the job ended, its artifacts retrieved (in a `finally:`).
"""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sdk2_moto import REGION, MotoServer, moto, no_credentials  # noqa: F401  (moto and no_credentials are fixtures)

from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker.provider import SageMakerProvider
from cloudddp.sagemaker import PyTorch, Session
from cloudddp.sagemaker.estimator import CapacityError, UnexpectedStatusException

ACCOUNT = "123456789012"  # moto's account
DEFAULT_BUCKET = f"sagemaker-{REGION}-{ACCOUNT}"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole"
CLOUD: dict[str, Any] = {"entry_point": "train.py", "role": ROLE, "framework_version": "2.5", "py_version": "py311",
                         "instance_count": 1, "instance_type": "ml.g5.xlarge"}  # fmt: skip
SECRET = "sk-live-1234567890"
TROUBLESHOOTING = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-python-sdk-troubleshooting.html"
SCRIPT = """\
import os, pathlib, sys
pathlib.Path(os.environ["SM_MODEL_DIR"], "model.txt").write_text(os.environ["SM_CURRENT_HOST"])
pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"], "out.txt").write_text("out")
print("training done", flush=True)
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
"""
UPLOADS = ("PutObject", "CreateMultipartUpload")


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "train.py").write_text(SCRIPT)
    return folder


def members(blob: bytes) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def uploads(moto: MotoServer) -> int:
    return sum(1 for name, _ in moto.calls if name in UPLOADS)


# -- 1: logs() raises for a job that did not complete, as v2's logs_for_job(wait=True) ---------------------------


def set_final_status(name: str, status: str, reason: str | None) -> None:
    """moto completes every job at once; this one ends `status` with `reason` (moto answers with the attributes
    its FakeTrainingJob holds, so `failure_reason` is sent as FailureReason)."""
    from moto.sagemaker.models import sagemaker_backends

    job = sagemaker_backends[ACCOUNT][REGION].training_jobs[name]
    job.training_job_status, job.secondary_status = status, status
    if reason is not None:  # moto's FakeTrainingJob declares no failure_reason; its describe answer reads it
        setattr(job, "failure_reason", reason)  # noqa: B010


def put_log_line(moto: MotoServer, job: str, line: str) -> None:
    logs = moto.client("logs")
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs")
    stream = f"{job}/algo-1-{int(time.time())}"
    logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
    logs.put_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream,
                        logEvents=[{"timestamp": int(time.time() * 1000), "message": line}])  # fmt: skip


@pytest.fixture
def cloud_job(source: Path, moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> tuple[PyTorch, str]:
    """A cloud job submitted to moto with fit(wait=False), one log line in CloudWatch."""
    monkeypatch.setattr(SageMakerProvider, "final_grace", 0.0)
    est = PyTorch(source_dir=str(source), environment={"MY_API_KEY": SECRET}, sagemaker_session=Session(), **CLOUD)
    est.fit("s3://data/all", wait=False)
    assert est.latest_training_job is not None
    name = est.latest_training_job.name
    put_log_line(moto, name, "epoch 1 loss 0.5")
    return est, name


@pytest.mark.parametrize(
    ("reason", "kind"),
    [(f"AlgorithmError: ExitCode 1, token {SECRET}", UnexpectedStatusException),
     ("CapacityError: Unable to provision requested ML compute capacity.", CapacityError)],
)  # fmt: skip
def test_logs_of_a_failed_cloud_job_prints_them_then_raises_v2s_exception(
    reason: str,
    kind: type[UnexpectedStatusException],
    cloud_job: tuple[PyTorch, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    est, name = cloud_job
    set_final_status(name, "Failed", reason)
    with pytest.raises(kind) as error:
        est.logs()
    shown = reason.replace(SECRET, "***")
    assert str(error.value) == (
        f"Error for Training job {name}: Failed. Reason: {shown}. "
        f"Check troubleshooting guide for common errors: {TROUBLESHOOTING}"
    )
    assert isinstance(error.value, ValueError) and isinstance(error.value, CloudDDPError)  # v2's type, cloudddp's
    assert (error.value.actual_status, error.value.allowed_statuses) == ("Failed", ["Completed", "Stopped"])
    printed = capsys.readouterr().out
    assert "[algo-1] epoch 1 loss 0.5" in printed and SECRET not in printed


def test_logs_of_a_completed_or_stopped_cloud_job_return_and_the_cli_path_never_raises(
    cloud_job: tuple[PyTorch, str], capsys: pytest.CaptureFixture[str]
) -> None:
    est, name = cloud_job
    est.logs()  # moto's job is Completed
    assert "[algo-1] epoch 1 loss 0.5" in capsys.readouterr().out
    set_final_status(name, "Stopped", None)
    est.logs()  # v2 warns for Stopped
    assert "Job ended with status 'Stopped' rather than 'Completed'" in capsys.readouterr().out
    set_final_status(name, "Failed", "AlgorithmError")
    # `cloudddp logs` reads the provider's lines: they end, with no exception, for a failed job too.
    lines = list(SageMakerProvider(region=REGION).logs(name, follow=True))
    assert lines[-1] == "[algo-1] epoch 1 loss 0.5" and "Failed" in lines[0]


# -- 6: fit() stores output_path and base_job_name as v2's _prepare_for_training ---------------------------------


@pytest.mark.parametrize(
    ("session_prefix", "overrides", "output", "base", "code"),
    [
        (None, {}, f"s3://{DEFAULT_BUCKET}/", "pytorch-training", f"s3://{DEFAULT_BUCKET}/"),
        ("team", {}, f"s3://{DEFAULT_BUCKET}/team/", "pytorch-training", f"s3://{DEFAULT_BUCKET}/team/"),
        (None, {"image_uri": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/my-img:latest"}, f"s3://{DEFAULT_BUCKET}/",
         "my-img", f"s3://{DEFAULT_BUCKET}/"),
        (None, {"base_job_name": "mine", "output_path": "s3://out-bucket/models"}, "s3://out-bucket/models", "mine",
         "s3://out-bucket/"),
    ],
)  # fmt: skip
def test_fit_stores_the_output_path_and_base_job_name_v2_computes(
    session_prefix: str | None,
    overrides: dict[str, Any],
    output: str,
    base: str,
    code: str,
    source: Path,
    moto: MotoServer,
) -> None:
    """`code`: where v2 puts sourcedir.tar.gz (estimator.py `_stage_user_code_in_s3`): output_path's bucket, under
    the default prefix only for an output path set from the default bucket and prefix, on every fit."""
    moto.client("s3").create_bucket(Bucket="out-bucket")
    session = Session(default_bucket_prefix=session_prefix)
    est = PyTorch(**{**CLOUD, "source_dir": str(source), "sagemaker_session": session, **overrides})
    assert (est.output_path, est.base_job_name) == (overrides.get("output_path"), overrides.get("base_job_name"))
    est.fit("s3://data/all", wait=False)
    assert (est.output_path, est.base_job_name) == (output, base)
    est.fit("s3://data/all", wait=False)  # a later fit sends the same output path and code location
    names = [request["TrainingJobName"] for request in moto.created()]
    assert [request["OutputDataConfig"]["S3OutputPath"] for request in moto.created()] == [output, output]
    assert len(names) == 2 and all(name.startswith(f"{base}-") for name in names)
    code_bucket, _, code_prefix = code.removeprefix("s3://").partition("/")
    archives = [key for key in moto.keys(code_bucket) if key.endswith("/source/sourcedir.tar.gz")]
    assert archives == [f"{code_prefix}{name}/source/sourcedir.tar.gz" for name in names]


def test_fit_with_a_job_name_leaves_base_job_name_unset_as_v2_does(source: Path, moto: MotoServer) -> None:
    est = PyTorch(source_dir=str(source), sagemaker_session=Session(), **CLOUD)
    est.fit("s3://data/all", wait=False, job_name="my-job")
    assert (est.output_path, est.base_job_name) == (f"s3://{DEFAULT_BUCKET}/", None)
    assert [r["TrainingJobName"] for r in moto.created()] == ["my-job"]


# -- 4: no credentials: one paragraph from every fit path ---------------------------------------------------------


def fit_calls(source: Path) -> dict[str, Callable[[], None]]:
    def fit(fit_inputs: str | None, **overrides: Any) -> Callable[[], None]:
        return lambda: PyTorch(**{**CLOUD, "source_dir": str(source), **overrides}).fit(fit_inputs, wait=False)

    return {
        "cloud, default bucket": fit("s3://data/all"),
        "cloud, output_path": fit("s3://data/all", output_path="s3://out-bucket/models"),
        "local, default bucket": fit(f"file://{source}", instance_type="local"),
        "local, s3 channel": fit("s3://data/all", instance_type="local", output_path=f"file://{source.parent}/out"),
    }


@pytest.mark.parametrize("case", ["cloud, default bucket", "cloud, output_path", "local, default bucket",
                                  "local, s3 channel"])  # fmt: skip
def test_fit_without_credentials_is_one_paragraph_not_a_botocore_traceback(
    case: str, source: Path, no_credentials: MotoServer
) -> None:
    with pytest.raises(CloudDDPError, match=r"^no AWS credentials found while trying to .*aws configure") as error:
        fit_calls(source)[case]()
    assert error.value.__suppress_context__ and error.value.__cause__ is None
    assert not list(Path("cloudddp-runs").glob(".local-mode-*")) and not Path("cloudddp-runs", "jobs").exists()
    assert [name for name, _ in no_credentials.calls if name == "CreateTrainingJob"] == []


# -- 2: local mode trains in fit(), wait=False too, and retrieves every job's artifacts once ----------------------


def local(source: Path, **overrides: Any) -> PyTorch:
    return PyTorch(entry_point="train.py", source_dir=str(source), role=ROLE, instance_count=1, instance_type="local",
                   sagemaker_session=Session(), **overrides)  # fmt: skip


@pytest.mark.slow
def test_local_fit_without_wait_trains_and_uploads_before_returning_and_keeps_each_jobs_artifacts(
    source: Path, moto: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    est = local(source)
    est.fit(f"file://{source}", wait=False, logs=False)
    first = est.latest_training_job
    assert first is not None
    # Before anything else is read: the artifacts are in S3, under the default output path v2 sets (6).
    assert (est.output_path, est.base_job_name) == (f"s3://{DEFAULT_BUCKET}/", "pytorch-training")
    model_one = f"s3://{DEFAULT_BUCKET}/{first.name}/output/model.tar.gz"
    assert moto.keys(DEFAULT_BUCKET) == [f"{first.name}/output/model.tar.gz", f"{first.name}/output/output.tar.gz"]
    assert members(moto.read(model_one)) == {"model.txt": "algo-1"}
    assert first.describe()["ModelArtifacts"] == {"S3ModelArtifacts": model_one}
    assert list(Path("cloudddp-runs").glob(".local-mode-*")) == []  # the downloads are removed
    sent = uploads(moto)
    est.fit(f"file://{source}", wait=False, logs=False)
    second = est.latest_training_job
    assert second is not None and second.name != first.name
    # Observing the jobs uploads nothing more; the first job keeps its own artifacts.
    est.logs()
    second.wait(logs=False)
    assert est.model_data == f"s3://{DEFAULT_BUCKET}/{second.name}/output/model.tar.gz"
    assert first.describe()["ModelArtifacts"] == {"S3ModelArtifacts": model_one}
    assert second.describe()["ModelArtifacts"] == {"S3ModelArtifacts": est.model_data}
    assert uploads(moto) - sent == 2  # the second job's model.tar.gz and output.tar.gz, once
    assert len(moto.keys(DEFAULT_BUCKET)) == 4
    assert "training done" in capsys.readouterr().out  # from est.logs()


@pytest.mark.slow
def test_a_failed_local_job_raises_from_fit_without_wait_and_from_logs(
    source: Path, moto: MotoServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    est = local(source, environment={"EXIT_CODE": "3"}, output_path=f"file://{out}")
    # v2's local mode raises from fit() too, its RuntimeError's words (test_sagemaker_dropin_local_failure_is_runtime_error)
    with pytest.raises(RuntimeError, match=r"^Failed to run: .*\. Process exited with code: 3$"):
        est.fit(f"file://{source}", wait=False, logs=False)
    job = est.latest_training_job
    assert job is not None
    assert members((out / "model.tar.gz").read_bytes()) == {"model.txt": "algo-1"}  # retrieved all the same
    with pytest.raises(UnexpectedStatusException, match=rf"^Error for Training job {job.name}: Failed\. Reason: "):
        est.logs()
