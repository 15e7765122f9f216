"""Fault 7, load: many nodes rendezvous and all-reduce; two jobs side by side.

- 8 nodes x 1 process on 127.0.0.1, one job per rendezvous backend (static and c10d): the job succeeds, every
  rank all-reduces over 8. Job after job is a benchmark, not a test: benchmarks/load.py (--rounds N).
- Two local jobs launched at the same moment: each picks its own ports (master, master + 1 for the
  fail-fast channel, the c10d store), both succeed, neither sees the other's ranks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from faults.jobs import run_folder, state
from helpers import REPO, SOURCES, clean_env, run_cli

CHECK = str(SOURCES / "allreduce_check.py")


def sums(out: Path, world: int) -> set[tuple[int, float]]:
    return {(r["world_size"], r["sum"]) for r in (json.loads(p.read_text()) for p in out.glob("rank*.json"))}


# One job is ~28 s on a 2-core machine (16 torch imports).
@pytest.mark.slow
@pytest.mark.torchrun
@pytest.mark.parametrize("nodes", ["8", "8:8"], ids=["static", "c10d"])
def test_eight_nodes_rendezvous_and_all_reduce(tmp_path: Path, nodes: str) -> None:
    out = tmp_path / "out"
    result = run_cli("launch", "--emulate", "none", "--nodes", nodes, "--runs-dir", str(tmp_path / "runs"),
                     CHECK, "--", "--out-dir", str(out), timeout=300)  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert len(list(out.glob("rank*.json"))) == 8 and sums(out, 8) == {(8, 36.0)}


@pytest.mark.slow
def test_two_local_jobs_launched_together_never_collide(tmp_path: Path) -> None:
    def launch(name: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", "from cloudddp.console import main; main()", "launch", "--emulate", "none",
             "--nodes", "3", "--name", name, "--runs-dir", str(tmp_path / "runs"), "--no-logs", CHECK, "--",
             "--out-dir", str(tmp_path / name)],
            cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

    jobs = {name: launch(name) for name in ("first", "second")}
    outputs = {name: job.communicate(timeout=600)[0] for name, job in jobs.items()}
    for name, job in jobs.items():
        assert job.returncode == 0, outputs[name][-3000:]
        assert state(run_folder(outputs[name]))["state"] == "SUCCEEDED"
        assert sums(tmp_path / name, 3) == {(3, 6.0)}  # its own three ranks, not the other job's
    ports = [re.search(r"rdzv=static@127\.0\.0\.1:(\d+)", (run_folder(outputs[n]) / "logs" / "node-0.log").read_text())
             for n in jobs]  # fmt: skip
    assert all(ports) and ports[0].group(1) != ports[1].group(1)  # type: ignore[union-attr]
