"""The Slurm provider's timeline (`events`) from the record status already reads: `scontrol show job -o` as Slurm
22.05.8 printed it on the test cluster (TZ=UTC0 SLURM_TIME_FORMAT=standard, as describe runs it), or sacct's row,
plus the exit records an elastic job's launchers leave in its run folder."""

from __future__ import annotations

import calendar
import os
import time
from pathlib import Path

import pytest

from cloudddp.providers.base import JobEvent
from cloudddp.providers.slurm.provider import SlurmProvider, parse_scontrol, slurm_time, slurm_timeline

# Recorded: `sbatch -N2 --wrap "srun -l sh -c 'sleep 2; exit $SLURM_NODEID'"`, shortened to the fields read (and
# the two around NodeList, whose value may be empty).
PENDING = (
    "JobId=1 JobName=wrap JobState=PENDING Reason=None ExitCode=0:0 TimeLimit=UNLIMITED "
    "SubmitTime=2026-11-29T15:15:23 EligibleTime=2026-11-29T15:15:23 AccrueTime=Unknown StartTime=Unknown "
    "EndTime=Unknown Deadline=N/A SuspendTime=None Partition=debug NodeList= NumNodes=2-2 StdOut={out}"
)
FAILED = (
    "JobId=1 JobName=wrap JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0 TimeLimit=UNLIMITED "
    "SubmitTime=2026-11-29T15:15:23 EligibleTime=2026-11-29T15:15:23 AccrueTime=2026-11-29T15:15:23 "
    "StartTime=2026-11-29T15:15:26 EndTime=2026-11-29T15:15:28 Deadline=N/A SuspendTime=None Partition=debug "
    "NodeList=n[1-2] BatchHost=n1 NumNodes=2 StdOut={out}"
)


def at(text: str) -> float:
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def events_of(line: str, out: Path) -> list[JobEvent]:
    provider = SlurmProvider(environ={})
    record = parse_scontrol(line.format(out=out))
    return slurm_timeline(record, provider.status_of("1", record), provider.hosts(record))


def test_a_finished_job_shows_submitted_each_node_started_and_its_end(tmp_path: Path) -> None:
    assert events_of(FAILED, tmp_path / "wrap-1.out") == [
        JobEvent(at("2026-11-29T15:15:23"), "", "submitted"),
        JobEvent(at("2026-11-29T15:15:26"), "n1", "started"),
        JobEvent(at("2026-11-29T15:15:26"), "n2", "started"),
        JobEvent(at("2026-11-29T15:15:28"), "", "failed (exit 1): NonZeroExitCode"),
    ]


def test_a_waiting_job_shows_only_its_submission(tmp_path: Path) -> None:
    # A pending job's StartTime may be the scheduler's estimate: it is no start.
    estimated = PENDING.replace("StartTime=Unknown", "StartTime=2026-11-29T16:00:00")
    for line in (PENDING, estimated):
        assert events_of(line, tmp_path / "wrap-1.out") == [JobEvent(at("2026-11-29T15:15:23"), "", "submitted")]


def test_a_running_jobs_end_time_is_its_limit_not_an_end(tmp_path: Path) -> None:
    running = FAILED.replace("JobState=FAILED Reason=NonZeroExitCode", "JobState=RUNNING Reason=None")
    whats = [event.what for event in events_of(running, tmp_path / "wrap-1.out")]
    assert whats == ["submitted", "started", "started"]


@pytest.mark.parametrize(("state", "reason", "code", "end"), [
    ("COMPLETED", "None", "0:0", "succeeded"),
    ("TIMEOUT", "TimeLimit", "0:15", "failed (exit 143): TIMEOUT TimeLimit"),
    ("CANCELLED", "None", "0:15", "stopped (exit 143): CANCELLED"),
])  # fmt: skip
def test_the_jobs_end_says_how_with_slurms_reason(tmp_path: Path, state: str, reason: str, code: str, end: str) -> None:
    line = FAILED.replace("JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0",
                          f"JobState={state} Reason={reason} ExitCode={code}")  # fmt: skip
    assert events_of(line, tmp_path / "wrap-1.out")[-1] == JobEvent(at("2026-11-29T15:15:28"), "", end)


def test_each_node_ends_when_its_launcher_wrote_its_exit_record(tmp_path: Path) -> None:
    # An elastic job's launchers write exit/node-RANK in the run folder (the .out file's name without .out); RANK is
    # the node's place in NodeList. n3's node was lost: it wrote none.
    exits = tmp_path / "wrap-1" / "exit"
    exits.mkdir(parents=True)
    for rank, text, mtime in [(0, "0\n", "2026-11-29T15:15:27"), (1, "1\nstopped-by 0\n", "2026-11-29T15:15:27")]:
        (exits / f"node-{rank}").write_text(text)
        os.utime(exits / f"node-{rank}", (at(mtime), at(mtime)))
    three = FAILED.replace("NodeList=n[1-2]", "NodeList=n[1-3]")
    events = events_of(three, tmp_path / "wrap-1.out")
    assert JobEvent(at("2026-11-29T15:15:27"), "n1", "succeeded") in events
    assert JobEvent(at("2026-11-29T15:15:27"), "n2", "stopped because n1 failed (exit 1)") in events
    assert [event.node for event in events if event.what != "started"] == ["", "n1", "n2", ""]


def test_times_slurm_leaves_unset_are_left_out() -> None:
    # "Unknown" for 0 and INFINITE, "None" for NO_VAL (src/common/parse_time.c _make_time_str_internal).
    assert [slurm_time(text) for text in ("Unknown", "None", "", "N/A")] == [None] * 4
    assert slurm_time("2026-11-29T15:15:23") == at("2026-11-29T15:15:23")


def test_sacct_gives_the_same_course_once_scontrol_forgot_the_job(tmp_path: Path) -> None:
    # sacct -X -n -P -o State,ExitCode,NodeList,Submit,Start,End: the fields accounting() turns into scontrol's keys.
    provider = SlurmProvider(environ={})
    record = {"JobState": "COMPLETED", "ExitCode": "0:0", "NodeList": "n[1-2]", "SubmitTime": "2026-11-29T15:15:23",
              "StartTime": "2026-11-29T15:15:26", "EndTime": "2026-11-29T15:15:28"}  # fmt: skip
    events = slurm_timeline(record, provider.status_of("1", record), provider.hosts(record))
    assert [(event.node, event.what) for event in events] == [
        ("", "submitted"), ("n1", "started"), ("n2", "started"), ("", "succeeded")
    ]  # fmt: skip


def test_slurm_is_asked_for_times_in_utc_whatever_the_users_settings() -> None:
    # scontrol and sacct print local time, in the format SLURM_TIME_FORMAT chooses ("relative": "Ystday 14:00").
    environ = SlurmProvider(environ={"TZ": "Pacific/Chatham", "SLURM_TIME_FORMAT": "relative", "X": "1"}).time_environ
    assert (environ["TZ"], environ["SLURM_TIME_FORMAT"], environ["X"]) == ("UTC0", "standard", "1")


def test_the_jobs_end_comes_last_though_slurm_keeps_whole_seconds(tmp_path: Path) -> None:
    # The batch script ends after its nodes, but EndTime drops the fraction a node record's mtime keeps.
    exits = tmp_path / "wrap-1" / "exit"
    exits.mkdir(parents=True)
    (exits / "node-0").write_text("0\n")
    later = at("2026-11-29T15:15:28") + 0.6
    os.utime(exits / "node-0", (later, later))
    completed = FAILED.replace("JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0", "JobState=COMPLETED ExitCode=0:0")
    assert [event.what for event in events_of(completed, tmp_path / "wrap-1.out")][-2:] == ["succeeded"] * 2
    assert events_of(completed, tmp_path / "wrap-1.out")[-1].node == ""
