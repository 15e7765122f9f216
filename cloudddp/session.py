"""One job from spec to outcome: render, (dry run | submit), follow, wait.

The single code path behind `cloudddp launch` and `Estimator.fit`: both call `run_job`.

While `run_job` follows a job, SIGTERM (`timeout`, a CI job's cancel, `kill`), SIGHUP (a closed terminal) and a
closed output pipe (`| head`, exit code 141 as SIGPIPE's) take Ctrl-C's path: the provider's Ctrl-C decides whether the job is stopped (the local provider's nodes are
this machine's processes: they are; a cloud job is left running, as after Ctrl-C where nobody can be asked),
and the exit code is 128 + the signal. Their default action would end this process at once and leave the
nodes of a local job running until max_runtime.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cloudddp import job_index
from cloudddp.errors import CloudDDPError
from cloudddp.metrics import with_history_asked
from cloudddp.providers import JobHandle, JobRequest, JobStatus, Provider, get_provider, registry
from cloudddp.providers.registry import require_elastic_support
from cloudddp.redact import job_secrets, redact_log_line
from cloudddp.secrets_policy import check_secrets
from cloudddp.terminal import emit

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP while following a job: a KeyboardInterrupt, so it takes Ctrl-C's path."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stop(signum: int, _frame: object) -> None:
    raise StopSignal(signum)


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise StopSignal here. Only where they would kill us (their default action): a handler
    the program installed, or SIG_IGN (`nohup`), is kept; and only in the main thread, which alone can set one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_stop) for sig in STOP_SIGNALS if signal.getsignal(sig) == signal.SIG_DFL}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
        for line in provider.console(handle.job_id):
            say(redact_log_line(line, secrets))  # a job may print its token, or a URL with its password
        return provider.status(handle.job_id)
    last = ""

    def on_status(current: JobStatus) -> None:
        nonlocal last
        if current.state != last:
            say(f"cloudddp: {handle.job_id} is {current.state}")
            last = current.state

    return provider.wait(handle.job_id, poll=2.0, on_status=on_status)


def ask_to_stop(provider: Provider, handle: JobHandle, stop_on_interrupt: bool, can_ask: bool = True) -> bool:
    """After Ctrl-C: stop the job too? The provider's declaration says whether to ask. After SIGTERM or SIGHUP
    nobody is asked (`can_ask`): the answer is the prompt's default, as without a terminal."""
    if stop_on_interrupt or registry.get(provider.name).interrupt_stops_job:
        return True
    if not can_ask or not sys.stdin.isatty():
        return False
    answer = input(f"\nStop the job {handle.job_id} too? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def summarize(current: JobStatus, say: Callable[[str], None]) -> None:
    say(f"cloudddp: job {current.state}" + (f": {current.reason}" if current.reason else ""))
    # A failed job's folder holds no finished model, and its output folder may hold an earlier run's: show neither.
    if current.artifacts and current.succeeded:
        metrics = Path(current.artifacts) / "metrics.json"
        if metrics.is_file():
            values = json.loads(metrics.read_text())
            shown = ", ".join(f"{k}={v}" for k, v in values.items() if not isinstance(v, (dict, list)))
            say(f"cloudddp: metrics: {shown}")
        say(f"cloudddp: model: {current.artifacts}")


def command_exit_code(current: JobStatus) -> int:
    """The exit code `cloudddp launch` ends with for a finished job: 0, the job's own code, else 1."""
    if current.succeeded:
        return 0
    return current.exit_code or 1


def quiet(say: Callable[[str], None]) -> Callable[[str], None]:
    """`say` that ignores a terminal gone (SIGHUP: writing to it fails): the job must still be stopped."""

    def said(line: str) -> None:
        with contextlib.suppress(OSError):
            say(line)

    return said


def interrupted(
    provider: Provider,
    handle: JobHandle,
    stop_on_interrupt: bool,
    say: Callable[[str], None],
    signum: int | None = None,
) -> int:
    """Ctrl-C (or SIGTERM/SIGHUP: `signum`) while following: stop the job (or leave it running), report, exit 128 +
    the signal (130 for Ctrl-C)."""
    code = INTERRUPTED_EXIT_CODE if signum is None else 128 + signum
    if signum is not None:
        say = quiet(say)
        say(f"cloudddp: {signal.Signals(signum).name} received")
    if not ask_to_stop(provider, handle, stop_on_interrupt, can_ask=signum is None):
        say(f"cloudddp: left {handle.job_id} running; `cloudddp cancel {handle.job_id} -p {provider.name}` stops it")
        return code
    say(f"cloudddp: stopping {handle.job_id} ...")
    provider.cancel(handle.job_id)
    summarize(provider.wait(handle.job_id, poll=0.5), say)
    return code


def render(chosen: Provider, spec: JobSpec) -> JobRequest:
    """The checks every door makes before the provider renders, then its rendering."""
    require_elastic_support(chosen.name, spec)  # SageMaker and OCI refuse MIN:MAX before anything is rendered
    # A secret where the provider's request holds it in clear is refused here, for every door; elsewhere it is
    # masked wherever cloudddp shows it (cloudddp/secrets_policy.py).
    check_secrets(spec, registry.get(chosen.name).in_clear)
    missing = chosen.missing_settings(spec)  # all at once: a dry run per missing setting is no way to learn them
    if len(missing) > 1:
        raise CloudDDPError(f"{len(missing)} settings are missing for --provider {chosen.name}:\n"
                            + "\n".join(f"- {line}" for line in missing))  # fmt: skip
    if missing:
        raise CloudDDPError(missing[0])
    return chosen.render(with_history_asked(spec, registry.get(chosen.name).applies_metric_definitions))


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
    record.request = render(chosen, spec)
    if dry_run:
        say(record.request.to_yaml().rstrip())
        return 0
    record.handle = handle = chosen.submit(record.request)
    say(f"cloudddp: submitted {handle.job_id} ({chosen.name})")
    index_job(chosen, handle, spec, request=record.request)
    if not wait:
        return 0
    return follow_job(chosen, handle, spec, logs=logs, stop_on_interrupt=stop_on_interrupt, say=say, record=record)


def index_job(
    chosen: Provider, handle: JobHandle, spec: JobSpec, run: str | None = None, request: JobRequest | None = None
) -> None:
    """Remember the job in the job index: its command line as launched and the request as its dry run prints it,
    both with the job's secrets masked (the dashboard shows the request)."""
    secrets = job_secrets(spec.environment, spec.hyperparameters, spec.args)  # as its dry run hides them
    command = redact_log_line(shlex.join(sys.argv), secrets)
    sent = request.to_yaml().rstrip() if request is not None else None
    job_index.record(chosen.name, handle.job_id, spec.name, command, spec.nodes, spec.metrics or None, run, sent)


def follow_job(
    chosen: Provider,
    handle: JobHandle,
    spec: JobSpec,
    *,
    logs: bool,
    stop_on_interrupt: bool,
    say: Callable[[str], None],
    record: JobRecord,
) -> int:
    """Follow a submitted job to its end (Ctrl-C, SIGTERM, SIGHUP and a closed pipe as the module says); its exit
    code."""
    secrets = job_secrets(spec.environment, spec.hyperparameters, spec.args)
    with stop_signals_interrupt():
        try:
            record.final = follow(chosen, handle, logs, say, secrets)
        except KeyboardInterrupt as exc:
            signum = exc.signum if isinstance(exc, StopSignal) else None
            try:
                return interrupted(chosen, handle, stop_on_interrupt, say, signum)
            except StopSignal as again:  # a second SIGTERM/SIGHUP while stopping: stop waiting, as a second Ctrl-C
                return 128 + again.signum
        except BrokenPipeError:  # whoever read our output is gone (`launch ... | head`): as a closed terminal
            return interrupted(chosen, handle, stop_on_interrupt, say, signal.SIGPIPE)
    # The end as this launch saw it: `list` shows it without asking the provider again, which may no longer know
    # the job (a local run folder removed, expired credentials).
    job_index.remember_state(chosen.name, handle.job_id, record.final.state)
    summarize(record.final, say)
    return command_exit_code(record.final)
