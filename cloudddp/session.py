"""One job from spec to outcome: render, (dry run | submit), follow, wait.

The single code path behind `cloudddp launch` and `Estimator.fit`: both call `run_job`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cloudddp.elastic import require_elastic_support
from cloudddp.providers import JobHandle, JobRequest, JobStatus, Provider, get_provider, registry
from cloudddp.redact import redact_log_line, secret_values

if TYPE_CHECKING:
    from cloudddp.spec import JobSpec

INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for Ctrl-C


def emit(line: str) -> None:
    # print(), not logging: shows up in a notebook with no logging configured.
    print(line, flush=True)


@dataclass
class JobRecord:
    """What one `run_job` call did, for callers that need more than the exit code (the Estimator)."""

    request: JobRequest | None = None
    handle: JobHandle | None = None
    final: JobStatus | None = None


def follow(
    provider: Provider, handle: JobHandle, logs: bool, say: Callable[[str], None], secrets: Sequence[str] = ()
) -> JobStatus:
    if logs:
        for line in provider.logs(handle.job_id, follow=True):
            say(redact_log_line(line, secrets))  # a job may print its token, or a URL with its password
        return provider.status(handle.job_id)
    last = ""

    def on_status(current: JobStatus) -> None:
        nonlocal last
        if current.state != last:
            say(f"cloudddp: {handle.job_id} is {current.state}")
            last = current.state

    return provider.wait(handle.job_id, poll=2.0, on_status=on_status)


def ask_to_stop(provider: Provider, handle: JobHandle, stop_on_interrupt: bool) -> bool:
    """After Ctrl-C: stop the job too? The provider's declaration says whether to ask."""
    if stop_on_interrupt or registry.get(provider.name).interrupt_stops_job:
        return True
    if not sys.stdin.isatty():
        return False
    answer = input(f"\nStop the job {handle.job_id} too? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def summarize(current: JobStatus, say: Callable[[str], None]) -> None:
    say(f"cloudddp: job {current.state}" + (f": {current.reason}" if current.reason else ""))
    if current.artifacts:
        metrics = Path(current.artifacts) / "metrics.json"
        if metrics.is_file():
            values = json.loads(metrics.read_text())
            shown = ", ".join(f"{k}={v}" for k, v in values.items() if not isinstance(v, (dict, list)))
            say(f"cloudddp: metrics: {shown}")
        if current.succeeded:  # a failed job's folder holds no finished model
            say(f"cloudddp: model: {current.artifacts}")


def command_exit_code(current: JobStatus) -> int:
    """The exit code `cloudddp launch` ends with for a finished job: 0, the job's own code, else 1."""
    if current.succeeded:
        return 0
    return current.exit_code or 1


def interrupted(provider: Provider, handle: JobHandle, stop_on_interrupt: bool, say: Callable[[str], None]) -> int:
    """Ctrl-C while following: stop the job (or leave it running), report, exit 130."""
    if not ask_to_stop(provider, handle, stop_on_interrupt):
        say(f"cloudddp: left {handle.job_id} running; `cloudddp cancel {handle.job_id} -p {provider.name}` stops it")
        return INTERRUPTED_EXIT_CODE
    say(f"cloudddp: stopping {handle.job_id} ...")
    provider.cancel(handle.job_id)
    summarize(provider.wait(handle.job_id, poll=0.5), say)
    return INTERRUPTED_EXIT_CODE


def run_job(
    provider: str | Provider,
    spec: JobSpec,
    *,
    dry_run: bool = False,
    wait: bool = True,
    logs: bool = True,
    stop_on_interrupt: bool = False,
    say: Callable[[str], None] = emit,
    record: JobRecord | None = None,
) -> int:
    """Render; print it (dry run) or submit exactly it; follow until done. Returns the exit code."""
    chosen = get_provider(provider) if isinstance(provider, str) else provider
    record = record if record is not None else JobRecord()
    require_elastic_support(chosen.name, spec)  # SageMaker and OCI refuse MIN:MAX before anything is rendered
    record.request = chosen.render(spec)
    if dry_run:
        say(record.request.to_yaml().rstrip())
        return 0
    record.handle = handle = chosen.submit(record.request)
    say(f"cloudddp: submitted {handle.job_id} ({chosen.name})")
    if not wait:
        return 0
    try:
        record.final = follow(chosen, handle, logs, say, secret_values(spec.environment))
    except KeyboardInterrupt:
        return interrupted(chosen, handle, stop_on_interrupt, say)
    summarize(record.final, say)
    return command_exit_code(record.final)
