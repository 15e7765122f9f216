"""What the Slurm and PBS providers share: their sections' common fields, the request (a script, the secrets passed
by name), render, submit and check_id. A subclass renders its script (`script_request`) and may change how its
scheduler takes it (`send`) and where the job id is in the answer (`job_id_in`); status, logs and cancel are each
scheduler's own; so is the timeline's record (`events`), worded alike by node_end_events and job_end_event."""

from __future__ import annotations

import contextlib
import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from pydantic import Field

from cloudddp.errors import CloudDDPError
from cloudddp.launcher.exit_record import read_exit
from cloudddp.providers.base import JobEvent, JobHandle, JobRequest, JobStatus, Provider, node_end, section_of
from cloudddp.providers.batch.shell import refuse_url_credentials, runs_dir_of, split_environment
from cloudddp.providers.batch.tools import run_tool
from cloudddp.redact import redact_text
from cloudddp.secrets_policy import ARGS, HYPERPARAMETERS, InClear
from cloudddp.spec import Section

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec


class BatchSettings(Section):
    """The fields of the `slurm:` and `pbs:` sections that batch/shell.py reads alike (PBS words two for its nodes)."""

    account: str | None = None
    conda_env: str | None = None
    venv: str | None = None
    setup: list[str] = Field(default_factory=list, description="shell lines run before the job step (module load ...)")
    launcher: str = Field(default="cloudddp-launch", description="how the compute nodes start cloudddp's launcher")
    launcher_args: list[str] = Field(default_factory=list)
    host_map: dict[str, str] = Field(default_factory=dict, description="node names that don't resolve -> addresses")
    runs_dir: str = Field(default="cloudddp-runs", description="logs and model folders (on the shared filesystem)")


def yaml_number_as_text(value: object) -> object:
    """A time YAML read as a number (`time: 90`) as the text the scheduler reads: a `mode="before"` validator."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def script_in_clear(provider: str, submit_args: str) -> InClear:
    """The batch script holds the setup lines, the launcher's and scheduler's options, the script's arguments and
    hyperparameters as given; not the environment (secret variables travel by name: split_environment)."""
    return InClear(
        fields=(f"{provider}.setup", f"{provider}.launcher_args", f"{provider}.{submit_args}", ARGS, HYPERPARAMETERS),
        where=f"written into the {provider} batch script",
        by_reference=lambda variable: (
            f"Pass it in a variable instead (--env {variable}=VALUE, or `environment:` in the spec: {provider} hands "
            f"secret-named variables, and variables whose value holds a password in a URL, to the job through the "
            f"scheduler's environment, never in the script) and read it there in the training script."
        ),
    )


@dataclass
class BatchRequest(ABC):
    """Exactly what `submit` runs: `argv` with `script`; secret variables pass by name (sbatch --export, qsub -v)."""

    script: str
    runs_dir: str
    secret_names: list[str] = field(default_factory=list)

    def to_document(self) -> dict[str, object]:
        return {"argv": self.argv, "script": self.script, "secrets_passed_by_name": self.secret_names}

    @property
    @abstractmethod
    def argv(self) -> list[str]: ...


class ScriptJobRequest(JobRequest):
    """A batch job's request: its dry run prints the script itself (no secret values), ready for sbatch or qsub."""

    def to_yaml(self) -> str:
        # Render refuses URL credentials (refuse_url_credentials); hiding them here too keeps a slip out of print.
        return redact_text(str(self.request.script))


def node_end_events(records: dict[str, Path], job_state: str) -> list[JobEvent]:
    """Each node's end from the exit record its job left (`code`, maybe a `stopped-by RANK` line: launcher/
    exit_record.py), at the record's mtime: it is written as the node ends. Nodes without a record are left out;
    `records` is in rank order, which names the node a `stopped-by` line points at."""
    events, nodes = [], list(records)
    for node, path in records.items():
        with contextlib.suppress(OSError):
            when = path.stat().st_mtime
            code, cause = read_exit(path)
            stopped_by = None if cause is None else nodes[cause] if cause < len(nodes) else f"node {cause}"
            events.append(
                JobEvent(when, node, node_end({"exit_code": code, "stopped_by": stopped_by}, job_state, [], node))
            )
    return events


def job_end_event(when: float, current: JobStatus, reason: str) -> JobEvent:
    """The job's end: `succeeded`, or `failed (exit 1): <the scheduler's reason>`."""
    if current.succeeded:
        return JobEvent(when, "", "succeeded")
    code = f" (exit {current.exit_code})" if current.exit_code else ""
    return JobEvent(when, "", f"{current.state.lower()}{code}" + (f": {reason}" if reason else ""))


SettingsT = TypeVar("SettingsT", bound=BatchSettings)


class BatchProvider(Provider, Generic[SettingsT]):
    settings: type[SettingsT]  # the section's model, under the provider's name in the spec
    id_pattern: ClassVar[re.Pattern[str]]  # a job id as the scheduler prints it
    id_hint: ClassVar[str]  # check_id's words for one: "a Slurm job id (a number, ...)"

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        # The environment the scheduler's commands run with (tests point SLURM_CONF or PATH at theirs).
        self.environ = dict(os.environ if environ is None else environ)

    @property
    def utc_environ(self) -> dict[str, str]:
        """The environment with TZ=UTC0: the schedulers' commands print times in their own process's time zone
        (localtime), so the queries `events` reads run in UTC and their times read back exactly."""
        return {**self.environ, "TZ": "UTC0"}

    def settings_of(self, spec: JobSpec) -> SettingsT:
        return section_of(spec, self.name, self.settings)

    def render(self, spec: JobSpec) -> JobRequest:
        settings = self.settings_of(spec)
        spec.require_source()
        runs_dir = runs_dir_of(spec, settings.runs_dir, self.name)
        request = self.script_request(spec, settings, runs_dir, split_environment(spec)[1])
        refuse_url_credentials(request.script, self.name)
        return ScriptJobRequest(provider=self.name, name=spec.name, spec=spec, request=request)

    @staticmethod
    @abstractmethod
    def script_request(spec: JobSpec, settings: SettingsT, runs_dir: Path, secret: list[str]) -> BatchRequest:
        """The script for `spec`: its run folders under `runs_dir`, the `secret` variables passed by name."""

    def submit(self, request: JobRequest) -> JobHandle:
        batch: BatchRequest = request.request
        Path(batch.runs_dir).mkdir(parents=True, exist_ok=True)  # the scheduler does not create the log's folder
        env = {**self.environ, **{name: request.spec.environment[name] for name in batch.secret_names}}
        answer = self.send(batch, env).strip()
        job_id = self.job_id_in(answer)
        if not self.id_pattern.match(job_id):
            raise CloudDDPError(f"{batch.argv[0]} answered {answer!r}, not a job id.")
        return JobHandle(provider=self.name, job_id=job_id, details={"runs_dir": batch.runs_dir})

    def send(self, batch: BatchRequest, env: dict[str, str]) -> str:
        """What the scheduler's command printed when it took `batch`: by default the script on its stdin."""
        return run_tool(batch.argv, stdin=batch.script, env=env, what=batch.argv[0]).stdout

    def job_id_in(self, answer: str) -> str:
        """The job id in the submit command's answer (stripped): by default its last line."""
        return answer.splitlines()[-1].strip() if answer else ""

    def check_id(self, job_id: str) -> str:
        if not self.id_pattern.match(job_id):
            raise CloudDDPError(f"{job_id!r} is not {self.id_hint}.")
        return job_id
