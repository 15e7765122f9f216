"""`cancel` of a run whose runner died: stop the nodes it left running, or say that it could not.

The detached runner (runner.py) is the nodes' parent and the one that stops them. If it dies (SIGKILL, the
OOM killer), the kernel sends each node SIGTERM (PR_SET_PDEATHSIG, set as the runner starts it). Where that is
not there (not Linux, or a run started before it), the nodes' `cloudddp-launch` processes run on with nobody
to stop them. `stop_orphaned_nodes`
does what the runner would have done: SIGTERM to each node's launcher, which passes it on to torchrun and
the workers (the script can checkpoint) and kills what is left after its own grace period. It waits for them
to end, SIGKILLs a node still there after that, and records the run as STOPPED.

A pid in state.json is trusted only while it is still the node's process: same pid and same start time
(recorded by the runner; for a run from before that, a `cloudddp.launcher` command line), never a process
that got the pid after the node had ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.launcher.supervisor import descendants, is_running
from cloudddp.providers.local.runner import process_start_time, write_state

# The launcher's default --grace-period (60 s) between its SIGTERM and its SIGKILL, and a margin.
ORPHAN_GRACE = 70.0
KILL_WAIT = 10.0
POLL = 0.1


def is_same_process(pid: Any, start_time: Any, command_word: bytes) -> bool:
    """True while `pid` is alive and still the process recorded: same start time where one was recorded,
    else a command line holding `command_word`."""
    if not isinstance(pid, int) or pid <= 0 or not is_running(pid):
        return False
    now = process_start_time(pid)
    if now is None:  # no /proc (not Linux): kill(0) is all there is to go by
        return True
    if isinstance(start_time, int):
        return now == start_time
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return command_word in handle.read()
    except OSError:
        return False


def live_nodes(state: dict[str, Any]) -> dict[str, int]:
    """Node name -> pid of each node whose launcher is still running, as state.json records it."""
    return {
        name: record["pid"]
        for name, record in state.get("nodes", {}).items()
        if isinstance(record, dict)
        and record.get("exit_code") is None
        and is_same_process(record.get("pid"), record.get("start_time"), b"cloudddp.launcher")
    }


def wait_for_exit(pids: dict[str, int], timeout: float) -> dict[str, int]:
    """Those of `pids` still running after `timeout` seconds (returns as soon as none is)."""
    deadline = time.monotonic() + timeout
    while True:
        left = {name: pid for name, pid in pids.items() if is_running(pid)}
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL)


def signal_nodes(pids: dict[str, int], sig: int, with_descendants: bool = False) -> dict[str, str]:
    """Send `sig` to each node's launcher (and, with `with_descendants`, to every process below it first);
    node name -> why it could not be signalled."""
    refused: dict[str, str] = {}
    for name, pid in pids.items():
        below = descendants(pid) if with_descendants else []
        for target in [*reversed(below), pid]:
            try:
                os.kill(target, sig)
            except ProcessLookupError:
                continue
            except PermissionError as exc:
                refused[name] = f"pid {target}: {exc.strerror or exc}"
    return refused


def stop_orphaned_nodes(run_dir: Path, state: dict[str, Any]) -> None:
    """Stop the nodes of a run whose runner died and record it STOPPED; CloudDDPError if none was left running
    or one could not be stopped."""
    nodes = live_nodes(state)
    if not nodes:
        raise CloudDDPError(
            f"the local run {run_dir.name} is not running: its runner process died and none of its nodes is "
            f"still running, so there is nothing to stop (`cloudddp status {run_dir}` reports it FAILED)."
        )
    refused = signal_nodes(nodes, signal.SIGTERM)
    left = wait_for_exit(nodes, ORPHAN_GRACE) if not refused else nodes
    if left and not refused:
        refused = signal_nodes(left, signal.SIGKILL, with_descendants=True)
        left = wait_for_exit(left, KILL_WAIT)
    if left or refused:
        why = "; ".join(f"{name}: {reason}" for name, reason in refused.items())
        raise CloudDDPError(
            f"could not stop node(s) {', '.join(sorted(left or refused))} of the local run {run_dir.name} "
            f"(its runner process had died): pid(s) {', '.join(str(nodes[n]) for n in sorted(left or refused))} "
            f"still running{f' ({why})' if why else ''}. Stop them by hand (kill PID)."
        )
    state.update(state="STOPPED", exit_code=143, ended=time.time())
    state["reason"] = "cancelled after the local runner process died; cancel stopped the nodes itself"
    with contextlib.suppress(OSError):  # the nodes are stopped; a read-only run folder only keeps the old record
        write_state(run_dir, state)
