"""`cloudddp launch --provider local`: real multi-node DDP training on this machine.

What a user cares about: the model learns, DDP keeps every replica identical, a
stopped job resumes from its checkpoint, the SageMaker emulation is faithful enough
that the same script runs unchanged there, and bad input never starts anything.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from helpers import CLI_FOR_CTRL_C, PYTHON, REPO, SOURCES, clean_env, cli, run_cli

from cloudddp.launcher.supervisor import is_running

TRAIN = str(SOURCES / "train_ddp.py")
CHECK = str(SOURCES / "allreduce_check.py")
# The demo data is easy on purpose: every configuration below reaches this band.
ACCURACY_BAND = 0.90


def run_folder(stdout: str) -> Path:
    match = re.search(r"submitted (\S+) \(local\)", stdout)
    assert match, stdout
    return Path(match.group(1))


def fingerprints(run: Path) -> set[str]:
    return {p.read_text().strip() for p in run.glob("nodes/*/model/fingerprint-rank*.txt")}


# -- fast: rendering and refusing --------------------------------------------------------


def test_dry_run_prints_the_nodes_environment_and_creates_nothing(tmp_path: Path, small_demo_data: Path) -> None:
    runs = tmp_path / "runs"
    result = cli("launch", "--nodes", "2", "--runs-dir", str(runs), "-i", f"train={small_demo_data}",
                     "-e", "API_TOKEN=hunter2", "-H", "epochs=2", "--dry-run", TRAIN)  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = yaml.safe_load(result.stdout)
    nodes = document["request"]["nodes"]
    assert [n["name"] for n in nodes] == ["algo-1", "algo-2"]
    assert nodes[1]["env"]["SM_CURRENT_HOST"] == "algo-2" and json.loads(nodes[1]["env"]["SM_HOSTS"]) == [
        "algo-1",
        "algo-2",
    ]
    config = nodes[0]["files"][f"{nodes[0]['root']}/input/config/hyperparameters.json"]
    # JSON-encoded values, as the SageMaker SDK writes them (-H keeps "2" a string), with the SDK's own keys
    assert config == {"epochs": '"2"', "sagemaker_program": '"train_ddp.py"',
                      "sagemaker_submit_directory": json.dumps(str(SOURCES.resolve())),
                      "sagemaker_job_name": json.dumps(nodes[0]["env"]["TRAINING_JOB_NAME"])}  # fmt: skip
    assert "hunter2" not in result.stdout and nodes[0]["env"]["API_TOKEN"] == "***"
    assert not runs.exists()


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["no/such/train.py"], ["no/such/train.py"]),
        (["-i", "train=/no/such/data", TRAIN], ["inputs.train", "/no/such/data"]),
        (["--nodes", "0", TRAIN], ["nodes", "0"]),
        (["--emulate", "borg", TRAIN], ["local.emulate", "borg"]),
        (["--env", "NOEQUALS", TRAIN], ["--env", "NOEQUALS"]),
    ],
    ids=["missing-script", "missing-input", "zero-nodes", "unknown-emulation", "bad-env-pair"],
)
def test_bad_input_is_named_exits_2_and_starts_nothing(tmp_path: Path, args: list[str], names: list[str]) -> None:
    runs = tmp_path / "runs"
    result = cli("launch", "--runs-dir", str(runs), *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    for name in names:
        assert name in result.stderr
    assert not runs.exists()


def test_yaml_spec_with_an_unknown_field_names_it(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(f"entry_point: train_ddp.py\nsource_dir: {SOURCES}\nnodes: 2\nnodez: 3\n")
    result = cli("launch", "-f", str(spec), "--runs-dir", str(tmp_path / "runs"))
    assert result.returncode == 2 and "nodez" in result.stderr and "unknown field" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_flags_override_the_yaml_spec(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(f"entry_point: allreduce_check.py\nsource_dir: {SOURCES}\nnodes: 3\nlocal:\n  emulate: slurm\n")
    result = cli("launch", "-f", str(spec), "--nodes", "2", "--dry-run")
    assert result.returncode == 0, result.stderr
    nodes = yaml.safe_load(result.stdout)["request"]["nodes"]
    assert [n["env"]["SLURM_JOB_NODELIST"] for n in nodes] == ["node[1-2]", "node[1-2]"]


# -- slow: real training -----------------------------------------------------------------


@pytest.fixture(scope="module")
def two_node_run(
    tmp_path_factory: pytest.TempPathFactory, demo_data: Path
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """2 nodes x 1 process, SageMaker emulation, epochs given only as a hyperparameter."""
    runs = tmp_path_factory.mktemp("runs")
    result = run_cli("launch", "--nodes", "2", "--runs-dir", str(runs), "-i", f"train={demo_data}",
                     "-H", "epochs=5", "-e", "MY_SECRET=swordfish", TRAIN)  # fmt: skip
    return result, run_folder(result.stdout)


@pytest.mark.slow
@pytest.mark.torchrun
@pytest.mark.training
def test_two_nodes_learn_and_hold_identical_weights(
    two_node_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, run = two_node_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    metrics = json.loads((run / "model" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["epoch"] == 5
    assert metrics["val_acc"] >= ACCURACY_BAND
    assert len(list(run.glob("nodes/*/model/fingerprint-rank*.txt"))) == 2
    assert len(fingerprints(run)) == 1, "the two nodes ended with different weights"
    assert "val_acc=" in result.stdout and str(run / "model") in result.stdout
    # Node lines are prefixed; only rank 0 prints epoch summaries.
    assert re.search(r"^\[algo-1\] epoch=5/5 ", result.stdout, re.M)
    assert not re.search(r"^\[algo-2\] epoch=", result.stdout, re.M)


@pytest.mark.slow
def test_sagemaker_emulation_is_what_the_script_relies_on(
    two_node_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, run = two_node_run
    request = yaml.safe_load((run / "request.yaml").read_text())["request"]
    for node in request["nodes"]:
        # No cloudddp-specific hints: data, model folder and epochs came from SM_* and the config files.
        assert not any(k.startswith("CLOUDDDP_CHANNEL") or k == "CLOUDDDP_MODEL_DIR" for k in node["env"])
        assert node["command"][-1] == "train_ddp.py"
    assert (run / "nodes/algo-1/model/model.pt").is_file()
    assert (run / "nodes/algo-1/input/data/train/train").is_dir()
    assert json.loads((run / "nodes/algo-2/input/config/resourceconfig.json").read_text())["current_host"] == "algo-2"
    assert (run / "nodes/algo-1/checkpoints/checkpoint.pt").is_file()  # checkpointconfig.json's LocalPath
    assert "epochs=5" in result.stdout  # from hyperparameters.json, not from the command line
    assert "swordfish" not in (run / "request.yaml").read_text() + result.stdout


@pytest.mark.slow
def test_one_node_with_two_processes_lands_in_the_same_band(tmp_path: Path, demo_data: Path) -> None:
    output = tmp_path / "exported-model"
    result = run_cli("launch", "--nodes", "1", "--nproc-per-node", "2", "--runs-dir", str(tmp_path), "--output", str(output),
                     "-i", f"train={demo_data}", TRAIN, "--", "--epochs", "5")  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    assert (output / "model.pt").is_file() and f"model: {output}" in result.stdout
    run = run_folder(result.stdout)
    metrics = json.loads((run / "model" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["val_acc"] >= ACCURACY_BAND
    assert len(fingerprints(run)) == 1


def wait_for_line(run: Path, pattern: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = "".join(p.read_text() for p in (run / "logs").glob("*.log")) if (run / "logs").is_dir() else ""
        if re.search(pattern, logs, re.M):
            return
        time.sleep(0.3)
    raise AssertionError(f"never saw {pattern!r}")


@pytest.mark.slow
def test_a_stopped_job_resumes_from_its_checkpoint(tmp_path: Path, demo_data: Path) -> None:
    ckpt = tmp_path / "ckpt"
    common = [
        "--nodes",
        "2",
        "--runs-dir",
        str(tmp_path / "runs"),
        "-i",
        f"train={demo_data}",
        "--checkpoint",
        str(ckpt),
    ]
    first = run_cli("launch", *common, "--no-wait", TRAIN, "--", "--epochs", "5", "--epoch-sleep", "2")
    assert first.returncode == 0, first.stderr
    run = run_folder(first.stdout)
    wait_for_line(run, r"epoch=1/5")
    assert run_cli("cancel", str(run)).returncode == 0
    deadline = time.monotonic() + 120
    while (status := run_cli("status", str(run))).stdout.find("STOPPED") < 0:
        assert time.monotonic() < deadline, status.stdout
        time.sleep(0.5)
    saved = saved_position(ckpt / "checkpoint.pt")  # the stop made rank 0 checkpoint at the next step
    assert 2 <= saved["epoch"] <= 5 and saved["step"] > 0, saved  # past epoch 1, before the end
    second = run_cli("launch", *common, TRAIN, "--", "--epochs", "5")
    assert second.returncode == 0, second.stdout[-3000:]
    if saved["consumed"]:
        resumed = f"at step {saved['step']} (epoch {saved['epoch']}, {saved['consumed']} samples of it done)"
    else:
        resumed = f"after epoch {saved['epoch'] - 1}; starting at epoch {saved['epoch']}"
    assert resumed in second.stdout, second.stdout[-3000:]
    for done in range(1, saved["epoch"]):
        assert f"epoch={done}/5" not in second.stdout  # no finished epoch was trained twice
    metrics = json.loads((run_folder(second.stdout) / "model" / "metrics.json").read_text())
    assert metrics["epoch"] == 5 and metrics["val_acc"] >= ACCURACY_BAND


def saved_position(path: Path) -> dict[str, int]:
    """The position (epoch being trained, samples of it consumed, global step) a checkpoint records."""
    code = f"import json, torch; print(json.dumps(torch.load({str(path)!r}, weights_only=False)['position']))"
    return json.loads(subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True).stdout)


@pytest.mark.slow
@pytest.mark.parametrize("emulation", ["oci", "kubeflow", "slurm", "none"])
@pytest.mark.torchrun
def test_every_emulated_platform_runs_a_two_node_all_reduce(tmp_path: Path, emulation: str) -> None:
    out = tmp_path / "out"
    result = run_cli("launch", "--nodes", "2", "--emulate", emulation, "--runs-dir", str(tmp_path / "runs"),
                     CHECK, "--", "--out-dir", str(out))  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    sums = [json.loads((out / f"rank{r}.json").read_text())["sum"] for r in range(2)]
    assert sums == [3.0, 3.0]
    expected = {
        "oci": "provider=oci",
        "kubeflow": "provider=kubeflow",
        "slurm": "provider=slurm",
        "none": "provider=standalone",
    }
    assert expected[emulation] in result.stdout


@pytest.mark.slow
def test_ctrl_c_stops_every_node_and_the_exit_code_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [PYTHON, *CLI_FOR_CTRL_C, "launch", "--nodes", "2", "--runs-dir", str(tmp_path / "runs"),
         CHECK, "--", "--out-dir", str(out), "--sleep", "120"],
        cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (out / "rank1.json").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    try:
        output, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # show what the CLI printed: a bare timeout says nothing about where it stuck
        proc.kill()
        pytest.fail(f"cloudddp launch had not exited 120 s after SIGINT; it printed:\n{proc.communicate()[0][-4000:]}")
    assert proc.returncode == 130, output
    assert "job STOPPED" in output
    pids = [int(p.read_text()) for p in out.glob("pid-rank*.txt")]
    assert pids and not [pid for pid in pids if is_running(pid)]


@pytest.mark.slow
def test_status_and_logs_work_on_a_finished_run(tmp_path: Path) -> None:
    result = run_cli(
        "launch", "--nodes", "2", "--runs-dir", str(tmp_path), CHECK, "--", "--out-dir", str(tmp_path / "o")
    )
    assert result.returncode == 0
    run = run_folder(result.stdout)
    status = run_cli("status", str(run))
    assert "SUCCEEDED" in status.stdout and "algo-2: exit 0" in status.stdout
    logs = run_cli("logs", str(run))
    assert "[algo-1] rank 0/2: all_reduce sum=3" in logs.stdout and "[algo-2] rank 1/2" in logs.stdout


@pytest.mark.slow
def test_a_job_past_its_max_runtime_is_stopped(tmp_path: Path) -> None:
    result = run_cli("launch", "--nodes", "2", "--runs-dir", str(tmp_path), "--max-runtime", "5",
                     CHECK, "--", "--out-dir", str(tmp_path / "o"), "--sleep", "120")  # fmt: skip
    assert result.returncode != 0
    assert "job STOPPED: max_runtime of 5 s reached" in result.stdout


def test_two_launches_in_the_same_second_get_different_run_folders(tmp_path: Path) -> None:
    from cloudddp.providers.local.provider import unused_name

    (tmp_path / "job-20261122-101500").mkdir()
    (tmp_path / "job-20261122-101500-2").mkdir()
    assert unused_name(tmp_path, "job-20261122-101500") == "job-20261122-101500-3"
