"""The launchers' own listeners on IPv6: the fail-fast channel and `--check` listened on IPv4 only, so with
`--master-addr ::1` node 1 never reached node 0's launcher and a failing node 1 never stopped node 0 (which ran on
and exited 0 after torchrun's exit barrier: the failure was lost). And a node whose fail-fast channel never reached
node 0 reported "the rendezvous failed" (SageMaker's FailureReason too), though the rendezvous had met and the
script itself had failed.

Real `cloudddp-launch` processes (torchrun, gloo) on ::1 and 127.0.0.1; the `--check` ones import no torch.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import PYTHON, REPO, clean_env

from cloudddp.launcher.network import listen, peer_address
from cloudddp.providers.local.provider import free_port

# Node 1 fails after the first collective; node 0 would sleep far past any bound below: it ends only when stopped.
SCRIPT = """\
import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
print("node", os.environ["GROUP_RANK"], "past barrier", flush=True)
if os.environ["GROUP_RANK"] == "1":
    sys.stdout.flush()
    os._exit(3)  # not sys.exit: torch 2.14 + gloo can abort in Python's shutdown (pytorch/pytorch#190489)
time.sleep(900)
"""
BOUND = 150.0  # generous: two torchruns on a shared 2-core machine; node 0 alone would sleep 900 s


def ipv6_loopback() -> None:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError as exc:
        pytest.skip(f"this machine has no IPv6 loopback (::1): {exc}")


def free_port_pair() -> int:
    """A port P with P + 1 (the fail-fast channel) free too, on both families."""
    for _ in range(50):
        port = free_port()
        try:
            with listen(port), listen(port + 1):
                return port
        except OSError:
            continue
    raise AssertionError("no two consecutive free ports")


def launcher(rank: int, tmp: Path, master: str, port: int, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:  # fmt: skip
    script = tmp / "fail_after_barrier.py"
    script.write_text(SCRIPT)
    with open(tmp / f"node{rank}.log", "wb") as log:
        return subprocess.Popen(
            [PYTHON, "-m", "cloudddp.launcher", "--nnodes", "2", "--node-rank", str(rank), "--master-addr", master,
             "--master-port", str(port), "--nproc-per-node", "1", "--grace-period", "5", *extra, str(script)],
            cwd=REPO, env=clean_env({"CLOUDDDP_PROVIDER": "standalone", **(env or {})}), stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


def wait_all(nodes: list[subprocess.Popen[bytes]], timeout: float) -> list[int | None]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(node.poll() is None for node in nodes):
        time.sleep(0.1)
    return [node.poll() for node in nodes]


def stop(nodes: list[subprocess.Popen[bytes]]) -> None:
    """End what the test started: SIGTERM to each launcher's session, SIGKILL after a bound."""
    for node in nodes:
        if node.poll() is None:
            os.killpg(node.pid, signal.SIGTERM)
    for node in nodes:
        try:
            node.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait(timeout=30)


@pytest.mark.network
def test_the_listener_takes_ipv6_and_ipv4_connections() -> None:
    ipv6_loopback()
    port = free_port()
    with listen(port) as server:
        for host in ("::1", "127.0.0.1"):
            with socket.create_connection((host, port), timeout=5):
                conn, _ = server.accept()
                with conn:
                    assert peer_address(conn) == host  # an IPv4 peer as 127.0.0.1, not ::ffff:127.0.0.1


@pytest.mark.network
def test_check_on_ipv6_reaches_node_0() -> None:
    ipv6_loopback()
    port = free_port()
    nodes = [subprocess.Popen(
        [PYTHON, "-m", "cloudddp.launcher", "--check", "--check-window", "20", "--provider", "standalone", "--nnodes",
         "2", "--node-rank", str(rank), "--master-addr", "::1", "--master-port", str(port)],
        cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) for rank in range(2)]  # fmt: skip
    outputs = [node.communicate(timeout=60)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    assert "checked in: rank 1" in outputs[0] and "(::1)" in outputs[0], outputs[0]
    assert f"master ::1:{port} reachable" in outputs[1], outputs[1]


@pytest.mark.slow
def test_a_node_failing_on_ipv6_stops_node_0_with_its_code(tmp_path: Path) -> None:
    ipv6_loopback()
    port = free_port_pair()
    nodes = [launcher(rank, tmp_path, "::1", port) for rank in range(2)]
    try:
        codes = wait_all(nodes, BOUND)
    finally:
        stop(nodes)
    logs = [(tmp_path / f"node{rank}.log").read_text(errors="replace") for rank in range(2)]
    assert "node 0 past barrier" in logs[0] and "node 1 past barrier" in logs[1], logs  # the rendezvous met
    assert codes == [3, 3], logs  # old code: node 0 still sleeping at the bound (never told), node 1 3
    assert "stopping this node: node 1 failed (exit code 3)" in logs[0], logs[0]
    assert "never reached node 0's launcher" not in logs[1] and "rendezvous failed" not in logs[1], logs[1]


@pytest.mark.slow
def test_a_node_that_never_reached_node_0s_launcher_reports_its_scripts_exit_not_a_rendezvous_failure(
    tmp_path: Path,
) -> None:
    """Node 1's fail-fast channel points at a closed port: the rendezvous meets, node 1's script exits 3. Its
    reason (SageMaker's FailureReason, output/failure) is torchrun's exit, not a rendezvous failure."""
    port = free_port_pair()
    closed = free_port()
    sagemaker = {"SM_HOSTS": '["algo-1","algo-2"]', "SM_INPUT_CONFIG_DIR": str(tmp_path / "none"),
                 "SM_NUM_GPUS": "0", "CLOUDDDP_HOST_MAP": "algo-1=127.0.0.1,algo-2=127.0.0.1",
                 "CLOUDDDP_PROVIDER": "sagemaker"}  # fmt: skip
    nodes = []
    for rank in range(2):
        (tmp_path / f"output{rank}").mkdir()
        env = {**sagemaker, "SM_CURRENT_HOST": f"algo-{rank + 1}", "SM_OUTPUT_DIR": str(tmp_path / f"output{rank}")}
        extra = ("--control-port", str(closed)) if rank == 1 else ()
        nodes.append(launcher(rank, tmp_path, "algo-1", port, *extra, env=env))
    try:
        codes = wait_all(nodes[1:], BOUND)
    finally:
        stop(nodes)  # node 0 was never told (its channel never heard from node 1): the test stops it
    log = (tmp_path / "node1.log").read_text(errors="replace")
    assert "node 1 past barrier" in log and codes == [3], log
    assert f"never reached node 0's launcher on 127.0.0.1:{closed}" in log, log  # said, as a note
    assert "rendezvous failed" not in log, log
    reason = (tmp_path / "output1" / "failure").read_text()
    assert "torchrun exited with code 3 on node 1" in reason and "rendezvous" not in reason, reason
