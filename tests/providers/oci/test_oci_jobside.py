"""The job side as OCI runs it: the node script, late cluster metadata, and a whole launch."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import PYTHON, REPO, clean_env, run_cli
from helpers.oci_loopback_server import COMPARTMENT, IMAGE, LOG_GROUP, PROJECT, FakeOCI, ThrowawayKey

from cloudddp.providers.local.provider import free_port
from cloudddp.providers.oci.node import ENTRYPOINT, NODE_SCRIPT, NODE_SCRIPT_NAME

VENV_BIN = str(Path(PYTHON).parent)


def node_env(tmp_path: Path, rank: int, size: int, metadata: Path, data: Path) -> dict[str, str]:
    node = tmp_path / f"node-{rank}"
    return clean_env({
        "NODE_RANK": str(rank), "INITIAL_CLUSTER_SIZE": str(size), "CLUSTER_NODES_METADATA_FILE": str(metadata),
        "CLOUDDDP_CHANNEL_TRAIN": str(data), "CLOUDDDP_MODEL_DIR": str(node / "model"),
        "CLOUDDDP_CHECKPOINT_DIR": str(node / "checkpoints"), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
    })  # fmt: skip


@pytest.mark.slow
def test_two_nodes_train_when_the_metadata_file_fills_in_late(tmp_path: Path, small_demo_data: Path) -> None:
    metadata = tmp_path / "cluster_nodes_metadata.json"
    metadata.write_text(json.dumps([{"Rank": 0, "IPAddress": "127.0.0.1"}]))
    port = str(free_port())
    nodes = [
        subprocess.Popen(
            [PYTHON, "-m", "cloudddp.launcher", "--master-port", port, "sources/train_ddp.py", "--epochs", "1"],
            cwd=REPO, env=node_env(tmp_path, rank, 2, metadata, small_demo_data),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for rank in range(2)
    ]  # fmt: skip
    time.sleep(3)  # node 1 comes up 3 s after node 0
    metadata.write_text(json.dumps([{"Rank": 0, "IPAddress": "127.0.0.1"}, {"Rank": 1, "IPAddress": "127.0.0.1"}]))
    outputs = [node.communicate(timeout=300)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    assert "node 0/2" in outputs[0] and "node 1/2" in outputs[1]
    assert (tmp_path / "node-0" / "model" / "model.pt").is_file()
    fingerprints = {(tmp_path / f"node-{r}" / "model" / f"fingerprint-rank{r}.txt").read_text() for r in range(2)}
    assert len(fingerprints) == 1  # both replicas ended with the same weights


@pytest.mark.process
def test_a_metadata_file_that_never_completes_times_out_naming_the_missing_rank(
    tmp_path: Path, small_demo_data: Path
) -> None:
    metadata = tmp_path / "cluster_nodes_metadata.json"
    metadata.write_text(json.dumps([{"Rank": 0, "IPAddress": "127.0.0.1"}, {"Rank": 2, "IPAddress": "127.0.0.1"}]))
    started = time.monotonic()
    result = subprocess.run(
        [PYTHON, "-m", "cloudddp.launcher", "--metadata-timeout", "3", "sources/train_ddp.py"],
        cwd=REPO, env=node_env(tmp_path, 0, 3, metadata, small_demo_data), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "still lacks rank(s) 1 of INITIAL_CLUSTER_SIZE=3 after 3 s" in result.stderr
    assert str(metadata) in result.stderr
    assert 3 <= time.monotonic() - started < 30


def fake_archive(folder: Path, bootstrap: str) -> Path:
    """A source archive with the real node script and a stand-in bootstrap (no torch needed)."""
    path = folder / "sourcedir.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in (("cloudddp_bootstrap.py", bootstrap), (NODE_SCRIPT_NAME, NODE_SCRIPT)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def run_node_script(
    tmp_path: Path, bootstrap: str, *args: str, rank: int = 0, source: str | None = None, path: str = VENV_BIN
) -> subprocess.Popen[str]:
    env = clean_env({
        "PATH": f"{path}:{os.environ['PATH']}", "NODE_RANK": str(rank),
        "CLOUDDDP_SOURCE": source or str(fake_archive(tmp_path, bootstrap)), "CLOUDDDP_NODE_ROOT": str(tmp_path / "node"),
        "CLOUDDDP_OUTPUT_DIR": str(tmp_path / "mnt" / "output"),
    })  # fmt: skip
    return subprocess.Popen([*ENTRYPOINT, *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip


@pytest.mark.process
def test_node_script_prefixes_lines_keeps_the_exit_code_and_copies_the_model_even_on_failure(tmp_path: Path) -> None:
    bootstrap = (
        "import os, sys\n"
        "print('args', sys.argv[1:])\n"
        "print('to stderr', file=sys.stderr)\n"
        "open(os.path.join(os.environ['CLOUDDDP_MODEL_DIR'], 'partial.txt'), 'w').write('half')\n"
        "sys.exit(3)\n"
    )
    node = run_node_script(tmp_path, bootstrap, "--epochs", "2")
    output = node.communicate(timeout=60)[0]
    assert node.returncode == 3
    lines = output.splitlines()
    assert "[node-0] args ['--epochs', '2']" in lines and "[node-0] to stderr" in lines
    assert lines[-1] == "[node-0] cloudddp: node 0 exited with code 3"
    assert (tmp_path / "mnt" / "output" / "partial.txt").read_text() == "half"
    assert (tmp_path / "mnt" / "output" / "logs" / "node-0.log").read_text() == "args ['--epochs', '2']\nto stderr\n"


@pytest.mark.process
def test_node_script_forwards_sigterm_and_still_writes_its_last_line(tmp_path: Path) -> None:
    bootstrap = (
        "import signal, sys, time\n"
        "def stop(*_):\n    print('checkpoint saved on SIGTERM', flush=True)\n    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('training', flush=True)\n"
        "time.sleep(60)\n"
    )
    node = run_node_script(tmp_path, bootstrap, rank=1)
    assert node.stdout is not None
    assert node.stdout.readline().strip() == "[node-1] training"
    node.send_signal(signal.SIGTERM)
    rest = node.communicate(timeout=30)[0].splitlines()
    assert node.returncode == 143
    assert rest == ["[node-1] checkpoint saved on SIGTERM", "[node-1] cloudddp: node 1 exited with code 143"]
    # Every node keeps its log in the output folder; only node 0 copies its model folder.
    output = tmp_path / "mnt" / "output"
    assert sorted(str(p.relative_to(output)) for p in output.rglob("*") if p.is_file()) == ["logs/node-1.log"]


@pytest.mark.process
def test_node_script_stopped_during_start_up_never_starts_the_training(tmp_path: Path) -> None:
    """SIGTERM while the node script is still setting up (a cancel right after the run starts) is not lost.

    A `mkdir` shim holds the node script in its set-up (the mkdir of the model folder) until
    the test has sent SIGTERM: no timing involved.
    """
    shims = tmp_path / "shims"
    shims.mkdir()
    real_mkdir = shutil.which("mkdir")
    (shims / "mkdir").write_text(
        "#!/bin/sh\n"
        f'case "$*" in *model*) : > "{tmp_path}/in-setup"; while [ ! -e "{tmp_path}/go" ]; do sleep 0.01; done;; esac\n'
        f'exec {real_mkdir} "$@"\n'
    )
    (shims / "mkdir").chmod(0o755)
    bootstrap = f"open({str(tmp_path / 'training-ran')!r}, 'w').write('yes')\n"
    node = run_node_script(tmp_path, bootstrap, rank=1, path=f"{shims}:{VENV_BIN}")
    deadline = time.monotonic() + 60
    while not (tmp_path / "in-setup").exists():
        assert node.poll() is None and time.monotonic() < deadline, node.communicate()[0]
        time.sleep(0.01)
    node.send_signal(signal.SIGTERM)  # the node's main process, as a container stop does
    (tmp_path / "go").touch()
    output = node.communicate(timeout=60)[0].splitlines()
    assert node.returncode == 143
    assert output == ["[node-1] cloudddp: stopped before the training started",
                      "[node-1] cloudddp: node 1 exited with code 143"]  # fmt: skip
    assert not (tmp_path / "training-ran").exists()


@pytest.mark.process
def test_a_stop_that_reaches_the_launcher_while_it_starts_the_script_still_stops_it(tmp_path: Path) -> None:
    """A cancel right after an OCI run starts: SIGTERM came while the launcher was starting the script.

    The signal handler is called the way the signal would call it, before `run()` has a child
    (no timing): the script must still get SIGTERM, not run to its end.
    """
    (tmp_path / "train.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    code = (
        "import signal, sys, time\n"
        "from cloudddp.launcher.supervisor import Supervisor\n"
        f"supervisor = Supervisor([sys.executable, {str(tmp_path / 'train.py')!r}], {{}}, grace_period=5,\n"
        "                        workers_are_grandchildren=False)\n"
        "supervisor._on_signal(signal.SIGTERM, None)\n"
        "started = time.monotonic()\n"
        "code = supervisor.run()\n"
        "print('exit', code, 'after', round(time.monotonic() - started))\n"
    )
    result = subprocess.run(
        [PYTHON, "-c", code], cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    exit_code, seconds = result.stdout.split()[-3], int(result.stdout.split()[-1])
    assert exit_code == "143" and seconds < 30  # stopped, not the script's 60 s


@pytest.mark.process
def test_node_script_explains_a_missing_archive(tmp_path: Path) -> None:
    node = run_node_script(tmp_path, "", source=str(tmp_path / "mnt" / "cloudddp" / "sourcedir.tar.gz"))
    output = node.communicate(timeout=30)[0]
    assert node.returncode == 2
    assert "[node-0] cloudddp: cannot unpack" in output and "is the Object Storage mount there?" in output


@pytest.fixture
def execute_server(tmp_path: Path) -> Iterator[tuple[FakeOCI, Path]]:
    key = ThrowawayKey.generate()
    config = key.write_config(tmp_path / ".oci")
    env = clean_env({"PATH": f"{VENV_BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"})
    with FakeOCI(key, run_root=tmp_path / "service", node_env=env, node_start_delay=3.0) as server:
        yield server, config


@pytest.mark.slow
def test_cloudddp_launch_on_oci_trains_on_two_nodes_and_leaves_the_model_in_object_storage(
    tmp_path: Path, small_demo_data: Path, execute_server: tuple[FakeOCI, Path]
) -> None:
    server, config = execute_server
    result = run_cli(
        "launch", "--provider", "oci", "--nodes", "2", "-i", f"train={small_demo_data}",
        "--compartment", COMPARTMENT, "--project", PROJECT, "--image", IMAGE, "--work-dir", "oci://bkt@ns/cloudddp",
        "--log-group", LOG_GROUP, "--metric", "loss=loss=([0-9.]+)", "sources/train_ddp.py", "--", "--epochs", "1",
        env={"CLOUDDDP_OCI_SERVICE_ENDPOINT": server.url, "OCI_CONFIG_FILE": str(config)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "cloudddp: submitted ocid1.datasciencejobrun." in out
    assert "[oci] job run IN_PROGRESS (node groups: cloudddp: ACTIVE)" in out
    assert "[node-0] cloudddp: provider=oci node 0/2" in out and "[node-1] cloudddp: provider=oci node 1/2" in out
    assert "[node-0] epoch=1/1" in out
    assert (
        "[node-0] cloudddp: node 0 exited with code 0" in out and "[node-1] cloudddp: node 1 exited with code 0" in out
    )
    assert "cloudddp: job SUCCEEDED" in out
    outputs = [n for n in server.object_names() if "/output/" in n]
    assert any(n.endswith("/output/model.pt") for n in outputs) and any(
        n.endswith("/output/metrics.json") for n in outputs
    )
    assert any(n.endswith("/output/logs/node-1.log") for n in outputs)
    # --metric asked each node's launcher for a history (CLOUDDDP_METRICS); the node script copied it to the output
    # (rank 0 prints the epoch lines: node 1 found no value and wrote no history)
    (history,) = [n for n in outputs if "/output/metrics/metrics-" in n]
    assert any(n.endswith("/output/metrics/metric-definitions.json") for n in outputs)
    (row,) = [json.loads(line) for line in server.objects[("ns", "bkt", history)].data.decode().splitlines()]
    assert (row["metric"], row["rank"]) == ("loss", 0) and row["value"] > 0 and isinstance(row["timestamp"], float)
    assert history.endswith(f"/metrics-{row['node']}.jsonl") and f"[node-0] epoch=1/1 loss={row['value']:.4f}" in out
    assert server.signature_failures == []
