"""A local run's course, as its runner recorded it in state.json and its launchers' exit records: submitted,
started, interrupted and restarted (managed spot's emulation), each node's end (succeeded, failed, stopped, lost)
and the job's end. For the dashboard's timeline (`Provider.events`)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from cloudddp.providers.base import JobEvent, node_end


def run_events(run_dir: Path, state: dict[str, Any]) -> list[JobEvent]:
    """The run's events, oldest first. A node's end is when its launcher wrote its exit record (exits/node-RANK,
    written as it ends), else the run's end; nodes are in state.json in rank order (the runner starts them so)."""
    events: list[JobEvent] = []
    if isinstance(state.get("launched"), int):
        events.append(JobEvent(state["launched"] / 1e9, "", "submitted"))
    started = state.get("started")
    ended = state.get("ended")
    for interruption in state.get("interruptions", []):
        events.append(JobEvent(interruption["at"], "", "interrupted (managed spot's reclaim); nodes restarted"))
    for rank, (name, record) in enumerate(state.get("nodes", {}).items()):
        if isinstance(started, (int, float)):
            events.append(JobEvent(started, name, "started"))
        if record.get("exit_code") is None and state.get("state") not in ("SUCCEEDED", "FAILED", "STOPPED"):
            continue
        when = ended if isinstance(ended, (int, float)) else None
        with contextlib.suppress(OSError):
            when = (run_dir / "exits" / f"node-{rank}").stat().st_mtime
        if when is not None:
            events.append(
                JobEvent(when, name, node_end(record, state.get("state", ""), state.get("lost_nodes", []), name))
            )
    if isinstance(ended, (int, float)):
        reason = f": {state['reason']}" if state.get("reason") else ""
        events.append(JobEvent(ended, "", f"{state.get('state', '').lower()}{reason}"))
    return sorted(events, key=lambda event: event.time)
