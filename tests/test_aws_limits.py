"""The one bound on AWS calls (cloudddp/aws_limits.py), shared by the client side and the job side's S3 pull."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import cli

from cloudddp import aws_limits
from cloudddp.errors import CloudDDPError


def test_defaults_and_a_users_value(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in aws_limits.DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    assert aws_limits.botocore_config_arguments() == {
        "connect_timeout": 10.0, "read_timeout": 60.0, "retries": {"max_attempts": 3, "mode": "standard"}}  # fmt: skip
    monkeypatch.setenv(aws_limits.READ_TIMEOUT, "2.5")
    assert aws_limits.limit(aws_limits.READ_TIMEOUT) == 2.5
    assert "3 attempts, 10 s to connect and 2.5 s to answer" in aws_limits.time_bound()


@pytest.mark.parametrize("raw", ["0", "-1", "ten", "", "inf", "-inf", "nan", "0.5", "2.5", "1e400"])
def test_attempts_must_be_a_whole_number_of_at_least_one(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    # inf crashed in int() (OverflowError, a traceback); nan was blamed on AWS_ENDPOINT_URL; 0.5 became 0 attempts.
    monkeypatch.setenv(aws_limits.MAX_ATTEMPTS, raw)
    message = f"CLOUDDDP_AWS_MAX_ATTEMPTS={raw!r} must be a whole number of attempts, at least 1 (default 3)."
    with pytest.raises(CloudDDPError) as info:
        aws_limits.attempts()
    assert str(info.value) == message
    with pytest.raises(CloudDDPError, match="CLOUDDDP_AWS_MAX_ATTEMPTS"):
        aws_limits.botocore_config_arguments()


@pytest.mark.parametrize("raw", ["1", "3.0", "1e1"])
def test_attempts_written_as_whole_numbers_are_taken(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(aws_limits.MAX_ATTEMPTS, raw)
    assert aws_limits.attempts() == int(float(raw))


@pytest.mark.parametrize("name", [aws_limits.CONNECT_TIMEOUT, aws_limits.READ_TIMEOUT])
@pytest.mark.parametrize("raw", ["0", "-1", "ten", "", "nan", "inf", "1e10"])
def test_timeouts_must_be_finite_positive_seconds(monkeypatch: pytest.MonkeyPatch, name: str, raw: str) -> None:
    # nan reached botocore ("Invalid value NaN"), 1e10 overflows a socket timeout.
    monkeypatch.setenv(name, raw)
    with pytest.raises(CloudDDPError) as info:
        aws_limits.botocore_config_arguments()
    assert str(info.value).startswith(f"{name}={raw!r} must be a positive number of seconds, at most 86400 ")


@pytest.mark.parametrize(
    ("name", "raw"),
    [(aws_limits.MAX_ATTEMPTS, "inf"), (aws_limits.MAX_ATTEMPTS, "nan"), (aws_limits.READ_TIMEOUT, "nan")],
)
def test_the_cli_names_the_variable_in_one_paragraph_with_exit_2(tmp_path: Path, name: str, raw: str) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "http://127.0.0.1:9", name: raw}  # fmt: skip
    result = cli("status", "-p", "sagemaker", "nosuchjob", env=env, cwd=tmp_path, inherit_env=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "AWS_ENDPOINT_URL" not in result.stderr, result.stderr
    assert f"{name}={raw!r} must be" in " ".join(result.stderr.split()), result.stderr
