"""A job run's log lines from OCI Logging, complete and each printed once.

The Logging Search API (`oci.loggingsearch.LogSearchClient.search_logs`) returns at
most 1000 results per call and refuses windows whose result is "too large", so a window
that comes back full (or refused) is split in half until each half fits (down to the
1 ms resolution of its RFC 3339 times), as Oracle ADS does. Lines reach the index some
seconds after they were written (ingestion delay), so following re-reads an overlap
(`lag`, 180 s like ADS) behind the last poll and drops what it already printed by the
record id. Following ends once every node wrote its exit line (see node.NODE_SCRIPT),
or `grace` seconds after the run finished for runs whose nodes never got that far.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from cloudddp.providers.oci.node import EXIT_MARKER

LIMIT = 1000
RESOLUTION = dt.timedelta(milliseconds=1)
LAG = dt.timedelta(seconds=180)
MAX_WINDOW = dt.timedelta(days=14)  # the API refuses windows that start earlier
NODE_PREFIX = re.compile(r"\[node-(\d+)\] ")
EXIT_LINE = re.compile(EXIT_MARKER)


@dataclass(frozen=True)
class LogRecord:
    time: dt.datetime
    id: str
    message: str

    def line(self) -> str:
        """The message with its node prefix ("[node-0] ..."); service messages get "[oci]"."""
        return self.message if NODE_PREFIX.match(self.message) else f"[oci] {self.message}"


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def search_query(compartment_id: str, log_group_id: str, log_id: str, job_run_id: str) -> str:
    # "source = <OCID>" is refused by the query language; "*<OCID>" matches (ADS does the same).
    return (
        f"search \"{compartment_id}/{log_group_id}/{log_id}\" | where source = '*{job_run_id}' | sort by datetime asc"
    )


def parse_record(data: dict[str, Any]) -> LogRecord | None:
    content = data.get("logContent") or {}
    record_id = content.get("id")
    if not record_id:
        return None
    message = str((content.get("data") or {}).get("message", "")).rstrip("\n")
    if isinstance(data.get("datetime"), (int, float)):
        when = dt.datetime.fromtimestamp(data["datetime"] / 1000, dt.timezone.utc)
    else:
        when = dt.datetime.fromisoformat(str(content.get("time", "1970-01-01T00:00:00+00:00")).replace("Z", "+00:00"))
    return LogRecord(time=when, id=str(record_id), message=message)


class LogSearch:
    """Every record of one query in a time window, however many there are."""

    def __init__(self, client: Any, query: str) -> None:
        self.client, self.query = client, query
        self.calls = 0

    def _search(self, start: dt.datetime, end: dt.datetime) -> tuple[list[LogRecord], bool]:
        import oci

        details = oci.loggingsearch.models.SearchLogsDetails(
            time_start=start, time_end=end, search_query=self.query, is_return_field_info=False
        )
        self.calls += 1
        try:
            response = self.client.search_logs(details, limit=LIMIT)
        except oci.exceptions.ServiceError as exc:
            if exc.status == 400 and "too large" in str(exc.message).lower():
                return [], True
            raise
        records = [parse_record(r.data or {}) for r in (response.data.results or [])]
        found = [r for r in records if r is not None]
        return found, len(response.data.results or []) >= LIMIT

    def window(self, start: dt.datetime, end: dt.datetime) -> list[LogRecord]:
        if end - start > MAX_WINDOW:
            start = end - MAX_WINDOW
        if end - start < RESOLUTION:
            return []
        records, full = self._search(start, end)
        if not full:
            return records
        middle = start + (end - start) / 2
        if middle - start < RESOLUTION:
            return records  # more than `limit` lines in one millisecond: keep what the service gave
        return self.window(start, middle) + self.window(middle, end)


class LogFollower:
    """New records since the last poll, in time order, each once."""

    def __init__(self, search: LogSearch, start: dt.datetime) -> None:
        self.search, self.start = search, start
        self.last_end: dt.datetime | None = None
        self.seen: dict[str, dt.datetime] = {}

    def poll(self) -> list[LogRecord]:
        end = utc_now()
        begin = self.start if self.last_end is None else max(self.start, self.last_end - LAG)
        records = self.search.window(begin, end)
        self.last_end = end
        fresh: list[LogRecord] = []
        for record in sorted(records, key=lambda r: r.time):  # stable: same-ms lines keep the service order
            if record.id not in self.seen:
                self.seen[record.id] = record.time
                fresh.append(record)
        # Ids older than the next window cannot come back: forget them.
        horizon = end - LAG - dt.timedelta(seconds=60)
        self.seen = {k: t for k, t in self.seen.items() if t >= horizon}
        return fresh


def node_exit_in_line(line: str) -> tuple[int, int] | None:
    """(rank, exit code) if `line` is a node's last line."""
    match = EXIT_LINE.search(line)
    return (int(match.group(1)), int(match.group(2))) if match else None
