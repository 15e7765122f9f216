"""`--format json`: what `status`, `list`, `launch --no-wait` and `render`/`--dry-run` print for a program to read.

Each document carries `schema_version` and `kind`; `OUTPUT_SCHEMA` (JSON Schema 2020-12, published on the docs'
CLI reference) describes all four, and the tests validate what the commands print against it. A change that
would break a reader bumps SCHEMA_VERSION. Secrets are masked as in the text output (the one policy: redact).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cloudddp.job_index import Entry
from cloudddp.job_list import duration
from cloudddp.providers.base import JOB_STATES, JobHandle, JobRequest, JobStatus
from cloudddp.redact import redact

SCHEMA_VERSION = 1
STATES = [*JOB_STATES, "INTERRUPTED"]  # INTERRUPTED: the local managed-spot emulation between its rounds


def _document(kind: str, **fields: Any) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, "kind": kind, **fields}, indent=2) + "\n"


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def status_json(provider: str, status: JobStatus) -> str:
    return _document("status", job_id=status.job_id, provider=provider, state=status.state, reason=status.reason,
                     exit_code=status.exit_code, nodes=status.nodes, artifacts=status.artifacts)  # fmt: skip


def list_json(entries: Sequence[Entry], answered: Mapping[Entry, str]) -> str:
    now = time.time()
    jobs = [{"name": entry.name, "provider": entry.provider, "job_id": entry.job_id, "submitted": iso(entry.submitted),
             "state": answered.get(entry) or entry.state or None, "state_is_current": entry in answered,
             "nodes": entry.nodes, "duration_s": rounded(duration(entry, answered, now)),
             "command": entry.command} for entry in entries]  # fmt: skip
    return _document("list", jobs=jobs)


def rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def submitted_json(handle: JobHandle, name: str) -> str:
    return _document("submitted", job_id=handle.job_id, provider=handle.provider, name=name)


def request_json(job: JobRequest[Any]) -> str:
    return _document("request", **redact(job.to_document(), job.secrets()))


_STATE = {"enum": STATES}
_HEAD = {"schema_version": {"const": SCHEMA_VERSION}, "job_id": {"type": "string"}, "provider": {"type": "string"}}
OUTPUT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "cloudddp --format json",
    "oneOf": [{"$ref": f"#/$defs/{kind}"} for kind in ("status", "list", "submitted", "request")],
    "$defs": {
        "status": {
            "type": "object", "additionalProperties": False,
            "required": ["schema_version", "kind", "job_id", "provider", "state", "reason", "exit_code", "nodes",
                         "artifacts"],
            "properties": {**_HEAD, "kind": {"const": "status"}, "state": _STATE, "reason": {"type": "string"},
                           "exit_code": {"type": ["integer", "null"]},
                           "nodes": {"type": "object", "additionalProperties": {"type": "string"}},
                           "artifacts": {"type": ["string", "null"]}},
        },
        "job": {
            "type": "object", "additionalProperties": False,
            "required": ["name", "provider", "job_id", "submitted", "state", "state_is_current", "nodes",
                         "duration_s", "command"],
            "properties": {"name": {"type": "string"}, "provider": {"type": "string"}, "job_id": {"type": "string"},
                           "submitted": {"type": "string", "format": "date-time"},
                           "state": {"anyOf": [_STATE, {"type": "null"}]}, "state_is_current": {"type": "boolean"},
                           # nodes as launched; duration_s: submission to now (on) or to its end, null: unknown
                           "nodes": {"type": ["integer", "null"], "minimum": 1},
                           "duration_s": {"type": ["number", "null"], "minimum": 0},
                           "command": {"type": "string"}},
        },
        "list": {
            "type": "object", "additionalProperties": False, "required": ["schema_version", "kind", "jobs"],
            "properties": {"schema_version": _HEAD["schema_version"], "kind": {"const": "list"},
                           "jobs": {"type": "array", "items": {"$ref": "#/$defs/job"}}},
        },
        "submitted": {
            "type": "object", "additionalProperties": False,
            "required": ["schema_version", "kind", "job_id", "provider", "name"],
            "properties": {**_HEAD, "kind": {"const": "submitted"}, "name": {"type": "string"}},
        },
        "request": {
            "type": "object", "additionalProperties": False,
            "required": ["schema_version", "kind", "provider", "name", "request"],
            "properties": {"schema_version": _HEAD["schema_version"], "kind": {"const": "request"},
                           "provider": {"type": "string"}, "name": {"type": "string"}, "request": {},
                           "before_submit": {}},
        },
    },
}  # fmt: skip
