"""The interface every provider implements, with the dry run apart from the submission.

`submit(render(spec))` is the whole launch: `render` builds the exact request the
platform will receive (a `JobRequest`, what `--dry-run` prints) and touches nothing;
`submit` does the request's `before_submit` steps (uploads) and sends `request`
unchanged. `cloudddp.session.run_job` is the one caller of both. What a provider declares
about itself (name, settings, CLI options, Ctrl-C behaviour) is in its `PROVIDER`
(see `cloudddp.providers.registry`). The behaviour of the other calls, written once here:

- `status(job_id)` returns a `JobStatus` with one of `JOB_STATES`; `done` is true for the
  terminal ones (SUCCEEDED, FAILED, STOPPED).
- `logs(job_id, follow)` yields lines, each prefixed with the node or host it came
  from ("[algo-1] ..."). Without follow it ends after what exists now; with follow
  it ends once the job is done and every line written up to then was yielded.
- `cancel(job_id)` asks the platform to stop the job and returns at once; `wait`
  returns when the job is done.
- `events(job_id)` is what the provider recorded of the job's course (submitted, started, a node's end, an
  interruption), oldest first; `dry_run(job_id)` the request as its dry run printed it, where the provider keeps
  it. Both answer "nothing recorded" by default (the dashboard's job page, `cloudddp ui`).
- `find_by_name(name, spec)` is the id of the job the service holds under `name`, the `JobRequest.name` it was
  submitted with (with `spec`'s settings: the compartment, the namespace), or None where the service has none; it
  raises where it cannot ask. Failover (cloudddp/failover.py) records that name before submitting, and calls this
  for an attempt whose client was killed before it recorded the id, so that a rerun adopts the job instead of
  submitting a second. By default the name is the id (SageMaker's training job, a local run) and the job's status
  says whether it exists (a status that raises reads as none: it cannot tell a service that does not answer from a
  job that is not there); a provider whose service assigns the id (Slurm, PBS, OCI) looks the name up.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import yaml

from cloudddp.errors import CloudDDPError
from cloudddp.redact import job_secrets, redact

if TYPE_CHECKING:
    from pydantic import BaseModel

    from cloudddp.job_spec import JobSpec

SectionT = TypeVar("SectionT", bound="BaseModel")


def section_of(spec: JobSpec, name: str, model: type[SectionT]) -> SectionT:
    """The spec's `name:` section (the registry adds one per provider to JobSpec), its defaults where it is absent."""
    section = getattr(spec, name, None)
    return section if isinstance(section, model) else model.model_validate(section or {})


class BlockDumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings (scripts, commands) as readable `|` blocks."""


def _block_strings(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


BlockDumper.add_representer(str, _block_strings)

# The states every provider's `status` maps its platform's own states onto.
JOB_STATES = ("PENDING", "RUNNING", "STOPPING", "SUCCEEDED", "FAILED", "STOPPED")
FINISHED_STATES = ("SUCCEEDED", "FAILED", "STOPPED")

RequestT = TypeVar("RequestT")


def document_of(value: Any) -> Any:
    """A typed request or staging step as plain data for the dry run: its `to_document()`, or itself."""
    to_document = getattr(value, "to_document", None)
    return to_document() if callable(to_document) else value


@dataclass
class JobRequest(Generic[RequestT]):
    """What `render` built and `submit` sends, unchanged: the dry run is the truth.

    `request` is the provider's own typed request (the local provider's `LocalRequest`, the
    OCI SDK's model objects, ...); `before_submit` is what `submit` does first (staging),
    typed as well. Both print through their `to_document()` (plain dicts print as they are).
    """

    provider: str
    name: str
    spec: JobSpec
    request: RequestT
    before_submit: Any = None

    def to_document(self) -> dict[str, Any]:
        document = {"provider": self.provider, "name": self.name, "request": document_of(self.request)}
        before = document_of(self.before_submit)
        if before:
            document["before_submit"] = before
        return document

    def secrets(self) -> list[str]:
        """The job's secret values, which every rendering of its request for the user hides."""
        return job_secrets(self.spec.environment, self.spec.hyperparameters, self.spec.args)

    def to_yaml(self) -> str:
        """The request as YAML, secrets replaced by ***: what --dry-run prints (and a local run's request.yaml).
        They are replaced in the data, before dumping, so a masked value is quoted (a bare *** is a YAML alias)."""
        return yaml.dump(redact(self.to_document(), self.secrets()), Dumper=BlockDumper, sort_keys=False,
                         default_flow_style=False)  # fmt: skip


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
        return self.state in FINISHED_STATES

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCEEDED"


@dataclass(frozen=True)
class JobEvent:
    """One step of a job's course: when (seconds since the epoch), which node ("" for the job) and what."""

    time: float
    node: str
    what: str


def node_end(record: dict[str, Any], job_state: str, lost: list[str], name: str) -> str:
    """How a node ended, in a word or a few: one wording for every provider's timeline (local runs, the batch
    schedulers' exit records)."""
    code = record.get("exit_code")
    if code is None:
        return "ended (exit code unknown)"
    if record.get("stopped_by"):
        return f"stopped because {record['stopped_by']} failed (exit {code})"
    if name in lost:
        return f"lost (exit {code}); the others re-formed"
    if code == 0:
        return "succeeded"
    return f"stopped (exit {code})" if job_state == "STOPPED" else f"failed (exit {code})"


class Provider(ABC):
    name: str = ""

    @abstractmethod
    def render(self, spec: JobSpec) -> JobRequest: ...

    def missing_settings(self, spec: JobSpec) -> list[str]:
        """What `spec` lacks that the provider requires and finds nowhere else (a variable, a config file), one
        sentence each saying how to give it: `run_job` reports them all in one error before `render`."""
        return []

    @abstractmethod
    def submit(self, request: JobRequest) -> JobHandle: ...

    @abstractmethod
    def status(self, job_id: str) -> JobStatus: ...

    @abstractmethod
    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]: ...

    @abstractmethod
    def cancel(self, job_id: str) -> None: ...

    def console(self, job_id: str) -> Iterator[str]:
        """What `launch` prints while it follows the job: its logs, unless the provider shortens them (local:
        each traceback folded into its exception line, providers/local/console_fold.py)."""
        return self.logs(job_id, follow=True)

    def events(self, job_id: str) -> list[JobEvent]:
        """What the provider recorded of the job's course, oldest first; none by default."""
        return []

    def dry_run(self, job_id: str) -> str | None:
        """The request as its dry run printed it (secrets masked), where the provider keeps it; None by default."""
        return None

    def find_by_name(self, name: str, spec: JobSpec) -> str | None:
        """The id of the job submitted under `name`, None where there is none (the module's docstring)."""
        try:
            return self.status(name).job_id or name
        except CloudDDPError:
            return None

    def wait(self, job_id: str, poll: float = 5.0, on_status: Callable[[JobStatus], None] | None = None) -> JobStatus:
        while True:
            current = self.status(job_id)
            if on_status:
                on_status(current)
            if current.done:
                return current
            time.sleep(poll)
