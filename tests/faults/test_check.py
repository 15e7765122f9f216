"""`cloudddp-launch --check`: DNS of every host, the master port from each node, clock skew against
node 0, one verdict line per node; and the same reasons printed when a node never reached node 0.

Real launchers on 127.0.0.1 (the check imports no torch, so these are quick).
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import PYTHON, SOURCES, clean_env

from cloudddp.cluster.plan import ClusterPlan
from cloudddp.launcher.diagnostics import Findings, ask_node_0
from cloudddp.providers.local.provider import free_port


def check_node(rank: int, port: int, *extra: str, window: str = "20") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "-m", "cloudddp.launcher", "--check", "--check-window", window, "--provider", "standalone",
         "--nnodes", "2", "--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port", str(port), *extra],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def verdict(node: subprocess.Popen[str]) -> tuple[int, str]:
    output, _ = node.communicate(timeout=60)
    return node.returncode, output


def test_two_healthy_nodes_each_print_an_ok_verdict() -> None:
    port = free_port()
    node0 = check_node(0, port)
    time.sleep(0.5)  # not needed for correctness (node 1 retries), only to show the usual order
    node1 = check_node(1, port)
    (code0, out0), (code1, out1) = verdict(node0), verdict(node1)
    assert code0 == 0 and code1 == 0, out0 + out1
    host = socket.gethostname()
    assert f"cloudddp-check: node 0 ({host}): OK" in out0 and f"checked in: rank 1 {host} (127.0.0.1)" in out0
    assert f"cloudddp-check: node 1 ({host}): OK" in out1 and f"master 127.0.0.1:{port} reachable" in out1
    assert "clock skew +0.0" in out1 or "clock skew -0.0" in out1  # same machine, same clock
    assert "DNS 1/1: 127.0.0.1=127.0.0.1" in out1


def test_a_node_whose_master_does_not_listen_says_connection_refused() -> None:
    code, out = verdict(check_node(1, free_port(), window="2"))
    assert code == 1 and "PROBLEM" in out and "connection refused" in out and "not reachable within 2 s" in out


def test_a_host_that_does_not_resolve_is_named() -> None:
    port = free_port()
    code, out = verdict(check_node(1, port, "--host-map", "x=127.0.0.1", "--master-addr", "no-such-host.invalid",
                                   window="1"))  # fmt: skip
    assert code == 1 and "DNS: 'no-such-host.invalid' does not resolve" in out


def test_node_0_names_the_nodes_that_never_checked_in() -> None:
    code, out = verdict(check_node(0, free_port(), window="1"))
    assert code == 1 and "never checked in within 1 s: rank(s) 1" in out


def test_a_clock_more_than_a_second_off_is_a_problem() -> None:
    # Node 0's side of the exchange, with node 0's clock 5 s ahead of ours.
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.makefile().readline()
            conn.sendall(f"TIME {time.time() + 5:.6f}\n".encode())

    threading.Thread(target=answer, daemon=True).start()
    findings = Findings()
    ask_node_0(ClusterPlan("standalone", node_rank=1, nnodes=2, master_port=port), 5, findings)
    server.close()
    assert len(findings.problems) == 1, findings
    assert re.fullmatch(r"clock skew \+(4\.9\d\d|5\.0\d\d) s vs node 0", findings.problems[0])


@pytest.mark.slow
def test_a_node_that_never_reached_node_0_says_why_when_its_rendezvous_times_out(tmp_path: Path) -> None:
    port = free_port()  # nothing listens: node 0 never started
    node = subprocess.run(
        [PYTHON, "-m", "cloudddp.launcher", "--provider", "standalone", "--nnodes", "2", "--node-rank", "1",
         "--master-addr", "127.0.0.1", "--master-port", str(port), "--rdzv-timeout", "10", "--grace-period", "5",
         str(SOURCES / "allreduce_check.py"), "--out-dir", str(tmp_path)],
        env=clean_env(), capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert node.returncode != 0
    assert f"TCP: master 127.0.0.1:{port}: connection refused" in node.stderr, node.stderr[-2000:]
