"""What the fault tests do to a local job: find a node's processes, kill them all, wait for lines.

A local node is its `cloudddp-launch` process (the runner's child, pid in state.json) and every
descendant: torchrun and the workers (which live in sessions of their own, so a process group
kill would miss them). The tree is read from /proc, as `ps` would.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_folder(stdout: str) -> Path:
    match = re.search(r"submitted (\S+) \(local\)", stdout)
    assert match, stdout
    return Path(match.group(1))


def state(run: Path) -> dict[str, Any]:
    return json.loads((run / "state.json").read_text())  # type: ignore[no-any-return]


def parents() -> dict[int, int]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def process_tree(root: int) -> list[int]:
    """`root` and every live descendant."""
    table, tree = parents(), [root]
    for pid in tree:
        tree += [child for child, parent in table.items() if parent == pid]
    return [pid for pid in tree if alive(pid)]


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status  # a zombie has ended; only its parent has not read its exit code yet


def node_pid(run: Path, node: str) -> int:
    return int(state(run)["nodes"][node]["pid"])


def kill_node(run: Path, node: str) -> list[int]:
    """SIGKILL every process of `node` at once (a machine that vanished); returns the pids killed."""
    pids = process_tree(node_pid(run, node))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def job_processes(run: Path) -> list[int]:
    """Every live process of every node of the job."""
    pids: list[int] = []
    for record in state(run)["nodes"].values():
        pids += process_tree(int(record["pid"]))
    return pids


def wait_for(
    predicate: Any, timeout: float, what: str, poll: float = 0.1, evidence: Callable[[], str] | None = None
) -> float:
    """Wait until `predicate()` is true; returns the time it took (monotonic seconds).

    On a timeout the error carries `evidence()` (the jobs' log tails), so a CI failure says why.
    """
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            seen = f"\n{evidence()}" if evidence else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{seen}")
        time.sleep(poll)
    return time.monotonic() - start


def still_running(run: Path) -> str:
    """Evidence for a job that did not end: each live process (state, command line) and the node logs' tails."""
    lines = []
    for pid in job_processes(run):
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/status").read_text()
            state_line = next((line for line in status.splitlines() if line.startswith("State:")), "State: ?")
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            lines.append(f"  {pid} {state_line.split(None, 1)[1]}: {command[:200]}")
    tails = log_text(run).splitlines()[-40:]
    return "still running:\n" + "\n".join(lines) + "\nnode logs, last lines:\n" + "\n".join(tails)


def log_text(run: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted((run / "logs").glob("*.log")))


def lines_matching(run: Path, pattern: str) -> list[str]:
    return re.findall(pattern, log_text(run), re.M)
