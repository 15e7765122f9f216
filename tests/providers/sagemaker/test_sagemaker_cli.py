# ruff: noqa: F811  (pytest fixtures imported from sagemaker_fixtures are redefined as arguments)
"""`cloudddp` as a subprocess against a moto server on 127.0.0.1 (AWS_ENDPOINT_URL), as a user runs it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from helpers import run_cli
from helpers.endpoints import refused_endpoint, silent_endpoint
from helpers.sagemaker_fixtures import (  # noqa: F401  (fixtures)
    BUCKET,
    REGION,
    canned_endpoint,
    project,
    register_stop_training_job,
    set_job_status,
)

pytestmark = pytest.mark.slow


def s3(env: dict[str, str]) -> object:
    return boto3.client(
        "s3", region_name=REGION, endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )  # fmt: skip


def test_launch_no_wait_then_status_logs_across_processes(
    moto_server: dict[str, str], project: Path, tmp_path: Path
) -> None:
    env = moto_server
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.csv").write_text("1,2\n")
    result = run_cli("launch", "-p", "sagemaker", "--no-wait", "--instance-type", "ml.g5.12xlarge", "--nodes", "2",
         "--input", f"train={data}", "-H", "epochs=2", "-e", "HF_TOKEN=hf_secret", "--tag", "team=ml",
         str(project / "train.py"), env=env, cwd=tmp_path, inherit_env=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "hf_secret" not in result.stdout + result.stderr
    job = re.search(r"submitted (\S+) \(sagemaker\)", result.stdout).group(1)  # type: ignore[union-attr]
    keys = [o["Key"] for o in s3(env).list_objects_v2(Bucket=BUCKET)["Contents"]]  # type: ignore[attr-defined]
    assert f"cloudddp/{job}/source/sourcedir.tar.gz" in keys
    assert any(k.endswith("/x.csv") for k in keys)
    status = run_cli("status", job, "-p", "sagemaker", env=env, cwd=tmp_path, inherit_env=False)
    assert status.returncode == 0 and "SUCCEEDED" in status.stdout
    assert f"s3://{BUCKET}/cloudddp/{job}/output/model.tar.gz" in status.stdout
    logs = run_cli("logs", job, "-p", "sagemaker", env=env, cwd=tmp_path, inherit_env=False)
    assert logs.returncode == 0, logs.stderr


def test_launch_waits_and_succeeds(moto_server: dict[str, str], project: Path, tmp_path: Path) -> None:
    result = run_cli(
        *["launch", "-p", "sagemaker", str(project / "train.py")], env=moto_server, cwd=tmp_path, inherit_env=False
    )
    assert result.returncode == 0, result.stderr
    assert "cloudddp: job SUCCEEDED" in result.stdout and "model.tar.gz" in result.stdout


def test_dry_run_prints_yaml_and_touches_nothing(moto_server: dict[str, str], project: Path, tmp_path: Path) -> None:
    result = run_cli("launch", "-p", "sagemaker", "--dry-run", "-e", "DB_PASSWORD=pw1", str(project / "train.py"), env=moto_server, cwd=tmp_path, inherit_env=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "TrainingJobName:" in result.stdout and "pw1" not in result.stdout
    assert s3(moto_server).list_buckets()["Buckets"] == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--role", "not-an-arn"], "not an IAM role ARN"),
        (["--nodes", "0"], "nodes"),
        (["--spot"], "--max-wait"),
        (["--input", "train=./missing"], "does not exist"),
        (["--region", "mars-1"], "unknown AWS region"),
        (["--name", "bad_name"], "name"),
    ],
)
def test_bad_input_exits_2_with_one_paragraph_and_uploads_nothing(
    moto_server: dict[str, str], project: Path, tmp_path: Path, args: list[str], fragment: str
) -> None:
    result = run_cli(
        *["launch", "-p", "sagemaker", *args, str(project / "train.py")],
        env=moto_server,
        cwd=tmp_path,
        inherit_env=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("error:")
    assert fragment in result.stderr
    assert s3(moto_server).list_buckets()["Buckets"] == []  # type: ignore[attr-defined]


def test_no_role_and_no_credentials_exit_2(moto_server: dict[str, str], project: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in moto_server.items() if k != "CLOUDDDP_SAGEMAKER_ROLE"}
    result = run_cli(
        *["launch", "-p", "sagemaker", str(project / "train.py")], env=env, cwd=tmp_path, inherit_env=False
    )
    assert result.returncode == 2 and "CLOUDDDP_SAGEMAKER_ROLE" in result.stderr
    env = {k: v for k, v in moto_server.items() if not k.startswith("AWS_ACCESS") and not k.startswith("AWS_SECRET")}
    result = run_cli(
        *["launch", "-p", "sagemaker", str(project / "train.py")], env=env, cwd=tmp_path, inherit_env=False
    )
    assert result.returncode == 2 and "aws configure" in result.stderr and "Traceback" not in result.stderr
    assert s3(moto_server).list_buckets()["Buckets"] == []  # type: ignore[attr-defined]


def test_status_of_unknown_job_exits_2(moto_server: dict[str, str], tmp_path: Path) -> None:
    result = run_cli("status", "no-such-job", "-p", "sagemaker", env=moto_server, cwd=tmp_path, inherit_env=False)
    assert result.returncode == 2 and "no SageMaker training job named 'no-such-job'" in result.stderr


def launched_job(env: dict[str, str], project: Path, tmp_path: Path) -> str:
    result = run_cli(
        *["launch", "-p", "sagemaker", "--no-wait", str(project / "train.py")], env=env, cwd=tmp_path, inherit_env=False
    )
    assert result.returncode == 0, result.stderr
    return re.search(r"submitted (\S+) \(sagemaker\)", result.stdout).group(1)  # type: ignore[union-attr]


# -- issue 9 point 5: cancel against the moto server -------------------------------------------


def test_cancel_stops_a_running_job_end_to_end(
    moto_server: dict[str, str], project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped = register_stop_training_job(monkeypatch)
    job = launched_job(moto_server, project, tmp_path)
    set_job_status(job, "InProgress", "Training")
    assert (
        "RUNNING" in run_cli("status", job, "-p", "sagemaker", env=moto_server, cwd=tmp_path, inherit_env=False).stdout
    )
    result = run_cli("cancel", job, "-p", "sagemaker", env=moto_server, cwd=tmp_path, inherit_env=False)
    assert result.returncode == 0, result.stderr
    assert stopped == [job]
    status = run_cli("status", job, "-p", "sagemaker", env=moto_server, cwd=tmp_path, inherit_env=False)
    assert status.returncode == 0 and "STOPPING" in status.stdout, status.stdout


def test_cancel_of_an_unknown_or_finished_job_exits_2(
    moto_server: dict[str, str], project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped = register_stop_training_job(monkeypatch)
    unknown = run_cli("cancel", "no-such-job", "-p", "sagemaker", env=moto_server, cwd=tmp_path, inherit_env=False)
    assert unknown.returncode == 2 and "no SageMaker training job named 'no-such-job'" in unknown.stderr
    job = launched_job(moto_server, project, tmp_path)  # moto completes it at once
    finished = run_cli("cancel", job, "-p", "sagemaker", env=moto_server, cwd=tmp_path, inherit_env=False)
    assert finished.returncode == 2 and "cannot be stopped" in finished.stderr, finished.stderr
    assert "Traceback" not in unknown.stderr + finished.stderr and stopped == []


# -- issue 9 point 4: credentials, profile and endpoint problems ---------------------------------
COMMANDS = {
    "launch --dry-run": ["launch", "-p", "sagemaker", "--dry-run", "{script}"],
    "launch": ["launch", "-p", "sagemaker", "--no-wait", "{script}"],
    "status": ["status", "some-job", "-p", "sagemaker"],
    "logs": ["logs", "some-job", "-p", "sagemaker"],
    "cancel": ["cancel", "some-job", "-p", "sagemaker"],
}
# Bounded: 1 s to connect, 1 s to answer, 2 attempts.
FAST = {"CLOUDDDP_AWS_CONNECT_TIMEOUT": "1", "CLOUDDDP_AWS_READ_TIMEOUT": "1", "CLOUDDDP_AWS_MAX_ATTEMPTS": "2"}


def run_each(commands: list[str], env: dict[str, str], project: Path, tmp_path: Path) -> dict[str, Any]:
    results = {}
    for name in commands:
        args = [a.replace("{script}", str(project / "train.py")) for a in COMMANDS[name]]
        result = run_cli(*args, env=env, cwd=tmp_path, inherit_env=False, timeout=60)
        assert result.returncode == 2, (name, result.stdout, result.stderr)
        assert result.stderr.startswith("error:") and "Traceback" not in result.stderr, (name, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, (name, result.stderr)  # one paragraph
        results[name] = result
    return results


def test_a_misspelt_aws_profile_is_one_paragraph_for_every_command(
    moto_server: dict[str, str], project: Path, tmp_path: Path
) -> None:
    env = {**moto_server, "AWS_PROFILE": "prodd"}
    for name, result in run_each(list(COMMANDS), env, project, tmp_path).items():
        assert "AWS profile 'prodd'" in result.stderr and "AWS_PROFILE" in result.stderr, (name, result.stderr)
    assert s3(moto_server).list_buckets()["Buckets"] == []  # type: ignore[attr-defined]


def test_an_endpoint_url_without_a_scheme_names_the_variable(
    moto_server: dict[str, str], project: Path, tmp_path: Path
) -> None:
    env = {**moto_server, "AWS_ENDPOINT_URL": "localhost:4566"}
    for name, result in run_each(list(COMMANDS), env, project, tmp_path).items():
        assert "AWS_ENDPOINT_URL='localhost:4566'" in result.stderr and "scheme" in result.stderr, (name, result)


def test_an_endpoint_that_never_answers_fails_within_the_configured_time(
    moto_server: dict[str, str], project: Path, tmp_path: Path
) -> None:
    with silent_endpoint() as url:
        env = {**moto_server, **FAST, "AWS_ENDPOINT_URL": url}
        for name, result in run_each(["launch", "status", "logs", "cancel"], env, project, tmp_path).items():
            assert f"{url}/ did not answer in time" in result.stderr, (name, result.stderr)
            assert "CLOUDDDP_AWS_READ_TIMEOUT" in result.stderr
            # 2 attempts x 1 s, a backoff and the interpreter's start (slow on a loaded machine): far below the
            # unbounded case (botocore's defaults: 60 s read timeout, retried).
            assert result.elapsed < 50, (name, result.elapsed)  # type: ignore[attr-defined]


def test_an_unreachable_endpoint_is_one_paragraph(moto_server: dict[str, str], project: Path, tmp_path: Path) -> None:
    with refused_endpoint() as url:
        env = {**moto_server, **FAST, "AWS_ENDPOINT_URL": url}
        for name, result in run_each(["launch", "status"], env, project, tmp_path).items():
            assert "could not be reached" in result.stderr and url in result.stderr, (name, result.stderr)


def test_expired_credentials_say_how_to_renew_them(moto_server: dict[str, str], project: Path, tmp_path: Path) -> None:
    with canned_endpoint("expired") as url:
        env = {**moto_server, **FAST, "AWS_ENDPOINT_URL": url, "AWS_SESSION_TOKEN": "old"}
        for name, result in run_each(["launch", "status", "logs", "cancel"], env, project, tmp_path).items():
            assert "AWS rejected your credentials (ExpiredToken" in result.stderr, (name, result.stderr)
            assert "aws sso login" in result.stderr and "old" not in result.stderr


def test_an_html_error_page_is_summarised_not_printed(
    moto_server: dict[str, str], project: Path, tmp_path: Path
) -> None:
    with canned_endpoint("html") as url:
        env = {**moto_server, **FAST, "AWS_ENDPOINT_URL": url}
        for name, result in run_each(["status", "logs", "cancel"], env, project, tmp_path).items():
            assert "an HTML page (404 Not Found)" in result.stderr, (name, result.stderr)
            assert "<" not in result.stderr and "Apache" not in result.stderr
