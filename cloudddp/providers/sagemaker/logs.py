"""A training job's CloudWatch logs, every host's, as lines prefixed with the host.

SageMaker writes one stream per host to the group `/aws/sagemaker/TrainingJobs`, named
`<job>/algo-1-<epoch seconds>`. Each `poll()` finds new streams (botocore's
`DescribeLogStreams` paginator), reads every stream from where it stopped (paging
`GetLogEvents` with `nextForwardToken` until the token stops changing) and returns the
new events of all hosts merged by timestamp.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from cloudddp.redact import redact_log_line

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
STREAM_HOST = re.compile(r"^[^/]+/(?P<host>.+?)-\d+$")


@dataclass(order=True)
class LogEvent:
    timestamp: int
    host: str
    message: str = field(compare=False)

    def line(self, secrets: Sequence[str] = ()) -> str:
        """The line as cloudddp prints it: host prefix, secrets hidden (`secrets`: the job's own values)."""
        return f"[{self.host}] {redact_log_line(self.message.rstrip(), secrets)}"


def host_of(stream: str) -> str:
    """`job/algo-1-1700000000` -> `algo-1`."""
    match = STREAM_HOST.match(stream)
    return match.group("host") if match else stream.split("/", 1)[-1]


class LogTail:
    """Incremental reader of one job's streams; keeps a forward token per stream."""

    def __init__(self, client: Any, job_name: str, group: str = LOG_GROUP, page_size: int | None = None) -> None:
        self.client, self.job_name, self.group, self.page_size = client, job_name, group, page_size
        self.tokens: dict[str, str | None] = {}

    def discover(self) -> None:
        # botocore's paginator pages DescribeLogStreams (nextToken; `limit` is its page size).
        pages = self.client.get_paginator("describe_log_streams").paginate(
            logGroupName=self.group, logStreamNamePrefix=f"{self.job_name}/",
            PaginationConfig={"PageSize": self.page_size} if self.page_size else {},
        )  # fmt: skip
        try:
            for page in pages:
                for stream in page.get("logStreams", []):
                    self.tokens.setdefault(stream["logStreamName"], None)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            # the group appears with the first instance's first line

    def read_stream(self, stream: str) -> list[LogEvent]:
        host = host_of(stream)
        events: list[LogEvent] = []
        while True:
            kwargs: dict[str, Any] = {"logGroupName": self.group, "logStreamName": stream, "startFromHead": True}
            if self.page_size:
                kwargs["limit"] = self.page_size
            token = self.tokens.get(stream)
            if token:
                kwargs["nextToken"] = token
            page = self.client.get_log_events(**kwargs)
            batch = page.get("events", [])
            events += [LogEvent(e["timestamp"], host, e["message"]) for e in batch]
            following = page.get("nextForwardToken")
            if batch and following:
                self.tokens[stream] = following
            if not batch or not following or following == token:
                return events

    def poll(self) -> list[LogEvent]:
        self.discover()
        events: list[LogEvent] = []
        for stream in sorted(self.tokens):
            events += self.read_stream(stream)
        return sorted(events)
