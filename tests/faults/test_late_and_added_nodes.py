"""Fault 3 (a node arrives late) and fault 4 (scale up): nodes that come after the others.

- A static 3-node job whose node 2 starts 20 s after the others: it joins within the rendezvous
  timeout and the job succeeds (every rank all-reduced over 3 nodes).
- An elastic 2:3 job training on two nodes: a third node started while it trains joins at the next
  rendezvous; training continues from the last checkpoint on three nodes. The two-node job is held
  at its first step (--hold-while) until the third node is in: without the hold, a slow start of the
  third node let the job finish first (CI, stop 19).

Real launchers and torchrun on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from faults.jobs import process_tree, wait_for
from helpers import PYTHON, SOURCES, clean_env

from cloudddp.providers.local.provider import free_port


def launcher(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([PYTHON, "-m", "cloudddp.launcher", *args], env=clean_env(env), cwd=log.parent,
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip


def stop_all(nodes: list[subprocess.Popen[bytes]]) -> None:
    for node in nodes:
        for pid in process_tree(node.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        node.wait()


@pytest.mark.slow
def test_a_node_starting_20_s_late_joins_a_static_job(tmp_path: Path) -> None:
    port, out = free_port(), tmp_path / "out"

    def node(rank: int) -> subprocess.Popen[bytes]:
        return launcher(["--provider", "standalone", "--nnodes", "3", "--node-rank", str(rank), "--master-addr",
                         "127.0.0.1", "--master-port", str(port), "--rdzv-timeout", "300",
                         str(SOURCES / "allreduce_check.py"), "--out-dir", str(out)], tmp_path / f"node{rank}.log")  # fmt: skip

    nodes = [node(0), node(1)]
    try:
        time.sleep(20)  # the late node's delay is the point of the test, not a wait for something
        assert all(n.poll() is None for n in nodes), "the early nodes gave up before the late one came"
        nodes.append(node(2))
        codes = [n.wait(timeout=240) for n in nodes]
    finally:
        stop_all(nodes)
    assert codes == [0, 0, 0], [p.read_text()[-1500:] for p in sorted(tmp_path.glob("node*.log"))]
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(3)]
    assert {(r["world_size"], r["sum"]) for r in results} == {(3, 6.0)}


@pytest.mark.slow
def test_a_node_added_while_an_elastic_job_trains_joins_at_the_next_rendezvous(
    tmp_path: Path, fault_data: Path
) -> None:
    port, hold = free_port(), tmp_path / "hold"
    hold.touch()  # the two-node job holds after its first step until the third node has joined
    env = {"CLOUDDDP_CHECKPOINT_DIR": str(tmp_path / "ckpt"), "CLOUDDDP_MODEL_DIR": str(tmp_path / "model"),
           "OMP_NUM_THREADS": "1"}  # fmt: skip

    def node(rank: int) -> subprocess.Popen[bytes]:
        return launcher(["--provider", "standalone", "--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-id", "grow",
                         "--master-addr", "127.0.0.1", "--master-port", str(port), "--max-restarts", "3",
                         f"--torchrun-arg=--rdzv-conf=last_call_timeout=2,is_host={'true' if rank == 0 else 'false'}",
                         str(SOURCES / "train_ddp.py"), "--data-dir", str(fault_data), "--arch", "tiny",
                         "--epochs", "3", "--image-size", "16", "--batch-size", "8", "--log-steps",
                         "--checkpoint-every", "1", "--hold-while", str(hold)], tmp_path / f"node{rank}.log", env)  # fmt: skip

    def logs() -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(tmp_path.glob("node*.log")))

    def tails() -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(tmp_path.glob("node*.log"))
        )

    nodes = [node(0), node(1)]
    try:
        wait_for(lambda: "world_size=2" in logs() and "step=1 " in logs(), 240, "two nodes training", evidence=tails)
        nodes.append(node(2))
        wait_for(lambda: re.search(r"resumed from \S+ at step \d+ .*world_size=3", logs()), 240, "the third node",
                 evidence=tails)  # fmt: skip
        hold.unlink()
        codes = [n.wait(timeout=300) for n in nodes]
    finally:
        stop_all(nodes)
    assert codes == [0, 0, 0], tails()
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert metrics["epoch"] == 3 and metrics["world_size"] == 3
    prints = {(tmp_path / "model" / f"fingerprint-rank{r}.txt").read_text() for r in range(3)}
    assert len(prints) == 1  # the three replicas hold the same weights
