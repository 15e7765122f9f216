# ruff: noqa: F811  (pytest fixtures imported from sagemaker_fixtures are redefined as arguments)
"""`cloudddp` as a subprocess against a moto server on 127.0.0.1 (AWS_ENDPOINT_URL), as a user runs it."""

from __future__ import annotations

import re
from pathlib import Path

import boto3
import pytest
from sagemaker_fixtures import BUCKET, REGION, moto_server, project, run_cli  # noqa: F401  (fixtures)

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
    result = run_cli(
        ["launch", "-p", "sagemaker", "--no-wait", "--instance-type", "ml.g5.12xlarge", "--instance-count", "2",
         "--input", f"train={data}", "-H", "epochs=2", "-e", "HF_TOKEN=hf_secret", "--tag", "team=ml",
         str(project / "train.py")],
        env, tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "hf_secret" not in result.stdout + result.stderr
    job = re.search(r"submitted (\S+) \(sagemaker\)", result.stdout).group(1)  # type: ignore[union-attr]
    keys = [o["Key"] for o in s3(env).list_objects_v2(Bucket=BUCKET)["Contents"]]  # type: ignore[attr-defined]
    assert f"cloudddp/{job}/source/sourcedir.tar.gz" in keys
    assert any(k.endswith("/x.csv") for k in keys)
    status = run_cli(["status", job, "-p", "sagemaker"], env, tmp_path)
    assert status.returncode == 0 and "SUCCEEDED" in status.stdout
    assert f"s3://{BUCKET}/cloudddp/{job}/output/model.tar.gz" in status.stdout
    logs = run_cli(["logs", job, "-p", "sagemaker"], env, tmp_path)
    assert logs.returncode == 0, logs.stderr


def test_launch_waits_and_succeeds(moto_server: dict[str, str], project: Path, tmp_path: Path) -> None:
    result = run_cli(["launch", "-p", "sagemaker", str(project / "train.py")], moto_server, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "cloudddp: job SUCCEEDED" in result.stdout and "model.tar.gz" in result.stdout


def test_dry_run_prints_yaml_and_touches_nothing(moto_server: dict[str, str], project: Path, tmp_path: Path) -> None:
    result = run_cli(["launch", "-p", "sagemaker", "--dry-run", "-e", "DB_PASSWORD=pw1", str(project / "train.py")],
                     moto_server, tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "TrainingJobName:" in result.stdout and "pw1" not in result.stdout
    assert s3(moto_server).list_buckets()["Buckets"] == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--role", "not-an-arn"], "not an IAM role ARN"),
        (["--instance-count", "0"], "nodes"),
        (["--spot"], "--max-wait"),
        (["--input", "train=./missing"], "does not exist"),
        (["--region", "mars-1"], "unknown AWS region"),
        (["--name", "bad_name"], "name"),
    ],
)
def test_bad_input_exits_2_with_one_paragraph_and_uploads_nothing(
    moto_server: dict[str, str], project: Path, tmp_path: Path, args: list[str], fragment: str
) -> None:
    result = run_cli(["launch", "-p", "sagemaker", *args, str(project / "train.py")], moto_server, tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("error:")
    assert fragment in result.stderr
    assert s3(moto_server).list_buckets()["Buckets"] == []  # type: ignore[attr-defined]


def test_no_role_and_no_credentials_exit_2(moto_server: dict[str, str], project: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in moto_server.items() if k != "CLOUDDDP_SAGEMAKER_ROLE"}
    result = run_cli(["launch", "-p", "sagemaker", str(project / "train.py")], env, tmp_path)
    assert result.returncode == 2 and "CLOUDDDP_SAGEMAKER_ROLE" in result.stderr
    env = {k: v for k, v in moto_server.items() if not k.startswith("AWS_ACCESS") and not k.startswith("AWS_SECRET")}
    result = run_cli(["launch", "-p", "sagemaker", str(project / "train.py")], env, tmp_path)
    assert result.returncode == 2 and "aws configure" in result.stderr and "Traceback" not in result.stderr
    assert s3(moto_server).list_buckets()["Buckets"] == []  # type: ignore[attr-defined]


def test_status_of_unknown_job_exits_2(moto_server: dict[str, str], tmp_path: Path) -> None:
    result = run_cli(["status", "no-such-job", "-p", "sagemaker"], moto_server, tmp_path)
    assert result.returncode == 2 and "no SageMaker training job named 'no-such-job'" in result.stderr
