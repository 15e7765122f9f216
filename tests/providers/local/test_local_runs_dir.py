"""status, logs and cancel find a local run launched with --runs-dir in that folder (they had no such option: `latest`
was the newest run of ./cloudddp-runs, so `cancel latest` could stop another job)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli


@pytest.mark.process
def test_status_logs_and_cancel_take_the_runs_folder_the_job_was_launched_with(tmp_path: Path) -> None:
    (tmp_path / "quick.py").write_text("print('done here', flush=True)\n")
    first = run_cli("launch", "--nodes", "1", "--emulate", "none", "quick.py", cwd=tmp_path, timeout=300)
    second = run_cli("launch", "--nodes", "1", "--emulate", "none", "--runs-dir", "other", "quick.py", cwd=tmp_path,
                     timeout=300)  # fmt: skip
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    (default_run,) = (tmp_path / "cloudddp-runs").iterdir()
    (other_run,) = (tmp_path / "other").iterdir()
    status = run_cli("status", "latest", "--runs-dir", "other", cwd=tmp_path)
    assert status.returncode == 0 and status.stdout.startswith(f"other/{other_run.name}: SUCCEEDED"), status.stdout
    plain = run_cli("status", "latest", cwd=tmp_path)  # the newest launch, whatever its runs folder (job index)
    assert plain.stdout.startswith(f"{other_run}: SUCCEEDED"), plain.stdout
    default = run_cli("status", "latest", "--runs-dir", "cloudddp-runs", cwd=tmp_path)
    assert default.stdout.startswith(f"cloudddp-runs/{default_run.name}: SUCCEEDED"), default.stdout
    logs = run_cli("logs", "latest", "--runs-dir", "other", cwd=tmp_path)
    assert logs.returncode == 0 and "[node-0] done here" in logs.stdout, logs.stdout + logs.stderr
    cancel = run_cli("cancel", "latest", "--runs-dir", "other", cwd=tmp_path)  # the run in other/, not the default
    assert cancel.stderr == f"error: the local run {other_run.name} already ended (SUCCEEDED); nothing to stop.\n"
    elsewhere = run_cli("status", "latest", "-p", "slurm", "--runs-dir", "other", cwd=tmp_path)
    assert elsewhere.returncode == 2 and "only the local provider keeps its runs in a folder here" in elsewhere.stderr
