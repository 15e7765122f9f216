"""Finding a training job's CloudWatch log streams pages DescribeLogStreams (botocore's paginator), against moto."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cloudddp.providers.sagemaker.logs import LOG_GROUP, LogTail


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        yield boto3.client("logs", region_name="us-east-1")


def test_every_hosts_stream_is_found_across_pages(logs: Any) -> None:
    logs.create_log_group(logGroupName=LOG_GROUP)
    for host in range(1, 6):
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=f"job-a/algo-{host}-1700000000")
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName="job-b/algo-1-1700000000")
    calls: list[dict[str, Any]] = []
    logs.meta.events.register("provide-client-params.logs.DescribeLogStreams", lambda params, **_: calls.append(params))
    tail = LogTail(logs, "job-a", page_size=2)
    tail.discover()
    assert sorted(tail.tokens) == [f"job-a/algo-{host}-1700000000" for host in range(1, 6)]
    assert len(calls) == 3 and all(c["limit"] == 2 for c in calls), "5 streams in pages of 2"


def test_no_log_group_yet_means_no_streams(logs: Any) -> None:
    tail = LogTail(logs, "job-a")
    tail.discover()
    assert tail.tokens == {}
