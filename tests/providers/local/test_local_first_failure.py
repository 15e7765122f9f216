"""The local runner names the node that failed, from the launchers' exit records, not from the order it saw
the nodes end in.

A node that the fail-fast channel stopped exits with the failing node's code and its launcher's exit record says
which node stopped it (cloudddp/launcher/exit_record.py). Here the stopped node even ends well before the failing
one: the order the runner sees them end in points at the wrong node, the records do not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, clean_env

# A stand-in for a node's launcher: it writes its exit record with the launcher's own function, then exits.
# (A launcher from before records said who stopped a node wrote none here: no CLOUDDDP_EXIT_DIR, no `stopped_by`.)
NODE = """import os, sys, time
from cloudddp.launcher.exit_record import record_exit
rank, code, stopped_by, after = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
time.sleep(after)
try:
    record_exit(os.environ, rank, code, stopped_by=int(stopped_by) if stopped_by != "-" else None)
except TypeError:
    pass
sys.exit(code)
"""


def run_runner(run_dir: Path, nodes: list[tuple[str, int, int, str, float]]) -> dict[str, object]:
    """The real runner over nodes (name, rank, exit code, rank that stopped it or "-", seconds before ending)."""
    job = {
        "max_runtime": 120,
        "nodes": [{"name": name, "rank": rank, "cwd": str(REPO), "env": {},
                   "command": [sys.executable, "-c", NODE, str(rank), str(code), by, str(after)]}
                  for name, rank, code, by, after in nodes],
    }  # fmt: skip
    runner = subprocess.run(
        [sys.executable, "-m", "cloudddp.providers.local.runner", str(run_dir)],
        input=json.dumps(job), text=True, capture_output=True, cwd=REPO, env=clean_env(), timeout=120,
    )  # fmt: skip
    state = json.loads((run_dir / "state.json").read_text())
    assert runner.returncode == state["exit_code"], runner.stderr
    return state  # type: ignore[no-any-return]


@pytest.mark.slow  # three short processes
def test_the_node_that_failed_is_named_even_when_the_node_it_stopped_ended_first(tmp_path: Path) -> None:
    # algo-1 (rank 0) ends at once, stopped because rank 1 failed; algo-2 (rank 1) fails with 7 two seconds later.
    state = run_runner(tmp_path, [("algo-1", 0, 7, "1", 0.0), ("algo-2", 1, 7, "-", 2.0)])
    assert state["state"] == "FAILED" and state["exit_code"] == 7
    assert state["first_failure"] == "algo-2"
    assert state["reason"] == "node(s) algo-2 exited with code(s) 7 (algo-1 stopped because of it)"


@pytest.mark.slow  # three short processes
def test_of_two_nodes_that_failed_on_their_own_the_first_to_end_is_named(tmp_path: Path) -> None:
    state = run_runner(tmp_path, [("algo-1", 0, 5, "-", 2.0), ("algo-2", 1, 3, "-", 0.0)])
    assert state["first_failure"] == "algo-2" and state["exit_code"] == 3
    assert state["reason"] == "node(s) algo-2, algo-1 exited with code(s) 3, 5"
