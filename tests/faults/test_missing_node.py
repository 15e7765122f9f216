"""Fault 3 (the node that never starts): node 0 says which ranks and hosts are missing.

A 3-node static job whose node 2 never starts: the rendezvous times out (`--rdzv-timeout`), and
node 0's launcher names rank 2 as never heard from and says what it last heard from rank 1 and
when, instead of torchrun's bare timeout. Real launchers, real torchrun, on 127.0.0.1.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import PYTHON, SOURCES, clean_env

from cloudddp.launcher.peers import PeerWatch
from cloudddp.providers.local.provider import free_port


def start_node(rank: int, port: int, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "-m", "cloudddp.launcher", "--provider", "standalone", "--nnodes", "3", "--node-rank", str(rank),
         "--master-addr", "127.0.0.1", "--master-port", str(port), "--rdzv-timeout", "20", "--grace-period", "5",
         str(SOURCES / "allreduce_check.py"), "--out-dir", str(tmp_path / "out")],
        env=clean_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


@pytest.mark.slow
def test_node_0_names_the_node_that_never_started_when_the_rendezvous_times_out(tmp_path: Path) -> None:
    port = free_port()
    started = time.monotonic()
    nodes = [start_node(rank, port, tmp_path) for rank in (0, 1)]  # rank 2 never comes
    try:
        output0, _ = nodes[0].communicate(timeout=240)
        nodes[1].communicate(timeout=120)
    finally:
        for node in nodes:
            node.kill()
    assert nodes[0].returncode != 0 and time.monotonic() - started < 200
    assert "1 of 3 nodes never reached node 0" in output0 and "rank(s) 2" in output0
    # Rank 1 said HELLO, then FAIL when its own rendezvous timed out, whichever came last is reported.
    assert re.search(rf"rank 1 on {re.escape(socket.gethostname())} \(127\.0\.0\.1\): last heard (HELLO|FAIL) at ",
                     output0), output0  # fmt: skip


def test_the_report_lists_every_missing_rank_and_the_last_message_of_the_others() -> None:
    watch = PeerWatch(0, 4, "127.0.0.1", 1, "job", lambda *_: None)
    watch.heard[2] = (1000.0, "algo-3 (10.0.0.3)", "DONE")
    report = watch.missing_report(now=1042.0)
    assert report is not None
    assert "2 of 4 nodes never reached node 0" in report and "rank(s) 1, 3" in report
    assert "rank 2 on algo-3 (10.0.0.3): last heard DONE at" in report and "(42 s ago)" in report
    watch.heard.update({1: (1040.0, "a", "HELLO"), 3: (1041.0, "b", "HELLO")})
    assert watch.missing_report(now=1042.0) is None  # everyone came: nothing to report
    assert PeerWatch(1, 4, "127.0.0.1", 1, "job", lambda *_: None).missing_report() is None  # node 0 reports
    # Where the platform lists its hosts in rank order (SageMaker, Slurm, PBS...), the missing ones are named.
    named = PeerWatch(0, 3, "127.0.0.1", 1, "job", lambda *_: None, hosts=["algo-1", "algo-2", "algo-3"])
    assert "rank(s) 1 (algo-2), 2 (algo-3)" in (named.missing_report(now=0.0) or "")
