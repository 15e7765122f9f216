"""A local run's folder is its owner's alone, and nothing in it holds a secret value in clear or lets one be
checked offline: the folder was 0755, a SageMaker emulation's hyperparameters.json 0644 with `api_key` in clear,
and secret-digests.json kept its hashing key beside each digest (a guessable password was recovered from a
four-word list). Now: the folder 0700, its files 0600, logs masked as they are written, no digests."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from helpers import clean_env, run_cli
from test_local_cancel_latest import wait_until

SECRET = "hunter2-correct-horse"
SCRIPT = "import os, json\nprint('token is', os.environ['HF_TOKEN'], flush=True)\nprint('hps', os.environ['SM_HPS'])\n"


def read_as_nobody(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat", str(path)],
                          capture_output=True, text=True, env=clean_env(), timeout=30)  # fmt: skip


@pytest.mark.process
def test_a_run_folder_is_private_and_holds_no_secret_but_the_jobs_own_input(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "job.py").write_text(SCRIPT)
    runs = tmp_path / "runs"
    result = run_cli("launch", "-p", "local", "--emulate", "sagemaker", "--runs-dir", str(runs),
                     "-H", f"api_key={SECRET}", "-e", f"HF_TOKEN={SECRET}", str(tmp_path / "src" / "job.py"))  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    (run,) = runs.iterdir()
    wait_until(lambda: "SUCCEEDED" in (run / "state.json").read_text(), 30, "the runner to record the end")

    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    files = [path for path in run.rglob("*") if path.is_file() and not path.is_symlink()]
    hyperparameters = next(path for path in files if path.name == "hyperparameters.json")
    assert SECRET in hyperparameters.read_text()  # the job's own input: it needs the value
    # What cloudddp writes is 0600; the job's own files (its model, its launcher's exit record) keep the user's umask,
    # inside the 0700 folder.
    written = ["request.yaml", "state.json", "runner.log", "runner.pid", "logs/*", "nodes/*/input/config/*"]
    ours = {path for pattern in written for path in run.glob(pattern)}
    assert hyperparameters in ours and len(ours) > 8
    loose = {str(path.relative_to(run)): oct(stat.S_IMODE(path.stat().st_mode)) for path in ours
             if stat.S_IMODE(path.stat().st_mode) & 0o077}  # fmt: skip
    assert loose == {}, f"files other users could read: {loose}"
    assert not (run / "secret-digests.json").exists()
    log = next((run / "logs").glob("*.log")).read_text()
    assert "token is ***" in log and SECRET not in log, log  # masked as written: no shell needs to know the value
    holding = [str(path.relative_to(run)) for path in files if SECRET in path.read_text(errors="replace")]
    assert holding == [str(hyperparameters.relative_to(run))]

    if os.geteuid() == 0 and shutil.which("setpriv"):  # CI runs as root, which ignores modes: try as nobody
        denied = read_as_nobody(hyperparameters)
        assert denied.returncode != 0 and "Permission denied" in denied.stderr, denied.stdout + denied.stderr


def test_the_model_copied_to_output_gets_the_users_modes_not_the_run_folders(tmp_path: Path) -> None:
    from cloudddp.providers.local.runner import Runner

    model = tmp_path / "run" / "model"
    (model / "sub").mkdir(parents=True, mode=0o700)
    model.chmod(0o700)
    (model / "sub" / "model.pt").write_bytes(b"weights")
    (model / "sub" / "model.pt").chmod(0o600)
    output = tmp_path / "output"
    runner = Runner(tmp_path / "run", {"nodes": [{"model_dir": str(model)}], "output": str(output), "umask": 0o022})
    runner.state["state"] = "SUCCEEDED"
    runner.copy_output()
    assert (output / "sub" / "model.pt").read_bytes() == b"weights" and runner.state["output"] == str(output)
    modes = {path.relative_to(tmp_path).as_posix(): oct(stat.S_IMODE(path.stat().st_mode))
             for path in (output, output / "sub", output / "sub" / "model.pt")}  # fmt: skip
    assert modes == {"output": "0o755", "output/sub": "0o755", "output/sub/model.pt": "0o644"}
