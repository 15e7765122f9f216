"""Every launch is recorded in the user's job index (cloudddp/job_index.py): `status`, `logs` and `cancel` find a
job by id or name without `-p`, `latest` is the newest job on any provider, and `cloudddp list` shows them with
their state now, a provider that does not answer costing one short deadline."""

from __future__ import annotations

import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import cli, run_cli

from cloudddp import CloudDDPError, job_index
from cloudddp import providers as providers_module
from cloudddp.providers.base import JobStatus


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.1)


def test_the_index_finds_the_newest_job_an_id_and_a_unique_name() -> None:
    job_index.record("local", "/runs/a-1", "alpha", "cloudddp launch a.py")
    time.sleep(0.01)
    job_index.record("sagemaker", "beta-20261128-120000", "beta", "cloudddp launch -p sagemaker b.py")
    assert job_index.find("latest").job_id == "beta-20261128-120000"  # type: ignore[union-attr]
    assert job_index.find("latest", "local").job_id == "/runs/a-1"  # type: ignore[union-attr]
    assert job_index.find("/runs/a-1").provider == "local"  # type: ignore[union-attr]
    assert job_index.find("beta").provider == "sagemaker"  # type: ignore[union-attr]
    assert job_index.find("gamma") is None
    job_index.record("oci", "ocid1.jobrun.x", "beta", "")
    with pytest.raises(CloudDDPError, match=r"2 jobs are named 'beta'; give one of their ids:\n.*ocid1.jobrun.x"):
        job_index.find("beta")
    path = job_index.index_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_damaged_index_or_row_is_skipped_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    job_index.record("local", "/runs/good", "good", "")
    with sqlite3.connect(job_index.index_path()) as db:  # SQLite stores whatever it is given: a text time
        db.execute("INSERT INTO jobs (job_id, provider, name, submitted) VALUES ('bad', 'local', 'bad', 'soon')")
    assert [entry.job_id for entry in job_index.entries()] == ["/runs/good"]
    assert "skipped a damaged entry ('bad')" in capsys.readouterr().err
    job_index.index_path().write_bytes(b"not a database at all" * 100)
    assert job_index.entries() == [] and job_index.find("latest") is None
    job_index.record("local", "/runs/x", "x", "")  # a launch goes on
    assert "could not record the job in the job index" in capsys.readouterr().err


class Answering:
    """A provider whose status answers at once, or (hang=True) never within a test."""

    def __init__(self, name: str, hang: bool = False) -> None:
        self.name, self.hang, self.cancelled = name, hang, []

    def status(self, job_id: str) -> JobStatus:
        if self.hang:
            threading.Event().wait(30)
        return JobStatus(job_id=job_id, state="RUNNING")

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Answering]]:
    fakes = {"sagemaker": Answering("sagemaker"), "oci": Answering("oci", hang=True)}
    real = providers_module.get_provider
    monkeypatch.setattr(providers_module, "get_provider", lambda name, **kw: fakes.get(name) or real(name, **kw))
    yield fakes


def test_status_and_cancel_find_the_provider_without_p(remote: dict[str, Answering]) -> None:
    job_index.record("sagemaker", "beta-20261128-120000", "beta", "")
    shown = cli("status", "beta")
    assert shown.returncode == 0 and shown.stdout.startswith("beta-20261128-120000: RUNNING"), shown.stderr
    assert cli("status", "latest").stdout.startswith("beta-20261128-120000: RUNNING")
    cancelled = cli("cancel", "latest")
    assert cancelled.returncode == 0 and "asked sagemaker to stop beta-20261128-120000" in cancelled.stdout
    assert remote["sagemaker"].cancelled == ["beta-20261128-120000"]
    unknown = cli("status", "nope")  # not indexed: the local provider's, as before the index
    assert unknown.returncode == 2 and "no local run 'nope'" in unknown.stderr


def test_list_shows_each_jobs_state_and_a_silent_provider_costs_the_deadline_once(
    remote: dict[str, Answering],
) -> None:
    for number in range(3):
        job_index.record("oci", f"ocid1.run.{number}", f"silent-{number}", "")
    job_index.record("sagemaker", "beta-1", "beta", "")
    started = time.monotonic()
    listed = cli("list", "--deadline", "1")
    took = time.monotonic() - started
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PROVIDER", "STATE", "SUBMITTED", "JOB"]
    assert lines[1].split()[:3] == ["beta", "sagemaker", "RUNNING"]
    assert [line.split()[0] for line in lines[2:]] == ["silent-2", "silent-1", "silent-0"]
    assert all("unknown (never seen)" in line for line in lines[2:])
    assert took < 5, f"three silent jobs took {took:.1f} s: asked one after another?"
    assert job_index.find("beta").state == "RUNNING"  # type: ignore[union-attr]  # cached for the next list


def test_list_without_jobs_says_so() -> None:
    listed = cli("list")
    assert listed.returncode == 0 and listed.stdout.startswith("no jobs launched from here yet")


@pytest.mark.process
def test_a_local_launch_is_listed_and_found_by_name_from_anywhere(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "sleeper.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(300)\n")
    launched = run_cli("launch", "--emulate", "none", "--name", "sleepy", "--no-wait",
                       "--runs-dir", str(tmp_path / "runs"), str(tmp_path / "src" / "sleeper.py"))  # fmt: skip
    assert launched.returncode == 0, launched.stdout + launched.stderr
    elsewhere = tmp_path / "elsewhere"  # not the launch's folder, no --runs-dir: the index knows where it runs
    elsewhere.mkdir()
    run = next((tmp_path / "runs").iterdir())
    try:
        log = run / "logs" / "node-0.log"
        wait_until(lambda: log.exists() and "up" in log.read_text(errors="replace"), 120, "the script to start")
        status = run_cli("status", "sleepy", cwd=elsewhere)
        assert status.returncode == 0 and status.stdout.startswith(f"{run}: RUNNING"), status.stdout + status.stderr
        listed = run_cli("list", cwd=elsewhere)
        assert listed.stdout.splitlines()[1].split()[:3] == ["sleepy", "local", "RUNNING"], listed.stdout
        assert run_cli("cancel", "sleepy", cwd=elsewhere).returncode == 0
        wait_until(lambda: '"state": "STOPPED"' in (run / "state.json").read_text(), 60, "the run to stop")
    finally:
        run_cli("cancel", str(run))  # a failed assertion leaves nothing running (exit 2 once it has stopped)
