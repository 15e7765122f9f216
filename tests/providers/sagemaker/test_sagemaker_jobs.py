# ruff: noqa: F811  (pytest fixtures imported from sagemaker_fixtures are redefined as arguments)
"""Following SageMaker jobs against moto: states, failure reasons, logs of every host, stop, Ctrl-C, Estimator."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers.sagemaker_fixtures import (  # noqa: F401  (fixtures)
    BUCKET,
    REGION,
    ROLE,
    FakeAWS,
    aws,
    aws_env,
    data_dir,
    project,
    spec_for,
)

from cloudddp import Estimator
from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker.logs import LOG_GROUP, host_of
from cloudddp.session import run_job


def submit(fake: FakeAWS, project: Path, **overrides: Any) -> str:
    return fake.provider.submit(fake.provider.render(spec_for(project, **overrides))).job_id


def seed_logs(fake: FakeAWS, lines: dict[str, list[str]]) -> None:
    """On CreateTrainingJob, write these lines to the job's per-host streams, as SageMaker would."""

    def write(params: dict[str, Any]) -> None:
        logs = fake.client("logs")
        with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
            logs.create_log_group(logGroupName=LOG_GROUP)
        now = int(time.time() * 1000)
        for offset, (host, messages) in enumerate(sorted(lines.items())):
            stream = f"{params['TrainingJobName']}/{host}-1700000000"
            logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
            events = [{"timestamp": now + 10 * i + offset, "message": m} for i, m in enumerate(messages)]
            logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)

    fake.on_create.append(write)


# -- states -----------------------------------------------------------------------------


def test_completed_job_reports_success_and_the_model_uri(aws: FakeAWS, project: Path) -> None:
    job = submit(aws, project)
    status = aws.provider.status(job)
    assert status.state == "SUCCEEDED" and status.done and status.succeeded
    assert status.artifacts == f"s3://{BUCKET}/cloudddp/{job}/output/model.tar.gz"
    assert status.nodes == {"algo-1": "Completed", "algo-2": "Completed"}


@pytest.mark.parametrize(
    ("status", "secondary", "state"),
    [
        ("InProgress", "Starting", "PENDING"),
        ("InProgress", "Downloading", "PENDING"),
        ("InProgress", "Training", "RUNNING"),
        ("InProgress", "Uploading", "RUNNING"),
        ("Stopping", "Stopping", "STOPPING"),
        ("Stopped", "Stopped", "STOPPED"),
        ("Failed", "Failed", "FAILED"),
    ],
)
def test_sagemaker_states_map_to_cloudddp_states(
    aws: FakeAWS, project: Path, status: str, secondary: str, state: str
) -> None:
    job = submit(aws, project)
    backend = aws.training_job(job)
    backend.training_job_status, backend.secondary_status = status, secondary
    current = aws.provider.status(job)
    assert current.state == state
    assert current.done == (state in ("STOPPED", "FAILED"))


def test_failed_job_prints_the_failure_reason_and_exits_non_zero(
    aws: FakeAWS, project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = type(aws.provider).describe

    def failing(self: Any, job_id: str) -> dict[str, Any]:
        backend = aws.training_job(job_id)
        backend.training_job_status, backend.secondary_status = "Failed", "Failed"
        backend.failure_reason = "AlgorithmError: cloudddp: torchrun exited with code 1 on node 1"
        return original(self, job_id)

    monkeypatch.setattr(type(aws.provider), "describe", failing)
    code = run_job("sagemaker", spec_for(project), logs=False)
    out = capsys.readouterr().out
    assert code == 1
    assert "job FAILED: AlgorithmError: cloudddp: torchrun exited with code 1 on node 1" in out
    assert "cloudddp: model:" not in out  # a failed job's output folder holds no finished model


def test_a_succeeded_job_prints_where_its_model_is(
    aws: FakeAWS, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_job("sagemaker", spec_for(project), logs=False) == 0
    out = capsys.readouterr().out
    assert "cloudddp: job SUCCEEDED" in out
    assert f"cloudddp: model: s3://{BUCKET}/cloudddp/" in out and "/output/model.tar.gz" in out


def test_status_of_an_unknown_job_is_a_clear_error(aws: FakeAWS) -> None:
    with pytest.raises(CloudDDPError, match="no SageMaker training job named 'nope' in us-east-1"):
        aws.provider.status("nope")


# -- logs -------------------------------------------------------------------------------


def test_logs_of_every_host_are_prefixed_and_paged(aws: FakeAWS, project: Path) -> None:
    seed_logs(aws, {"algo-1": [f"one {i}" for i in range(7)], "algo-2": [f"two {i}" for i in range(5)]})
    job = submit(aws, project)
    aws.provider.log_page_size = 2  # force several GetLogEvents pages per stream
    lines = list(aws.provider.logs(job))
    assert sorted(lines) == sorted([f"[algo-1] one {i}" for i in range(7)] + [f"[algo-2] two {i}" for i in range(5)])
    assert lines.index("[algo-1] one 0") < lines.index("[algo-2] two 0") < lines.index("[algo-1] one 1")
    assert host_of(f"{job}/algo-12-1700000000") == "algo-12"


def test_log_lines_lose_url_passwords(aws: FakeAWS, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed_logs(aws, {"algo-1": ["connecting to postgres://trainer:s3cr3t@db:5432/runs"]})
    job = submit(aws, project)
    assert list(aws.provider.logs(job)) == ["[algo-1] connecting to postgres://trainer:***@db:5432/runs"]


def test_log_lines_hide_the_jobs_own_secret_values_read_from_its_description(aws: FakeAWS, project: Path) -> None:
    # `cloudddp logs` runs later, in another process: the values come from DescribeTrainingJob's Environment.
    seed_logs(aws, {"algo-1": ["hub login hf_abcdef123456", "lr=0.1"]})
    job = submit(aws, project, environment={"HF_TOKEN": "hf_abcdef123456", "EPOCHS": "2"})
    assert aws.client("sagemaker").describe_training_job(TrainingJobName=job)["Environment"]["HF_TOKEN"]
    assert list(aws.provider.logs(job)) == ["[algo-1] hub login ***", "[algo-1] lr=0.1"]


@pytest.mark.parametrize("image", [None, "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1"])
def test_log_lines_hide_the_jobs_secret_named_hyperparameters_read_from_its_description(
    aws: FakeAWS, project: Path, image: str | None
) -> None:
    # The training toolkit logs every hyperparameter when a job starts ("Training Env" JSON, SM_HPS, the command
    # line); lower-case names and a bare `--api_key VALUE` are not caught by the name patterns. `launch` hid these
    # values (secret_values(environment, hyperparameters)); `cloudddp logs` read only the description's Environment.
    seed_logs(aws, {"algo-1": ["/usr/bin/python3 -m torch.distributed.run train.py --api_key KEYSECRET999 --lr 0.1",
                               '"hyperparameters": {"api_key": "KEYSECRET999", "lr": 0.1}']})  # fmt: skip
    job = submit(aws, project, hyperparameters={"api_key": "KEYSECRET999", "lr": 0.1},
                 sagemaker={"image": image} if image else {})  # fmt: skip
    described = aws.client("sagemaker").describe_training_job(TrainingJobName=job)
    assert described["HyperParameters"]["api_key"] == '"KEYSECRET999"'  # JSON-encoded, as sent
    assert list(aws.provider.logs(job)) == [
        "[algo-1] /usr/bin/python3 -m torch.distributed.run train.py --api_key *** --lr 0.1",
        '[algo-1] "hyperparameters": {"api_key": "***", "lr": 0.1}',
    ]


def test_the_secrets_of_a_description_are_its_decoded_secret_named_values() -> None:
    from cloudddp.providers.sagemaker.provider import described_secrets

    described = {
        "Environment": {"HF_TOKEN": "hf_abc123", "EPOCHS": "2"},
        "HyperParameters": {"api_key": '"k-123456"', "db_password": "not-json", "lr": "0.1", "hf_token": "7"},
    }
    assert sorted(described_secrets(described)) == ["hf_abc123", "k-123456", "not-json"]
    assert described_secrets({}) == []


def test_follow_streams_until_the_end_including_late_lines(aws: FakeAWS, project: Path) -> None:
    seed_logs(aws, {"algo-1": ["epoch=1/2"], "algo-2": ["epoch=1/2"]})
    job = submit(aws, project)
    backend = aws.training_job(job)
    backend.training_job_status, backend.secondary_status = "InProgress", "Training"
    calls = {"n": 0}
    original = type(aws.provider).describe

    def progressing(self: Any, job_id: str) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 2:
            logs = aws.client("logs")
            logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=f"{job}/algo-1-1700000000",
                                logEvents=[{"timestamp": int(time.time() * 1000) + 5000, "message": "saved model.pt"}])  # fmt: skip
            backend.training_job_status, backend.secondary_status = "Completed", "Completed"
        return original(self, job_id)

    aws.provider.describe = progressing.__get__(aws.provider)  # type: ignore[method-assign]
    lines = list(aws.provider.logs(job, follow=True))
    assert lines[0].startswith(f"[sagemaker] {job}: InProgress - Training")
    assert "[algo-1] epoch=1/2" in lines and "[algo-2] epoch=1/2" in lines
    assert any(line.startswith(f"[sagemaker] {job}: Completed") for line in lines)
    assert lines[-1] == "[algo-1] saved model.pt"


def test_logs_before_any_instance_started_are_empty(aws: FakeAWS, project: Path) -> None:
    job = submit(aws, project)
    assert list(aws.provider.logs(job)) == []


def test_launch_with_logs_prints_every_hosts_lines(
    aws: FakeAWS, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_logs(aws, {"algo-1": ["hello from 1"], "algo-2": ["hello from 2"]})
    assert run_job("sagemaker", spec_for(project)) == 0
    out = capsys.readouterr().out
    assert "[algo-1] hello from 1" in out and "[algo-2] hello from 2" in out
    assert "cloudddp: job SUCCEEDED" in out and "model.tar.gz" in out


# -- stopping ---------------------------------------------------------------------------


def stop_hook(fake: FakeAWS, stopped: list[str]) -> None:
    """moto has no StopTrainingJob: answer it here and move the job to Stopped as SageMaker would."""

    def answer(params: dict[str, Any], **_: Any) -> Any:
        name = json.loads(params["body"])["TrainingJobName"]  # the serialized request
        stopped.append(name)
        backend = fake.training_job(name)
        backend.training_job_status, backend.secondary_status = "Stopped", "Stopped"
        return (SimpleNamespace(status_code=200, headers={}, content=b"{}"), {})

    fake.session.events.register("before-call.sagemaker.StopTrainingJob", lambda params, **kw: answer(params))


def test_cancel_calls_stop_training_job(aws: FakeAWS, project: Path) -> None:
    stopped: list[str] = []
    stop_hook(aws, stopped)
    job = submit(aws, project)
    aws.provider.cancel(job)
    assert stopped == [job]
    assert aws.provider.status(job).state == "STOPPED"


def interrupting(monkeypatch: pytest.MonkeyPatch, provider_type: Any) -> None:
    def logs(self: Any, job_id: str, follow: bool = False) -> Any:
        raise KeyboardInterrupt
        yield  # pragma: no cover

    monkeypatch.setattr(provider_type, "logs", logs)


def test_ctrl_c_with_stop_on_interrupt_stops_the_job(
    aws: FakeAWS, project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped: list[str] = []
    stop_hook(aws, stopped)
    interrupting(monkeypatch, type(aws.provider))
    assert run_job("sagemaker", spec_for(project), stop_on_interrupt=True) == 130
    assert len(stopped) == 1
    assert "cloudddp: job STOPPED" in capsys.readouterr().out


def test_ctrl_c_without_a_terminal_leaves_the_job_running(
    aws: FakeAWS, project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped: list[str] = []
    stop_hook(aws, stopped)
    interrupting(monkeypatch, type(aws.provider))
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert run_job("sagemaker", spec_for(project)) == 130
    assert stopped == []
    assert "left t-" in capsys.readouterr().out


def test_ctrl_c_asks_and_stops_on_yes(
    aws: FakeAWS, project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped: list[str] = []
    stop_hook(aws, stopped)
    interrupting(monkeypatch, type(aws.provider))
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    assert run_job("sagemaker", spec_for(project)) == 130
    assert len(stopped) == 1


# -- the notebook door ------------------------------------------------------------------


def test_estimator_fits_on_sagemaker_and_exposes_the_job(
    aws: FakeAWS, project: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_logs(aws, {"algo-1": ["rank 0 says hi"]})
    est = Estimator(provider="sagemaker", entry_point="train.py", source_dir=str(project), instance_type="ml.g5.12xlarge",
                    instance_count=2, role=ROLE, region=REGION, hyperparameters={"epochs": 1})  # fmt: skip
    yaml_text = est.dry_run({"train": str(data_dir)})
    assert "ml.g5.12xlarge" in yaml_text and aws.created == []
    status = est.fit({"train": str(data_dir)}, wait=True, logs=True)
    assert status is not None and status.succeeded
    out = capsys.readouterr().out
    assert "[algo-1] rank 0 says hi" in out and "cloudddp: submitted" in out
    assert est.latest_job is not None and est.latest_job.job_id == aws.created[0]["TrainingJobName"]
    assert est.status().state == "SUCCEEDED"
    assert est.model_data == f"s3://{BUCKET}/cloudddp/{est.latest_job.job_id}/output/model.tar.gz"
    est.logs()
    assert "[algo-1] rank 0 says hi" in capsys.readouterr().out
    stopped: list[str] = []
    stop_hook(aws, stopped)
    est.stop()
    assert stopped == [est.latest_job.job_id]


def test_estimator_fit_raises_a_cloudddp_error_when_the_job_fails(
    aws: FakeAWS, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = type(aws.provider).describe

    def failing(self: Any, job_id: str) -> dict[str, Any]:
        backend = aws.training_job(job_id)
        backend.training_job_status, backend.failure_reason = "Failed", "OutOfMemory"
        return original(self, job_id)

    monkeypatch.setattr(type(aws.provider), "describe", failing)
    est = Estimator(provider="sagemaker", entry_point="train.py", source_dir=str(project), role=ROLE, region=REGION)
    with pytest.raises(CloudDDPError, match="FAILED: OutOfMemory"):
        est.fit(logs=False)


def test_estimator_validation_errors_are_cloudddp_errors(aws: FakeAWS, project: Path) -> None:
    est = Estimator(provider="sagemaker", entry_point="train.py", source_dir=str(project), role=ROLE, region=REGION,
                    spot=True)  # fmt: skip
    with pytest.raises(CloudDDPError, match="--max-wait"):
        est.fit()
    assert aws.buckets() == []
