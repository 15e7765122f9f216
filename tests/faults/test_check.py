"""`cloudddp-launch --check`: DNS of every host, the master port from each node, clock skew against
node 0, one verdict line per node; and the same checks printed by themselves when a job's rendezvous
fails (static and c10d), naming the endpoint and the check that failed.

Real launchers on 127.0.0.1 (the check imports no torch, so those are quick; the rendezvous ones run
torchrun with a 5 s timeout and are marked slow).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import PYTHON, SOURCES, clean_env

from cloudddp.cluster.plan import ClusterPlan
from cloudddp.launcher.diagnostics import Findings, ask_node_0, rendezvous_failure, rendezvous_verdict
from cloudddp.launcher.peers import PeerWatch
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


@pytest.mark.network
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


@pytest.mark.network
def test_a_node_whose_master_does_not_listen_says_connection_refused() -> None:
    code, out = verdict(check_node(1, free_port(), window="2"))
    assert code == 1 and "PROBLEM" in out and "connection refused" in out and "not reachable within 2 s" in out


@pytest.mark.network
def test_a_host_that_does_not_resolve_is_named() -> None:
    port = free_port()
    code, out = verdict(check_node(1, port, "--host-map", "x=127.0.0.1", "--master-addr", "no-such-host.invalid",
                                   window="1"))  # fmt: skip
    assert code == 1 and "DNS: 'no-such-host.invalid' does not resolve" in out


@pytest.mark.network
def test_node_0_names_the_nodes_that_never_checked_in() -> None:
    code, out = verdict(check_node(0, free_port(), window="1"))
    assert code == 1 and "never checked in within 1 s: rank(s) 1" in out


@pytest.mark.network
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


def launcher(rank: int, *args: str, out_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "-m", "cloudddp.launcher", "--provider", "standalone", "--node-rank", str(rank), "--grace-period", "5",
         "--master-addr", "127.0.0.1", *args, str(SOURCES / "allreduce_check.py"), "--out-dir", str(out_dir)],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.slow
def test_a_static_rendezvous_that_times_out_says_which_check_failed(tmp_path: Path) -> None:
    # Node 1 was given the wrong master port: nothing listens there. Both rendezvous time out after 5 s.
    port, wrong = free_port(), free_port()
    nodes = [launcher(0, "--nnodes", "2", "--master-port", str(port), "--rdzv-timeout", "5", out_dir=tmp_path),
             launcher(1, "--nnodes", "2", "--master-port", str(wrong), "--rdzv-timeout", "5", out_dir=tmp_path)]  # fmt: skip
    (_, err0), (_, err1) = (node.communicate(timeout=240) for node in nodes)
    assert nodes[0].returncode != 0 and nodes[1].returncode != 0
    host = socket.gethostname()
    # Node 1: torchrun's own error, then the checks, the failing one first.
    assert f"the rendezvous failed (DistNetworkError: The client socket has timed out after 5000ms while trying to " \
           f"connect to (127.0.0.1, {wrong}).) on node 1" in err1, err1[-3000:]  # fmt: skip
    assert (f"cloudddp-check: node 1 ({host}): PROBLEM: TCP: rendezvous 127.0.0.1:{wrong}: connection refused "
            f"(nothing listens there: node 0 not started, or another port); DNS 1/1: 127.0.0.1=127.0.0.1; clock skew "
            f"vs node 0 not measured (node 0's launcher never answered)") in err1  # fmt: skip
    # Node 0 hosted the store: it names the node that never came and does not blame its own port.
    assert "the rendezvous failed (DistStoreError: Timed out after" in err0 and "1/2 clients joined" in err0, err0
    assert "rank(s) 1" in err0 and f"cloudddp-check: node 0 ({host}): OK:" in err0
    assert f"this node hosted the rendezvous store on 127.0.0.1:{port}" in err0


@pytest.mark.slow
def test_a_c10d_rendezvous_that_cannot_reach_its_store_says_so(tmp_path: Path) -> None:
    wrong = free_port()
    node = launcher(1, "--nnodes", "2:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{wrong}",
                    "--torchrun-arg=--rdzv-conf=is_host=false,read_timeout=5", out_dir=tmp_path)  # fmt: skip
    _, err = node.communicate(timeout=240)
    assert node.returncode != 0
    assert "the rendezvous failed (RendezvousConnectionError: The connection to the C10d store has failed." in err
    assert f"PROBLEM: TCP: rendezvous 127.0.0.1:{wrong}: connection refused" in err, err[-3000:]
    assert "clock skew vs node 0 not measured (elastic jobs have no side channel to node 0)" in err


def test_a_failed_script_is_no_rendezvous_failure(tmp_path: Path) -> None:
    error = tmp_path / "error.json"
    assert rendezvous_failure(str(error)) is None  # torchrun wrote nothing
    # torchrun's @record (torch/distributed/elastic/multiprocessing/errors/error_handler.py record_exception).
    error.write_text(json.dumps({"message": {"message": "RendezvousTimeoutError: ", "extraInfo": {}}}))
    assert rendezvous_failure(str(error)) == "RendezvousTimeoutError:"
    # A worker's own error, copied up by dump_error_file when the script failed.
    error.write_text(json.dumps({"message": {"message": "ValueError: bad batch", "errorCode": 1}}))
    assert rendezvous_failure(str(error)) is None
    lost_store = {"message": "DistNetworkError: Connection reset by peer", "errorCode": 1}  # mid-training
    error.write_text(json.dumps({"message": lost_store}))
    assert rendezvous_failure(str(error)) is None
    error.write_text("not json")
    assert rendezvous_failure(str(error)) is None


@pytest.mark.network
def test_the_verdict_names_the_endpoint_and_a_skewed_clock() -> None:
    port = free_port()
    plan = ClusterPlan("standalone", node_rank=1, nnodes=2, master_addr="127.0.0.1", master_port=port)
    verdict = rendezvous_verdict(plan, {}, hosts_store=False, clock_skew=5.0, no_clock="")
    assert f"PROBLEM: TCP: rendezvous 127.0.0.1:{port}: connection refused" in verdict
    assert "clock skew +5.000 s vs node 0" in verdict.split("PROBLEM: ")[1].split("; DNS")[0]  # a problem, too
    with socket.create_server(("127.0.0.1", port)):
        verdict = rendezvous_verdict(plan, {}, hosts_store=False, clock_skew=0.01, no_clock="")
    assert f"OK: DNS 1/1: 127.0.0.1=127.0.0.1; rendezvous 127.0.0.1:{port} reachable; clock skew +0.010 s" in verdict


@pytest.mark.network
def test_the_verdict_of_node_0_says_when_another_process_holds_its_port() -> None:
    port = free_port()
    plan = ClusterPlan("slurm", node_rank=0, nnodes=2, master_addr="127.0.0.1", master_port=port)
    plan.sources["master_port"] = "derived from SLURM_JOB_ID"
    verdict = rendezvous_verdict(plan, {}, hosts_store=True, clock_skew=None, no_clock="node 0")
    assert f"OK: DNS 1/1: 127.0.0.1=127.0.0.1; this node hosted the rendezvous store on 127.0.0.1:{port}" in verdict
    with socket.create_server(("127.0.0.1", port)):
        verdict = rendezvous_verdict(plan, {}, hosts_store=True, clock_skew=None, no_clock="node 0")
    assert f"PROBLEM: port {port} (derived from SLURM_JOB_ID) is in use by another process on this node" in verdict
    assert "--master-port PORT" in verdict


@pytest.mark.network
def test_node_0s_launcher_answers_hello_with_its_clock() -> None:
    port = free_port()
    node0 = PeerWatch(0, 2, "127.0.0.1", port, "job", lambda *_: None)
    node1 = PeerWatch(1, 2, "127.0.0.1", port, "job", lambda *_: None)
    node0.start()
    node1.start()
    deadline = time.monotonic() + 20
    while node1.clock_skew is None and time.monotonic() < deadline:
        time.sleep(0.05)
    node1.report_exit(0)
    node0.report_exit(0)
    assert node1.clock_skew is not None and abs(node1.clock_skew) < 0.5  # one machine, one clock


@pytest.mark.network
def test_the_verdict_connects_to_a_bracketed_ipv6_endpoint() -> None:
    """`[::1]:PORT`, as torch's parse_rendezvous_endpoint reads it: the host is ::1, not "[::1]"."""
    try:
        server = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback on this machine ({exc})")
    with server:
        port = server.getsockname()[1]
        plan = ClusterPlan("kubeflow", node_rank=1, nnodes=2, master_addr="::1", master_port=port,
                           rdzv_backend="c10d", rdzv_endpoint=f"[::1]:{port}")  # fmt: skip
        verdict = rendezvous_verdict(plan, {}, hosts_store=False, clock_skew=0.0, no_clock="")
    assert f"rendezvous [::1]:{port} reachable" in verdict and "PROBLEM" not in verdict, verdict
