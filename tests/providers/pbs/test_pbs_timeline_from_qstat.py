"""The PBS provider's timeline (`events`) from the record status already reads: OpenPBS's `qstat -x -f -F json`
(times as ctime(3) prints them: openpbs/openpbs src/cmds/qstat.c at cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a) and
the `qstat -f` text of Slurm's Torque wrapper (qstat.pl, recorded on the Slurm 22.05.8 test cluster with TZ=UTC0, as
describe runs it), plus the exit codes each node.sh wrote in the run folder."""

from __future__ import annotations

import calendar
import os
import time
from pathlib import Path
from typing import Any

import pytest

from cloudddp.providers.base import JobEvent
from cloudddp.providers.pbs.provider import PBSProvider, parse_full_text, pbs_time, pbs_timeline


def at(text: str) -> float:
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def openpbs(runs: Path, **changes: object) -> dict[str, Any]:
    """A finished two-node job as describe returns OpenPBS's JSON record (its id added)."""
    record = {
        "Job Id": "1234.pbs-head", "Job_Name": "resnet", "job_state": "F", "exec_host": "cn01/0*8+cn02.cluster/0*8",
        "Exit_status": 0, "ctime": "Thu Nov  5 09:05:01 2026", "qtime": "Thu Nov  5 09:05:02 2026",
        "stime": "Thu Nov  5 09:07:30 2026", "obittime": "Thu Nov  5 10:00:00 2026",
        "mtime": "Thu Nov  5 10:00:05 2026", "Variable_List": {"CLOUDDDP_RUNS_DIR": str(runs)},
    }  # fmt: skip
    return {**record, **changes}


def events_of(record: dict[str, Any]) -> list[JobEvent]:
    provider = PBSProvider(environ={})
    return pbs_timeline(record, provider.status_of("1234.pbs-head", record), provider.run_dir(record, "1234"))


def test_a_finished_openpbs_job_shows_its_course(tmp_path: Path) -> None:
    assert events_of(openpbs(tmp_path)) == [
        JobEvent(at("2026-11-05T09:05:01"), "", "submitted"),  # ctime: created, before it was queued (qtime)
        JobEvent(at("2026-11-05T09:07:30"), "cn01", "started"),
        JobEvent(at("2026-11-05T09:07:30"), "cn02.cluster", "started"),
        JobEvent(at("2026-11-05T10:00:00"), "", "succeeded"),  # obittime, not the later mtime
    ]


@pytest.mark.parametrize(("code", "end"), [
    (-29, "failed (exit -29): killed by PBS for exceeding its walltime"), (1, "failed (exit 1)"),
    (271, "stopped (exit 271)"),
])  # fmt: skip
def test_the_jobs_end_says_how_with_pbs_reason(tmp_path: Path, code: int, end: str) -> None:
    assert events_of(openpbs(tmp_path, Exit_status=code))[-1].what == end


def test_a_waiting_or_running_job_has_no_end_yet(tmp_path: Path) -> None:
    queued = {key: value for key, value in openpbs(tmp_path, job_state="Q").items() if key not in ("stime", "obittime")}
    assert [event.what for event in events_of(queued)] == ["submitted"]
    running = openpbs(tmp_path, job_state="R")
    assert [event.what for event in events_of(running)] == ["submitted", "started", "started"]


def test_each_node_ends_when_its_node_script_wrote_its_exit_code(tmp_path: Path) -> None:
    # node.sh writes exit/$(hostname -s): cn02.cluster's file is exit/cn02.
    exits = tmp_path / "resnet-1234.pbs-head" / "exit"
    exits.mkdir(parents=True)
    for host, code, mtime in [("cn01", "0", "2026-11-05T09:59:58"), ("cn02", "3", "2026-11-05T09:59:50")]:
        (exits / host).write_text(f"{code}\n")
        os.utime(exits / host, (at(mtime), at(mtime)))
    events = events_of(openpbs(tmp_path, Exit_status=3))
    assert events[3:] == [
        JobEvent(at("2026-11-05T09:59:50"), "cn02.cluster", "failed (exit 3)"),
        JobEvent(at("2026-11-05T09:59:58"), "cn01", "succeeded"),
        JobEvent(at("2026-11-05T10:00:00"), "", "failed (exit 3)"),
    ]


# qstat -f of Slurm's Torque wrapper for a two-node job that ran (`sleep 3; exit 3`): qtime is its submission,
# mtime its start and ctime its end.
WRAPPER_DONE = (
    "Job Id:\t1\n\tJob_Name = q\n\tJob_Owner = root@localhost\n\tjob_state = C\n\tqueue = debug\n"
    "\tqtime = Sun Nov 29 15:15:38 2026\n\tmtime = Sun Nov 29 15:15:40 2026\n\tctime = Sun Nov 29 15:15:43 2026\n"
    "\texec_host = n1/1+n2/1\n\tPriority = 4294901759\n\teuser = root(0)\n\tegroup = root(0)\n"
    "\tResource_List.walltime = 00:05:00\n\tResource_List.nodect = 2\n\tResource_List.ncpus = 2\n\n"
)


def test_slurms_torque_wrapper_times_read_by_their_meaning() -> None:
    record = parse_full_text(WRAPPER_DONE)
    # No Exit_status, no run folder (a script not from cloudddp): the wrapper's finished job reads as stopped.
    assert [(event.time, event.node, event.what) for event in events_of(record)] == [
        (at("2026-11-29T15:15:38"), "", "submitted"),
        (at("2026-11-29T15:15:40"), "n1", "started"),
        (at("2026-11-29T15:15:40"), "n2", "started"),
        (at("2026-11-29T15:15:43"), "", "stopped"),
    ]
    # PBS's own text (4-space indent) keeps PBS's meanings: ctime is the creation.
    pbs_text = WRAPPER_DONE.replace("Job Id:\t", "Job Id: ").replace("\n\t", "\n    ")
    assert parse_full_text(pbs_text)["ctime"] == "Sun Nov 29 15:15:43 2026"


def test_times_qstat_leaves_out_are_left_out() -> None:
    assert [pbs_time(value) for value in (None, "", "UNKNOWN", 1764428400)] == [None] * 4
    assert pbs_time("Thu Nov  5 09:05:01 2026") == at("2026-11-05T09:05:01")


def test_qstat_is_asked_for_times_in_utc() -> None:
    # ctime(3) and Perl's localtime print the qstat process's local time.
    environ = PBSProvider(environ={"TZ": "Pacific/Chatham", "X": "1"}).utc_environ
    assert (environ["TZ"], environ["X"]) == ("UTC0", "1")
