"""The one bound on AWS calls (cloudddp/aws_limits.py), shared by the client side and the job side's S3 pull."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("raw", ["0", "-1", "ten", ""])
def test_anything_but_a_positive_number_is_named(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(aws_limits.MAX_ATTEMPTS, raw)
    with pytest.raises(CloudDDPError, match=f"CLOUDDDP_AWS_MAX_ATTEMPTS={raw!r} must be a positive number"):
        aws_limits.attempts()
