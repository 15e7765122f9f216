"""Fault 2: a node of a fixed-size job vanishes (kill -9 of every process of it).

What the user cares about: the other nodes stop within 5 s instead of hanging in a collective,
the job's exit code is the lost node's (137: killed by signal 9), the state names it, and no
process of the job is left running.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
from faults.jobs import job_processes, kill_node, lines_matching, run_folder, state, still_running, wait_for
from helpers import SOURCES, run_cli

CHECK = str(SOURCES / "allreduce_check.py")


@pytest.mark.slow
def test_losing_a_node_stops_every_node_within_5_s_with_its_exit_code(tmp_path: Path) -> None:
    started = run_cli("launch", "--emulate", "none", "--nodes", "3", "--runs-dir", str(tmp_path / "runs"),
                      "--no-wait", CHECK, "--", "--out-dir", str(tmp_path / "out"), "--sleep", "300")  # fmt: skip
    assert started.returncode == 0, started.stderr
    run = run_folder(started.stdout)
    try:
        # Every rank has joined and all-reduced: the job is in its training phase.
        wait_for(lambda: len(lines_matching(run, r"all_reduce sum=6 ")) == 3, 240, "all three ranks to all-reduce")
        before = job_processes(run)
        killed = kill_node(run, "node-1")
        survivors = [pid for pid in before if pid not in killed]
        assert len(killed) >= 3 and len(survivors) >= 6  # launcher, torchrun, worker on each node
        stop_time = wait_for(lambda: not job_processes(run), 5.0, "every process of the job to end",
                             evidence=lambda: still_running(run))  # fmt: skip
        wait_for(lambda: state(run)["state"] in ("FAILED", "SUCCEEDED"), 30, "the runner to record the outcome")
    finally:
        for pid in job_processes(run):  # whatever the outcome, leave nothing behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    final = state(run)
    assert final["state"] == "FAILED" and final["first_failure"] == "node-1"
    assert final["exit_code"] == 137 == final["nodes"]["node-1"]["exit_code"]
    assert final["nodes"]["node-0"]["exit_code"] != 0 and final["nodes"]["node-2"]["exit_code"] != 0
    status = run_cli("status", str(run))
    assert "FAILED" in status.stdout and "node-1" in status.stdout
    print(f"every node stopped {stop_time:.2f} s after the kill")
