"""The interface every provider implements, with the dry run apart from the submission.

`submit(render(spec))` is the whole launch: `render` builds the exact request the
platform will receive (what `--dry-run` prints) and touches nothing; `submit` uploads
and creates. The behaviour of the other calls, written once here:

- `status(job_id)` returns a `JobStatus` with one of `STATES`; `done` is true for the
  terminal ones (SUCCEEDED, FAILED, STOPPED).
- `logs(job_id, follow)` yields lines, each prefixed with the node or host it came
  from ("[algo-1] ..."). Without follow it ends after what exists now; with follow
  it ends once the job is done and every line written up to then was yielded.
- `cancel(job_id)` asks the platform to stop the job and returns at once; `wait`
  returns when the job is done.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from cloudddp.redact import redact

if TYPE_CHECKING:
    from cloudddp.spec import JobSpec  # at run time it is built from the registry, which imports this


class BlockDumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings (scripts, commands) as readable `|` blocks."""


def _block_strings(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


BlockDumper.add_representer(str, _block_strings)

STATES = ("PENDING", "RUNNING", "STOPPING", "SUCCEEDED", "FAILED", "STOPPED")
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


@dataclass
class JobRequest:
    """What would be sent to the platform, printable; `payload` is the platform's own request."""

    provider: str
    name: str
    payload: dict[str, Any]
    spec: JobSpec
    # Work `submit` must do before the payload is valid (stage these local paths, ...).
    plan: dict[str, Any] = field(default_factory=dict)

    def to_yaml(self) -> str:
        """The request as YAML, secrets replaced by ***: what --dry-run prints."""
        document = {"provider": self.provider, "name": self.name, "request": self.payload}
        if self.plan:
            document["before_submit"] = self.plan
        return yaml.dump(redact(document), Dumper=BlockDumper, sort_keys=False, default_flow_style=False)


@dataclass
class JobHandle:
    provider: str
    job_id: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobStatus:
    job_id: str
    state: str
    reason: str = ""
    exit_code: int | None = None
    nodes: dict[str, str] = field(default_factory=dict)
    artifacts: str | None = None

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCEEDED"


class Provider(ABC):
    name: str = ""

    @abstractmethod
    def render(self, spec: JobSpec) -> JobRequest: ...

    @abstractmethod
    def submit(self, request: JobRequest) -> JobHandle: ...

    @abstractmethod
    def status(self, job_id: str) -> JobStatus: ...

    @abstractmethod
    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]: ...

    @abstractmethod
    def cancel(self, job_id: str) -> None: ...

    def wait(self, job_id: str, poll: float = 5.0, on_status: Callable[[JobStatus], None] | None = None) -> JobStatus:
        while True:
            current = self.status(job_id)
            if on_status:
                on_status(current)
            if current.done:
                return current
            time.sleep(poll)

    def launch(self, spec: JobSpec) -> JobHandle:
        return self.submit(self.render(spec))
