"""Every launch is recorded in the user's job index (cloudddp/job_index.py): `status`, `logs` and `cancel` find a
job by id or name without `-p`, `latest` is the newest job on any provider, and `cloudddp list` shows them with
their state, nodes, submission time and duration now, a provider that does not answer costing one short deadline."""

from __future__ import annotations

import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import cli, run_cli, wait_until

from cloudddp import CloudDDPError, job_index
from cloudddp import providers as providers_module
from cloudddp.job_list import span
from cloudddp.providers.base import JobStatus


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


# The index as cloudddp wrote it before it kept nodes and end times.
OLD_SCHEMA = """CREATE TABLE jobs (
    job_id TEXT NOT NULL, provider TEXT NOT NULL, name TEXT NOT NULL, submitted REAL NOT NULL,
    command TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT '', checked REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (provider, job_id))"""


def test_an_index_from_before_nodes_and_end_times_gets_them_and_keeps_its_jobs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = job_index.index_path()
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as db:
        db.execute(OLD_SCHEMA)
        db.execute("INSERT INTO jobs (job_id, provider, name, submitted, state) VALUES ('/runs/old', 'local', 'old',"
                   " 1700000000, 'SUCCEEDED')")  # fmt: skip
    job_index.record("local", "/runs/new", "new", "", nodes=2)
    (new, old) = job_index.entries()
    assert (new.name, new.nodes, old.name, old.nodes, old.finished) == ("new", 2, "old", None, None)
    with sqlite3.connect(path) as db:  # a damaged value in a new column: that row is skipped, as any other
        db.execute("UPDATE jobs SET nodes = 'two' WHERE job_id = '/runs/new'")
    assert [entry.job_id for entry in job_index.entries()] == ["/runs/old"]
    assert "skipped a damaged entry ('/runs/new')" in capsys.readouterr().err


def test_the_first_time_a_job_is_seen_finished_is_its_end() -> None:
    job_index.record("sagemaker", "job-1", "one", "", nodes=4)
    job_index.remember_state("sagemaker", "job-1", "RUNNING")
    assert job_index.entries()[0].finished is None
    job_index.remember_state("sagemaker", "job-1", "SUCCEEDED")
    ended = job_index.entries()[0].finished
    assert ended is not None
    job_index.remember_state("sagemaker", "job-1", "FAILED")  # seen finished again later: the end stays
    assert job_index.entries()[0].finished == ended
    job_index.remember_state("sagemaker", "job-1", "RUNNING")  # requeued: running again, no end
    assert job_index.entries()[0].finished is None


class Answering:
    """A provider whose status answers at once (with `state`), or (hang=True) never within a test."""

    def __init__(self, name: str, hang: bool = False, state: str = "RUNNING") -> None:
        self.name, self.hang, self.state, self.cancelled = name, hang, state, []

    def status(self, job_id: str) -> JobStatus:
        if self.hang:
            threading.Event().wait(30)
        return JobStatus(job_id=job_id, state=self.state)

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        yield f"[algo-1] {job_id} followed={follow}"


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Answering]]:
    fakes = {"sagemaker": Answering("sagemaker"), "oci": Answering("oci", hang=True),
             "kubernetes": Answering("kubernetes", state="SUCCEEDED")}  # fmt: skip
    real = providers_module.get_provider
    monkeypatch.setattr(providers_module, "get_provider", lambda name, **kw: fakes.get(name) or real(name, **kw))
    yield fakes


def test_status_and_cancel_find_the_provider_without_p(remote: dict[str, Answering]) -> None:
    job_index.record("sagemaker", "beta-20261128-120000", "beta", "")
    shown = cli("status", "beta")
    assert shown.returncode == 0 and shown.stdout.startswith("beta-20261128-120000: RUNNING"), shown.stderr
    assert cli("status", "latest").stdout.startswith("beta-20261128-120000: RUNNING")
    assert cli("status").stdout == shown.stdout  # status and logs read the newest job without an argument
    assert cli("logs").stdout == "[algo-1] beta-20261128-120000 followed=False\n"
    assert cli("cancel").returncode == 2 and remote["sagemaker"].cancelled == []  # stopping names its job
    cancelled = cli("cancel", "latest")
    assert cancelled.returncode == 0 and "asked sagemaker to stop beta-20261128-120000" in cancelled.stdout
    assert remote["sagemaker"].cancelled == ["beta-20261128-120000"]
    for flag in ("-f", "-F", "--follow"):  # -f as tail, kubectl and docker logs take it
        assert cli("logs", "beta", flag).stdout == "[algo-1] beta-20261128-120000 followed=True\n"
    unknown = cli("status", "nope")  # not indexed: the local provider's, as before the index
    assert unknown.returncode == 2 and "no local run 'nope'" in unknown.stderr


def test_list_shows_each_jobs_state_and_a_silent_provider_costs_the_deadline_once(
    remote: dict[str, Answering],
) -> None:
    for number in range(9):  # more than one provider asks at a time (job_list.ASKING_PER_PROVIDER): each answered
        job_index.record("sagemaker", f"many-{number}", f"many-{number}", "")
    for number in range(3):
        job_index.record("oci", f"ocid1.run.{number}", f"silent-{number}", "")
    job_index.record("sagemaker", "beta-1", "beta", "")
    started = time.monotonic()
    listed = cli("list", "--deadline", "1")
    took = time.monotonic() - started
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PROVIDER", "STATE", "NODES", "STARTED", "DURATION", "JOB"]
    assert lines[1].split()[:3] == ["beta", "sagemaker", "RUNNING"]
    assert [line.split()[0] for line in lines[2:5]] == ["silent-2", "silent-1", "silent-0"]
    assert all("unknown (never seen)" in line for line in lines[2:5])
    assert [line.split()[:3] for line in lines[5:]] == [[f"many-{n}", "sagemaker", "RUNNING"] for n in range(8, -1, -1)]
    assert took < 5, f"three silent jobs took {took:.1f} s: asked one after another?"
    assert job_index.find("beta").state == "RUNNING"  # type: ignore[union-attr]  # cached for the next list


def submitted_ago(job_id: str, seconds: float, finished_after: float | None = None) -> None:
    """Move a job's submission (and end) into the past, as if it had been launched `seconds` ago."""
    submitted = time.time() - seconds
    finished = None if finished_after is None else submitted + finished_after
    with sqlite3.connect(job_index.index_path()) as db:
        db.execute("UPDATE jobs SET submitted = ?, finished = ? WHERE job_id = ?", (submitted, finished, job_id))


def test_list_shows_nodes_start_and_duration_newest_first(remote: dict[str, Answering]) -> None:
    job_index.record("oci", "ocid1.run.silent", "silent", "", nodes=3)
    job_index.record("kubernetes", "pytorchjobs/training/done", "done", "", nodes=2)
    job_index.record("sagemaker", "on-1", "on", "", nodes=4, metrics={"loss": r"loss=([0-9.]+)"})  # listed as others
    job_index.record("local", "/runs/ended", "ended", "")  # launched before the index kept nodes
    submitted_ago("ocid1.run.silent", 7 * 3600)
    submitted_ago("pytorchjobs/training/done", 6 * 3600)
    submitted_ago("on-1", 3700)  # 1 h 01 min until 1 h 02 min
    submitted_ago("/runs/ended", 600, finished_after=90)
    with sqlite3.connect(job_index.index_path()) as db:
        db.execute("UPDATE jobs SET state = 'SUCCEEDED' WHERE job_id = '/runs/ended'")  # not asked again
    listed = cli("list", "--deadline", "1")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    # Cells by the header's columns: [name, provider and state], nodes, started, duration, job (may be empty).
    starts = [0, *(header.index(title) for title in ("NODES", "STARTED", "DURATION", "JOB"))]
    shown = {row.split()[0]: [row[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
             for row in rows}  # fmt: skip
    assert [row.split()[0] for row in rows] == ["ended", "on", "done", "silent"]  # newest first
    ended, on, done, silent = shown["ended"], shown["on"], shown["done"], shown["silent"]
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(job_index.find("ended").submitted))  # type: ignore[union-attr]
    assert ended[1:] == ["", started, "1 min 30 s", "/runs/ended"]
    assert on[0].split()[-1] == "RUNNING" and on[1] == "4" and on[3] == "1 h 01 min"
    assert done[0].split()[2] == "SUCCEEDED" and done[1] == "2" and done[3] == "6 h 00 min"  # first seen ended now
    assert "unknown (never seen)" in silent[0] and silent[1] == "3" and silent[3] == ""  # no answer: unknown
    assert job_index.find("done").finished is not None  # type: ignore[union-attr]  # its end, for the next list


@pytest.mark.parametrize(("seconds", "shown"), [(None, ""), (42.9, "42 s"), (425, "7 min 05 s"),
                                               (11040, "3 h 04 min"), (183600, "2 d 3 h")])  # fmt: skip
def test_a_duration_reads_in_the_units_that_fit_it(seconds: float | None, shown: str) -> None:
    assert span(seconds) == shown


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
        assert listed.stdout.splitlines()[1].split()[:4] == ["sleepy", "local", "RUNNING", "1"], listed.stdout
        assert run_cli("cancel", "sleepy", cwd=elsewhere).returncode == 0
        wait_until(lambda: '"state": "STOPPED"' in (run / "state.json").read_text(), 60, "the run to stop")
    finally:
        run_cli("cancel", str(run))  # a failed assertion leaves nothing running (exit 2 once it has stopped)
