"""Failing fast, for real: two `cloudddp-launch` nodes on 127.0.0.1 with real torchrun and gloo.

The script (sources/allreduce_check.py) installs a SIGTERM handler, as training scripts that
checkpoint do; while blocked in `init_process_group` that handler cannot run, so torchrun alone
waits its 30 s before SIGKILL. The launcher, told by the fail-fast channel that the job is lost,
kills the workers itself after 2 s (supervisor.ABORT_GRACE).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import PYTHON, REPO, SOURCES, clean_env, run_cli

from cloudddp.launcher.supervisor import is_running
from cloudddp.providers.local.provider import free_port

pytestmark = pytest.mark.slow
CHECK = str(SOURCES / "allreduce_check.py")
# torchrun's own SIGTERM->SIGKILL wait is 30 s; anything well below it proves the launcher stopped the node.
STOP_BOUND = 15.0


def start_node(
    rank: int, port: int, tmp: Path, *script_args: str, launcher_args: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    env = {"SM_HOSTS": '["algo-1","algo-2"]', "SM_CURRENT_HOST": f"algo-{rank + 1}", "SM_INPUT_CONFIG_DIR": str(tmp / "none"),
           "SM_NUM_GPUS": "0", "CLOUDDDP_HOST_MAP": "algo-1=127.0.0.1,algo-2=127.0.0.1"}  # fmt: skip
    with open(tmp / f"node{rank}.log", "wb") as log:
        return subprocess.Popen(
            [PYTHON, "-m", "cloudddp.launcher", "--master-port", str(port), *launcher_args, CHECK, "--out-dir", str(tmp / "out"),
             *script_args],
            cwd=REPO, env=clean_env(env), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def wait_all(nodes: list[subprocess.Popen[bytes]], timeout: float) -> dict[int, tuple[int, float]]:
    """rank -> (exit code, monotonic time it was seen to exit)."""
    ended: dict[int, tuple[int, float]] = {}
    deadline = time.monotonic() + timeout
    while len(ended) < len(nodes):
        assert time.monotonic() < deadline, f"nodes still running after {timeout} s: {ended}"
        for rank, node in enumerate(nodes):
            if rank not in ended and node.poll() is not None:
                ended[rank] = (node.returncode, time.monotonic())
        time.sleep(0.02)
    return ended


def no_worker_left(tmp: Path) -> bool:
    pids = [int(p.read_text()) for p in (tmp / "out").glob("pid-rank*.txt")]
    return not [pid for pid in pids if is_running(pid)]


# With a space in the rendezvous id, the fail-fast channel's HELLO never matched and node 0 waited for ever.
@pytest.mark.parametrize("launcher_args", [(), ("--rdzv-id", "my job")], ids=["platform id", "id with a space"])
def test_a_node_failing_before_init_stops_the_other_within_seconds_with_its_code(
    tmp_path: Path, launcher_args: tuple[str, ...]
) -> None:
    port = free_port()
    nodes = [start_node(rank, port, tmp_path, "--fail-rank", "1", "--fail-code", "3", launcher_args=launcher_args)
             for rank in range(2)]  # fmt: skip
    ended = wait_all(nodes, timeout=120)
    logs = [(tmp_path / f"node{r}.log").read_text() for r in range(2)]
    failing_code, failed_at = ended[1]
    assert failing_code == 3, logs  # the script's own exit code, not torchrun's 1
    assert "failing on purpose" in logs[1]
    code, stopped_at = ended[0]
    # Node 0 was blocked in init_process_group waiting for rank 1; it stops soon after, with node 1's code.
    assert stopped_at - failed_at < STOP_BOUND, (stopped_at - failed_at, logs[0])
    assert code == failing_code, logs[0]
    assert "node 1 failed" in logs[0]
    assert no_worker_left(tmp_path)


def two_nodes_past_their_allreduce(tmp_path: Path) -> list[subprocess.Popen[bytes]]:
    """Two nodes whose workers did their all-reduce and now sleep: the whole job is up."""
    port = free_port()
    nodes = [start_node(rank, port, tmp_path, "--sleep", "120") for rank in range(2)]
    deadline = time.monotonic() + 90
    while not all((tmp_path / "out" / f"rank{r}.json").exists() for r in range(2)):
        assert time.monotonic() < deadline, "the all-reduce never finished"
        time.sleep(0.1)
    return nodes


def test_a_node_whose_launcher_is_killed_mid_job_stops_the_other_within_seconds(tmp_path: Path) -> None:
    nodes = two_nodes_past_their_allreduce(tmp_path)
    nodes[1].send_signal(signal.SIGKILL)  # the node vanishes: no DONE, no FAIL
    killed_at = time.monotonic()
    code = nodes[0].wait(timeout=60)
    assert time.monotonic() - killed_at < STOP_BOUND
    assert code != 0
    assert "went away" in (tmp_path / "node0.log").read_text()
    # Node 1's torchrun gets SIGTERM from the kernel (parent-death signal) and ends its worker: waited for, not
    # slept on (a fixed 1 s was timing luck on a loaded machine).
    deadline = time.monotonic() + 30
    while not no_worker_left(tmp_path):
        assert time.monotonic() < deadline, "node 1's worker outlived its killed launcher by 30 s"
        time.sleep(0.1)


def test_a_node_stopped_by_sigterm_is_reported_stopped_not_failed_by_the_others(tmp_path: Path) -> None:
    # A cancel, max-runtime or spot stop reaches the nodes one at a time: the others' logs said "node 1 failed
    # (exit code 143)" although nothing failed.
    nodes = two_nodes_past_their_allreduce(tmp_path)
    nodes[1].send_signal(signal.SIGTERM)
    ended = wait_all(nodes, timeout=60)
    log = (tmp_path / "node0.log").read_text()
    assert ended[1][0] == 143 and "stopping this node: node 1 was stopped (exit code 143, SIGTERM)" in log, log
    assert "node 1 failed" not in log
    assert no_worker_left(tmp_path)


def test_a_local_job_reports_the_failing_nodes_exit_code_not_a_kill(tmp_path: Path) -> None:
    result = run_cli(
        "launch", "--provider", "local", "--nodes", "2", "--name", "failfast", "--runs-dir", str(tmp_path / "runs"),
        "--source-dir", str(SOURCES), "allreduce_check.py", "--", "--fail-rank", "1", "--fail-code", "3",
        "--out-dir", str(tmp_path / "out"), timeout=180,
    )  # fmt: skip
    run_dir = next((tmp_path / "runs").iterdir())
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"] == "FAILED", (result.stdout, result.stderr)
    failing = state["first_failure"]
    assert failing == "algo-2"
    codes = {name: node["exit_code"] for name, node in state["nodes"].items()}
    assert state["exit_code"] == codes["algo-2"] == 3, codes  # the failing script's code, not 143
    assert codes["algo-1"] == codes["algo-2"], codes  # node 1 stopped because of node 2, with its code
    assert result.returncode == state["exit_code"]


# After the rendezvous the stopped node ends tens of milliseconds after the failing one, often within one poll of
# the runner: state.json named whichever came first in node order (algo-1), and the reason listed both as failed.
FAIL_AFTER_RENDEZVOUS = """import os, sys, time
if os.environ["RANK"] == "1":
    time.sleep(1)
    sys.exit(7)
time.sleep(300)  # node 0 only ends when the fail-fast channel stops it
"""


def test_a_local_job_names_the_node_that_failed_after_the_rendezvous_not_the_one_it_stopped(tmp_path: Path) -> None:
    (tmp_path / "fail_after.py").write_text(FAIL_AFTER_RENDEZVOUS)
    result = run_cli("launch", "--provider", "local", "--nodes", "2", "--runs-dir", str(tmp_path / "runs"),
                     "--source-dir", str(tmp_path), "fail_after.py", timeout=180)  # fmt: skip
    run_dir = next((tmp_path / "runs").iterdir())
    state = json.loads((run_dir / "state.json").read_text())
    logs = (run_dir / "logs" / "algo-1.log").read_text()
    assert "stopping this node: node 1 failed (exit code 7)" in logs  # algo-1 was stopped, it did not fail
    assert state["state"] == "FAILED" and result.returncode == state["exit_code"] == 7, result.stdout[-2000:]
    assert state["first_failure"] == "algo-2"
    # The reason names the failing node alone as a failure; algo-1 only as stopped because of it.
    assert state["reason"] == "node(s) algo-2 exited with code(s) 7 (algo-1 stopped because of it)"
    assert f"job FAILED: {state['reason']}" in result.stdout
    assert "algo-1: exit 7 (stopped because algo-2 failed)" in run_cli("status", str(run_dir)).stdout
