"""Two `cloudddp-launch` processes as two nodes on 127.0.0.1, real torchrun and gloo.

Each platform's environment contract is given as that platform would set it; the
script does a real all-reduce and both nodes must see the same, correct sum.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import PYTHON, REPO, SOURCES, clean_env

from cloudddp.cluster.plan import port_from_job_id
from cloudddp.launcher.supervisor import is_running
from cloudddp.providers.local.provider import free_port

pytestmark = pytest.mark.slow
CHECK = str(SOURCES / "allreduce_check.py")


def start_node(env: dict[str, str], *args: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as handle:
        return subprocess.Popen(
            [PYTHON, "-m", "cloudddp.launcher", *args], cwd=REPO, env=clean_env(env),
            stdout=handle, stderr=subprocess.STDOUT,
        )  # fmt: skip


def sagemaker_env(rank: int, tmp: Path) -> dict[str, str]:
    return {"SM_HOSTS": '["algo-1","algo-2"]', "SM_CURRENT_HOST": f"algo-{rank + 1}", "SM_INPUT_CONFIG_DIR": str(tmp / "none"),
            "SM_NUM_GPUS": "0", "CLOUDDDP_HOST_MAP": "algo-1=127.0.0.1,algo-2=127.0.0.1"}  # fmt: skip


def slurm_env(rank: int, tmp: Path) -> dict[str, str]:
    # One task per node of `srun -N2` (the step variables as tests/cluster/fixtures/slurm/ shows them).
    return {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu-[07-08]", "SLURM_NNODES": "2", "SLURM_NODEID": str(rank),
            "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "gpu-[07-08]", "SLURM_STEP_NUM_NODES": "2",
            "SLURM_PROCID": str(rank), "CLOUDDDP_HOST_MAP": "gpu-07=127.0.0.1"}  # fmt: skip


def oci_env(rank: int, tmp: Path) -> dict[str, str]:
    metadata = tmp / "cluster.json"
    metadata.write_text(json.dumps([{"Rank": 0, "IPAddress": "127.0.0.1"}, {"Rank": 1, "IPAddress": "127.0.0.1"}]))
    return {"NODE_RANK": str(rank), "INITIAL_CLUSTER_SIZE": "2", "CLUSTER_NODES_METADATA_FILE": str(metadata)}


def run_two_nodes(
    make_env: Callable[[int, Path], dict[str, str]], tmp: Path, *script_args: str, extra: tuple[str, ...] = ()
) -> list[subprocess.Popen[bytes]]:
    port = str(free_port())
    return [
        start_node(
            make_env(rank, tmp),
            "--master-port",
            port,
            *extra,
            CHECK,
            "--out-dir",
            str(tmp / "out"),
            *script_args,
            log=tmp / f"node{rank}.log",
        )
        for rank in range(2)
    ]


@pytest.mark.parametrize("make_env", [sagemaker_env, oci_env, slurm_env], ids=["sagemaker", "oci", "slurm"])
def test_two_nodes_all_reduce_across_the_platform_contract(
    make_env: Callable[[int, Path], dict[str, str]], tmp_path: Path
) -> None:
    nodes = run_two_nodes(make_env, tmp_path)
    codes = [node.wait(timeout=120) for node in nodes]
    logs = [(tmp_path / f"node{r}.log").read_text() for r in range(2)]
    assert codes == [0, 0], logs
    results = [json.loads((tmp_path / "out" / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["sum"] for r in results] == [3.0, 3.0]
    assert [r["group_rank"] for r in results] == [0, 1]
    assert "node 0/2" in logs[0] and "node 1/2" in logs[1]


def test_one_node_failing_fails_both_and_leaves_no_process(tmp_path: Path) -> None:
    started = time.monotonic()
    nodes = run_two_nodes(sagemaker_env, tmp_path, "--fail-rank", "1", "--fail-code", "3")
    codes = [node.wait(timeout=120) for node in nodes]
    assert time.monotonic() - started < 90
    assert all(code != 0 for code in codes), codes
    pids = [int(p.read_text()) for p in (tmp_path / "out").glob("pid-rank*.txt")]
    assert len(pids) == 2
    assert [pid for pid in pids if is_running(pid)] == []


def test_sigterm_to_a_launcher_reaches_the_script_and_exits_143(tmp_path: Path) -> None:
    nodes = run_two_nodes(sagemaker_env, tmp_path, "--sleep", "60")
    out = tmp_path / "out"
    deadline = time.monotonic() + 90
    while not (out / "rank0.json").exists() or not (out / "rank1.json").exists():
        assert time.monotonic() < deadline, "the all-reduce never finished"
        time.sleep(0.2)
    nodes[0].send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not (out / "usr1-rank0.txt").exists():
        assert time.monotonic() < deadline, "SIGUSR1 did not reach the script"
        time.sleep(0.1)
    nodes[0].send_signal(signal.SIGTERM)
    assert nodes[0].wait(timeout=60) == 143
    assert (out / "signal-rank0.txt").read_text().strip() == str(int(signal.SIGTERM))
    nodes[1].send_signal(signal.SIGTERM)
    nodes[1].wait(timeout=60)
    pids = [int(p.read_text()) for p in out.glob("pid-rank*.txt")]
    assert [pid for pid in pids if is_running(pid)] == []


def test_oci_nodes_wait_for_a_metadata_file_that_fills_in_late(tmp_path: Path) -> None:
    metadata = tmp_path / "cluster.json"
    port = str(free_port())
    env = lambda r: {"NODE_RANK": str(r), "INITIAL_CLUSTER_SIZE": "2", "CLUSTER_NODES_METADATA_FILE": str(metadata)}  # noqa: E731
    metadata.write_text(json.dumps([{"Rank": 0, "IPAddress": "127.0.0.1"}]))
    nodes = [start_node(env(r), "--master-port", port, CHECK, "--out-dir", str(tmp_path / "out"), log=tmp_path / f"n{r}.log")
             for r in range(2)]  # fmt: skip
    time.sleep(3)
    assert not (tmp_path / "out" / "rank0.json").exists()  # nobody started before the cluster was complete
    metadata.write_text(json.dumps([{"Rank": 0, "IPAddress": "127.0.0.1"}, {"Rank": 1, "IPAddress": "127.0.0.1"}]))
    assert [n.wait(timeout=120) for n in nodes] == [0, 0]
    assert json.loads((tmp_path / "out" / "rank1.json").read_text())["sum"] == 3.0


def test_oci_metadata_that_never_completes_names_the_missing_rank(tmp_path: Path) -> None:
    metadata = tmp_path / "cluster.json"
    metadata.write_text(json.dumps([{"Rank": 0, "IPAddress": "127.0.0.1"}]))
    env = {"NODE_RANK": "0", "INITIAL_CLUSTER_SIZE": "3", "CLUSTER_NODES_METADATA_FILE": str(metadata)}
    result = subprocess.run([PYTHON, "-m", "cloudddp.launcher", "--metadata-timeout", "2", CHECK],
                            env=clean_env(env), capture_output=True, text=True, timeout=60, cwd=REPO)  # fmt: skip
    assert result.returncode == 2
    assert "rank(s) 1, 2" in result.stderr and str(metadata) in result.stderr and "Traceback" not in result.stderr
    assert os.environ.get("NODE_RANK") is None


@pytest.mark.parametrize("torchrun_args", [(), ("--torchrun-arg=--tee=3",)], ids=["default", "tee"])
def test_torchrun_leaves_no_log_folder_behind_unless_the_user_asked_for_log_files(
    tmp_path: Path, torchrun_args: tuple[str, ...]
) -> None:
    """torchrun's default log folder is a fresh /tmp/torchelastic_* that it never removes (one per node and run).
    The launcher points it into its scratch folder, removed on exit; with --tee (or --redirects, --log-dir) the
    workers' log files are the user's, kept where torchrun puts them."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    nodes = run_two_nodes(lambda r, t: {**sagemaker_env(r, t), "TMPDIR": str(temp)}, tmp_path, extra=torchrun_args)
    assert [node.wait(timeout=120) for node in nodes] == [0, 0], [p.read_text() for p in tmp_path.glob("node*.log")]
    assert json.loads((tmp_path / "out" / "rank1.json").read_text())["sum"] == 3.0
    left = sorted(p.relative_to(temp).as_posix() for p in temp.rglob("*.log"))
    if torchrun_args:  # each node's worker output, in its own torchelastic_* folder
        assert len(list(temp.glob("torchelastic_*"))) == 2 and len(left) == 4, left  # stdout and stderr per node
    else:
        # torch's compile cache (torchinductor_<user>, one shared folder reused by every run) appears whenever
        # something imports torch._dynamo; it is not a run's litter (the fresh-clone CI at 8f6f9e6 met it once).
        assert [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")] == []


def slurm_job_env(job_id: int, nodes: int, rank: int) -> dict[str, str]:
    nodelist = "gpu-[07-08]" if nodes == 2 else "gpu-07"
    return {"SLURM_JOB_ID": str(job_id), "SLURM_NODEID": str(rank), "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank),
            "SLURM_STEP_NODELIST": nodelist, "SLURM_STEP_NUM_NODES": str(nodes), "CLOUDDDP_HOST_MAP": "gpu-07=127.0.0.1"}  # fmt: skip


def job_id_with_free_ports() -> int:
    """A Slurm job id J whose ports and J+1's (master, fail-fast) are free here, so only the two jobs meet."""
    for job_id in range(7000, 13000, 7):
        first = port_from_job_id(str(job_id))
        if all(port_is_free(port) for port in {first, first + 1, port_from_job_id(str(job_id + 1))}):
            return job_id
    pytest.skip("no two consecutive job ids with free ports on this machine")


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_consecutive_slurm_jobs_sharing_their_first_node_both_train(tmp_path: Path) -> None:
    """Job J waits on its master port and its fail-fast channel (master + 1) for its second node while job J+1
    starts on the same first node: J+1's port must be neither (it was J's channel with ports of stride 1)."""
    job_id = job_id_with_free_ports()
    out = tmp_path / "out"
    waiting = start_node(slurm_job_env(job_id, 2, 0), CHECK, "--out-dir", str(out / "first"), log=tmp_path / "j0.log")
    channel = port_from_job_id(str(job_id)) + 1
    deadline = time.monotonic() + 90
    while port_is_free(channel):  # the first job's node 0 is up once its fail-fast channel listens
        assert waiting.poll() is None and time.monotonic() < deadline, (tmp_path / "j0.log").read_text()
        time.sleep(0.1)
    second = start_node(
        slurm_job_env(job_id + 1, 1, 0), CHECK, "--out-dir", str(out / "second"), log=tmp_path / "k.log"
    )
    assert second.wait(timeout=120) == 0, (tmp_path / "k.log").read_text()
    assert json.loads((out / "second" / "rank0.json").read_text())["sum"] == 1.0
    last = start_node(slurm_job_env(job_id, 2, 1), CHECK, "--out-dir", str(out / "first"), log=tmp_path / "j1.log")
    assert [waiting.wait(timeout=120), last.wait(timeout=120)] == [0, 0], (tmp_path / "j0.log").read_text()
    assert [json.loads((out / "first" / f"rank{r}.json").read_text())["sum"] for r in range(2)] == [3.0, 3.0]
