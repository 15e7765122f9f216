"""One job from spec to outcome: render, (dry run | submit), follow, wait.

The single code path behind `cloudddp launch` and `Estimator.fit`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from cloudddp.providers import JobHandle, JobStatus, Provider, get_provider
from cloudddp.spec import JobSpec


def emit(line: str) -> None:
    # print(), not logging: shows up in a notebook with no logging configured.
    print(line, flush=True)


def follow(provider: Provider, handle: JobHandle, logs: bool, say: Callable[[str], None]) -> JobStatus:
    if logs:
        for line in provider.logs(handle.job_id, follow=True):
            say(line)
        return provider.status(handle.job_id)
    last = ""

    def on_status(current: JobStatus) -> None:
        nonlocal last
        if current.state != last:
            say(f"cloudddp: {handle.job_id} is {current.state}")
            last = current.state

    return provider.wait(handle.job_id, poll=2.0, on_status=on_status)


def ask_to_stop(provider: Provider, handle: JobHandle, stop_on_interrupt: bool) -> bool:
    if stop_on_interrupt or getattr(provider, "interrupt_stops", provider.name == "local"):
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
        say(f"cloudddp: model: {current.artifacts}")


def exit_code_of(current: JobStatus) -> int:
    if current.succeeded:
        return 0
    return current.exit_code or 1


def run_job(
    provider_name: str,
    spec: JobSpec,
    *,
    dry_run: bool = False,
    wait: bool = True,
    logs: bool = True,
    stop_on_interrupt: bool = False,
    say: Callable[[str], None] = emit,
    on_submit: Callable[[Provider, JobHandle], None] | None = None,
) -> int:
    provider = get_provider(provider_name)
    request = provider.render(spec)
    if dry_run:
        say(request.to_yaml().rstrip())
        return 0
    handle = provider.submit(request)
    say(f"cloudddp: submitted {handle.job_id} ({provider.name})")
    if on_submit:
        on_submit(provider, handle)
    if not wait:
        return 0
    try:
        current = follow(provider, handle, logs, say)
    except KeyboardInterrupt:
        if not ask_to_stop(provider, handle, stop_on_interrupt):
            say(
                f"cloudddp: left {handle.job_id} running; `cloudddp cancel {handle.job_id} -p {provider.name}` stops it"
            )
            return 130
        say(f"cloudddp: stopping {handle.job_id} ...")
        provider.cancel(handle.job_id)
        current = provider.wait(handle.job_id, poll=0.5)
        summarize(current, say)
        return 130
    summarize(current, say)
    return exit_code_of(current)
