"""The Slurm provider's follow-up calls against stand-ins for scontrol and scancel that print what Slurm 22.05
prints: cancel checks the job first (scancel is silent about unknown and finished jobs), a waiting job's pending
reason is shown once per change, and sbatch runs with --export=ALL (a site's SBATCH_EXPORT=NONE would keep the
secrets passed by name and the venv from the job)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import SOURCES, run_cli

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.slurm.provider import SlurmProvider

RECORD = "JobId={id} JobName=job JobState={state} Reason={reason} ExitCode=0:0 NodeList={nodes} StdOut={out}\n"


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """scontrol prints tmp_path/record (or Slurm's error when it is absent); scancel logs its arguments."""
    folder = tmp_path / "bin"
    folder.mkdir()
    record, calls = tmp_path / "record", tmp_path / "scancel-calls"
    (folder / "scontrol").write_text(
        f'#!/bin/sh\n[ -f "{record}" ] || {{ echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; }}\n'
        f'cat "{record}"\n'
    )
    (folder / "scancel").write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\n')
    for tool in ("scontrol", "scancel"):
        (folder / tool).chmod(0o755)
    return folder


def write_record(tmp_path: Path, state: str, reason: str = "None", nodes: str = "n1") -> None:
    out = tmp_path / "job-8.out"
    (tmp_path / "record").write_text(RECORD.format(id=8, state=state, reason=reason, nodes=nodes, out=out))


@pytest.mark.process
@pytest.mark.parametrize(("state", "message"), [("COMPLETED", "already ended (COMPLETED)"),
                                                ("CANCELLED", "already ended (CANCELLED)"), (None, "does not know job 8")])  # fmt: skip
def test_cancel_of_an_unknown_or_ended_job_says_so(
    tmp_path: Path, bin_dir: Path, state: str | None, message: str
) -> None:
    if state:
        write_record(tmp_path, state)
    with pytest.raises(CloudDDPError, match=re.escape(message)):
        SlurmProvider(environ={"PATH": f"{bin_dir}:/usr/bin:/bin"}).cancel("8")
    assert not (tmp_path / "scancel-calls").exists()
    result = run_cli("cancel", "-p", "slurm", "8", env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert result.returncode == 2 and message in result.stderr and "asked slurm" not in result.stdout


@pytest.mark.process
@pytest.mark.parametrize("state", ["RUNNING", "PENDING"])
def test_cancel_of_a_live_job_runs_scancel(tmp_path: Path, bin_dir: Path, state: str) -> None:
    write_record(tmp_path, state)
    SlurmProvider(environ={"PATH": f"{bin_dir}:/usr/bin:/bin"}).cancel("8")
    assert (tmp_path / "scancel-calls").read_text() == "--verbose 8\n"


# What scancel --verbose prints when the job ended after cancel's check: its log prefix, _log_kill_job_error's text
# and slurm_strerror's (SchedMD/slurm 284c3b95f08a2dc2478499837b03355e1b9c5c75 src/scancel/scancel.c,
# src/common/slurm_errno.c); the real one is asked in test_slurm_provider_real.py.
ENDED_MEANWHILE = "scancel: error: Kill job error on job id 8: Job/step already completing or completed"


@pytest.mark.process
def test_a_job_that_ends_between_the_check_and_scancel_is_not_reported_stopped(tmp_path: Path, bin_dir: Path) -> None:
    write_record(tmp_path, "RUNNING")
    done = tmp_path / "record"
    completed = RECORD.format(id=8, state="COMPLETED", reason="None", nodes="n1", out=tmp_path / "job-8.out")
    (bin_dir / "scancel").write_text(f"#!/bin/sh\nprintf '%s' '{completed}' > '{done}'\necho '{ENDED_MEANWHILE}' >&2\n")
    with pytest.raises(CloudDDPError, match=re.escape("Slurm job 8 ended before scancel reached it (COMPLETED)")):
        SlurmProvider(environ={"PATH": f"{bin_dir}:/usr/bin:/bin"}).cancel("8")


@pytest.mark.process
@pytest.mark.timeout(30)  # before the fix it waited silently, for ever
def test_following_a_waiting_job_shows_each_pending_reason_once(tmp_path: Path, bin_dir: Path) -> None:
    write_record(tmp_path, "PENDING", "Priority", "(null)")
    lines = SlurmProvider(environ={"PATH": f"{bin_dir}:/usr/bin:/bin"}).logs("8", follow=True)
    assert next(lines) == "[slurm] job 8 is PENDING (Priority)"
    write_record(tmp_path, "PENDING", "PartitionConfig", "(null)")
    stuck = next(lines)
    assert stuck.startswith("[slurm] job 8 is PENDING (PartitionConfig): Slurm will not start it unless")
    assert "cloudddp cancel -p slurm 8" in stuck
    (tmp_path / "job-8.out").write_text("0: done\n")
    write_record(tmp_path, "COMPLETED")
    assert list(lines) == ["[n1] done"]


def test_sbatch_exports_all_unless_the_user_chose(tmp_path: Path) -> None:
    def argv(**slurm: object) -> list[str]:
        data = {
            "entry_point": "train_ddp.py",
            "source_dir": str(SOURCES),
            "slurm": {"runs_dir": str(tmp_path), **slurm},
        }
        return list(SlurmProvider().render(build_spec(data)).request.argv)

    assert argv() == ["sbatch", "--export=ALL", "--parsable"]
    assert argv(sbatch_args=["--export=NONE"]) == ["sbatch", "--parsable"]


@pytest.mark.process
def test_a_job_scontrol_forgot_has_its_timeline_from_sacct(tmp_path: Path, bin_dir: Path) -> None:
    # Like sacct, the stand-in prints local time ("%FT%T" in its TZ): the provider asks in UTC and reads it so.
    times = "|".join(f"$(date -d @{second} +%FT%T)" for second in (1764429323, 1764429326, 1764429328))
    (bin_dir / "sacct").write_text(f'#!/bin/sh\necho "COMPLETED|0:0|n[1-2]|{times}"\n')
    (bin_dir / "sacct").chmod(0o755)
    provider = SlurmProvider(environ={"PATH": f"{bin_dir}:/usr/bin:/bin", "TZ": "Pacific/Chatham"})
    assert [(event.time, event.node, event.what) for event in provider.events("8")] == [
        (1764429323, "", "submitted"), (1764429326, "n1", "started"), (1764429326, "n2", "started"),
        (1764429328, "", "succeeded"),
    ]  # fmt: skip
    (bin_dir / "sacct").write_text("#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n")
    assert provider.events("8") == []  # neither remembers the job: the dashboard shows the job index's course
