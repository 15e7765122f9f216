"""`cloudddp list`: the indexed jobs with their state now, asked of every provider in parallel under one deadline.

A provider that does not answer in time (an endpoint that accepts and never replies, a login node that is down)
costs the deadline once, not once per job: its jobs show the state last seen, and its age. Jobs already known to
have ended are not asked again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from cloudddp.job_index import Entry, remember_state
from cloudddp.providers.base import FINISHED_STATES


def current_states(entries: Sequence[Entry], deadline: float) -> dict[Entry, str]:
    """Entry -> its state now, for those whose provider answered within `deadline` seconds."""
    from cloudddp.providers import get_provider

    answers: dict[Entry, str] = {}

    def ask(entry: Entry) -> None:
        try:
            answers[entry] = get_provider(entry.provider).status(entry.job_id).state
        except Exception:  # any failure to answer reads as no answer; `status JOB` says why
            return

    # Daemon threads: one stuck in a call that never returns must not keep the command from ending.
    asking = [threading.Thread(target=ask, args=(entry,), daemon=True)
              for entry in entries if entry.state not in FINISHED_STATES]  # fmt: skip
    for thread in asking:
        thread.start()
    ends = time.monotonic() + deadline
    for thread in asking:
        thread.join(max(0.0, ends - time.monotonic()))
    return dict(answers)


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


def refresh(entries: Sequence[Entry], deadline: float) -> dict[Entry, str]:
    """current_states, each new one remembered in the index for the next `list`."""
    answered = current_states(entries, deadline)
    for entry, state in answered.items():
        if state != entry.state:
            remember_state(entry, state)
    return answered


def job_table(entries: Sequence[Entry], answered: dict[Entry, str]) -> str:
    """The table `cloudddp list` prints (a line saying so where the index holds no job)."""
    if not entries:
        return "no jobs launched from here yet (`cloudddp launch` records each one)\n"
    now = time.time()
    rows = [("NAME", "PROVIDER", "STATE", "SUBMITTED", "JOB")]
    rows += [(entry.name, entry.provider, shown_state(entry, answered, now),
              time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.submitted)), entry.job_id)
             for entry in entries]  # fmt: skip
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    return "".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + f"  {row[4]}\n"
                   for row in rows)  # fmt: skip
