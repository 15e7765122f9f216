"""`cloudddp list`: the indexed jobs with their state now, asked of every provider in parallel under one deadline.

A provider that does not answer in time (an endpoint that accepts and never replies, a login node that is down)
costs the deadline once, not once per job: its jobs show the state last seen, and its age. Jobs already known to
have ended are not asked again. A job's duration runs from its submission to now while it is on, to when it was
first seen finished once it has ended.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

from cloudddp import job_index, providers
from cloudddp.job_index import Entry, remember_state
from cloudddp.providers.base import FINISHED_STATES

# Calls in flight per provider. A thread per job (200 for `list --all`) spent 3 s just starting threads while the
# others imported the providers' SDKs, and 8 per provider still kept the CPU busy past the deadline building clients
# (benchmarks/list_jobs.py).
ASKING_PER_PROVIDER = 4


def current_states(entries: Sequence[Entry], deadline: float) -> dict[Entry, str]:
    """Entry -> its state now, for those whose provider answered within `deadline` seconds."""
    ends = time.monotonic() + deadline
    answers: dict[Entry, str] = {}
    by_provider: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.state not in FINISHED_STATES:
            by_provider.setdefault(entry.provider, []).append(entry)
    # Daemon threads: one stuck in a call that never returns must not keep the command from ending.
    asking = [threading.Thread(target=ask_provider, args=(name, jobs, answers), daemon=True)
              for name, jobs in by_provider.items()]  # fmt: skip
    for thread in asking:
        thread.start()
    for thread in asking:
        thread.join(max(0.0, ends - time.monotonic()))
    return dict(answers)


def ask_provider(name: str, jobs: list[Entry], answers: dict[Entry, str]) -> None:
    """Ask one provider for its jobs' states, ASKING_PER_PROVIDER at a time; each asker has a provider of its own
    (the SDKs' clients are not all safe to share between threads)."""
    pending = iter(jobs)
    taking = threading.Lock()

    def ask() -> None:
        try:
            provider = providers.get_provider(name)
        except Exception:  # any failure to answer reads as no answer; `status JOB` says why
            return
        while True:
            with taking:
                entry = next(pending, None)
            if entry is None:
                return
            try:
                answers[entry] = provider.status(entry.job_id).state
            except Exception:  # as above
                continue

    helpers = [threading.Thread(target=ask, daemon=True) for _ in range(min(len(jobs), ASKING_PER_PROVIDER) - 1)]
    for helper in helpers:
        helper.start()
    ask()
    for helper in helpers:
        helper.join()


def age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def shown_state(entry: Entry, answered: dict[Entry, str], now: float) -> str:
    if entry in answered:
        return answered[entry]
    if entry.state in FINISHED_STATES:
        return entry.state
    cached = f"cached {entry.state}, {age(now - entry.checked)} ago" if entry.state else "never seen"
    return f"unknown ({cached})"


def duration(entry: Entry, answered: Mapping[Entry, str], now: float) -> float | None:
    """Seconds from submission to now for a job known to be on (queued or running), to when it was first seen
    finished for one that ended; None where that is unknown (its provider did not answer, or it ended before the
    index kept end times)."""
    if entry in answered and answered[entry] not in FINISHED_STATES:
        return max(0.0, now - entry.submitted)
    if entry in answered:  # seen finished just now: refresh records now as its end
        return max(0.0, (entry.finished or now) - entry.submitted)
    if entry.state in FINISHED_STATES and entry.finished is not None:
        return max(0.0, entry.finished - entry.submitted)
    return None


def span(seconds: float | None) -> str:
    """A duration as `list` shows it: "42 s", "7 min 05 s", "3 h 04 min", "2 d 3 h"; "" where unknown."""
    if seconds is None:
        return ""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def refresh(entries: Sequence[Entry], deadline: float) -> dict[Entry, str]:
    """current_states, each new one remembered in the index for the next `list`."""
    answered = current_states(entries, deadline)
    for entry, state in answered.items():
        if state != entry.state:
            remember_state(entry.provider, entry.job_id, state)
    return answered


def job_table(entries: Sequence[Entry], answered: dict[Entry, str]) -> str:
    """The table `cloudddp list` prints (a line saying so where the index holds no job)."""
    if not entries:
        return "no jobs launched from here yet (`cloudddp launch` records each one)\n"
    now = time.time()
    rows = [("NAME", "PROVIDER", "STATE", "NODES", "STARTED", "DURATION", "JOB")]
    rows += [(entry.name, entry.provider, shown_state(entry, answered, now),
              "" if entry.nodes is None else str(entry.nodes),
              time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.submitted)),
              span(duration(entry, answered, now)), entry.job_id)
             for entry in entries]  # fmt: skip
    # Every column padded but the last (the id: long ones would widen every line).
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    lines = ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]) + "\n"
             for row in rows]  # fmt: skip
    for position, entry in reversed(list(enumerate(entries, start=1))):  # a failover run's attempts under its job
        if entry.run:
            lines[position + 1 : position + 1] = [f"  attempt {line}\n" for line in attempts_lines(entry.run)]
    return "".join(lines)


def attempts_lines(run: str) -> list[str]:
    """A failover run's attempts (docs/guides/failover.md), one line each: target, provider, job, start-end, state and
    what the service said."""
    lines = []
    for found in job_index.attempts(run):
        start = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(found.started))
        end = time.strftime("%H:%M:%S", time.localtime(found.ended)) if found.ended else "..."
        reason = f": {found.reason.splitlines()[0][:200]}" if found.reason else ""
        lines.append(f"{found.position + 1}. {found.target} ({found.provider}) {found.job_id} {start}-{end} "
                     f"{found.state}{reason}")  # fmt: skip
    return lines
