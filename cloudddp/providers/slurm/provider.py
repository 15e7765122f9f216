"""`--provider slurm`: sbatch from a login node; status from scontrol (sacct once Slurm forgot the job);
logs by following the job's output file; cancel with scancel.

Job ids are Slurm's own (`12345`). Everything runs through the Slurm commands on PATH with the
user's environment (SLURM_CONF, the cluster's defaults), as a person on the login node would.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cloudddp.cluster.hostlist import expand_hostlist
from cloudddp.errors import CloudDDPError
from cloudddp.providers.base import JobEvent, JobStatus
from cloudddp.providers.batch.base import BatchProvider, job_end_event, node_end_events
from cloudddp.providers.batch.tools import run_tool, tool_failure
from cloudddp.providers.log_tail import LogTail
from cloudddp.providers.slurm.script import render_sbatch
from cloudddp.providers.slurm.settings import SlurmSettings

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

# Slurm job states (squeue(1) "JOB STATE CODES") -> cloudddp's.
JOB_STATE_OF_SLURM_STATE = {
    "PENDING": "PENDING", "CONFIGURING": "PENDING", "REQUEUED": "PENDING", "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING", "RESV_DEL_HOLD": "PENDING", "SUSPENDED": "PENDING", "STOPPED": "PENDING",
    "RESIZING": "RUNNING", "RUNNING": "RUNNING", "COMPLETING": "RUNNING", "SIGNALING": "RUNNING",
    "STAGE_OUT": "RUNNING",
    "COMPLETED": "SUCCEEDED",
    "FAILED": "FAILED", "NODE_FAIL": "FAILED", "OUT_OF_MEMORY": "FAILED", "BOOT_FAIL": "FAILED",
    "DEADLINE": "FAILED", "TIMEOUT": "FAILED", "SPECIAL_EXIT": "FAILED", "REVOKED": "FAILED",
    "CANCELLED": "STOPPED", "PREEMPTED": "STOPPED",
}  # fmt: skip
JOB_ID = re.compile(r"^\d+(_\d+)?$")
# `srun --label` prefixes each line of task N with "N: " (padded to the width of the task count).
LABELLED = re.compile(r"^\s*(\d+): ?(.*)$")


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol show job -o ID`: one line of Key=Value pairs (values may hold spaces only in known keys)."""
    fields: dict[str, str] = {}
    for match in re.finditer(r"(\S+?)=(.*?)(?=\s+\S+?=|$)", text.strip()):
        fields[match.group(1)] = match.group(2)
    return fields


def stdout_path(record: dict[str, str]) -> Path | None:
    """The job's output file from scontrol's StdOut. cloudddp writes a % in its folder as %% (output_pattern), and
    Slurm up to 23.x prints StdOut with the %% still there: src/api/job_info.c _fname_format at tags
    slurm-22-05-8-1 and slurm-23-11-0-1 replaces only %A %a %j %u %x...; %% becomes % from 24.11 (rewritten
    _fname_format; 25.05 expand_stdio_fields, SchedMD/slurm commit 89cd90a18250437bf175d8564a5a172a4102036a).
    submit created the folder, so the form whose folder exists is the real one."""
    raw = record.get("StdOut", "")
    if not raw:
        return None
    path = Path(raw)
    undoubled = Path(raw.replace("%%", "%"))
    return undoubled if "%%" in raw and not path.parent.is_dir() and undoubled.parent.is_dir() else path


# Pending reasons that the job cannot outgrow while the partition stays as it is: it asks for more than the partition
# allows (SchedMD/slurm src/slurmctld/job_mgr.c _part_access_check and the fail_reason switch after it: a time limit
# -> PartitionTimeLimit, anything but a node count -> PartitionConfig; doc/html/job_reason_codes.shtml, commit
# 284c3b95f08a2dc2478499837b03355e1b9c5c75), or it can never be satisfied (BadConstraints, DependencyNeverSatisfied).
# With the default EnforcePartLimits=NO sbatch accepts such a job, and it waits forever.
STUCK_REASONS = ("PartitionConfig", "PartitionTimeLimit", "BadConstraints", "DependencyNeverSatisfied")


def pending_line(job_id: str, reason: str) -> str:
    """`[slurm] job 8 is PENDING (PartitionConfig)`, with a hint when Slurm will not start it as things are."""
    slurm_state, _, why = reason.partition(" ")
    line = f"[slurm] job {job_id} is {slurm_state}" + (f" ({why})" if why else "")
    if why in STUCK_REASONS:
        line += (
            f": Slurm will not start it unless an administrator changes the partition (it asks for more nodes, "
            f"time or resources than the partition allows, or for something that cannot be met); stop it with "
            f"`cloudddp cancel -p slurm {job_id}` and resubmit within the partition's limits (`scontrol show partition`)."
        )
    return line


def slurm_time(text: str) -> float | None:
    """A time as scontrol and sacct print it with SLURM_TIME_FORMAT=standard ("%FT%T" in the process's local time,
    here UTC), or None for "Unknown" (0, INFINITE) and "None" (NO_VAL): SchedMD/slurm src/common/parse_time.c
    _make_time_str_internal at 284c3b95f08a2dc2478499837b03355e1b9c5c75 (the same in slurm-22-05-8-1)."""
    try:
        return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def slurm_timeline(record: dict[str, str], current: JobStatus, hosts: list[str]) -> list[JobEvent]:
    """The job's course in scontrol's (or sacct's) record: submitted, each node started, each node's end where the
    job left exit records (elastic jobs: CLOUDDDP_EXIT_DIR, node-N for the N-th node of NodeList), the job's end.
    A pending job's StartTime is an estimate and a running one's EndTime its time limit (SchedMD/slurm
    src/scontrol/info_job.c at 284c3b95f08a2dc2478499837b03355e1b9c5c75): each is read only once it happened."""
    submitted, started, ended = (slurm_time(record.get(key, "")) for key in ("SubmitTime", "StartTime", "EndTime"))
    events = [JobEvent(submitted, "", "submitted")] if submitted else []
    if started and current.state != "PENDING":
        events += [JobEvent(started, host, "started") for host in hosts]
    stdout = stdout_path(record)
    if stdout and stdout.suffix == ".out":
        exits = stdout.with_suffix("") / "exit"
        events += node_end_events({host: exits / f"node-{rank}" for rank, host in enumerate(hosts)}, current.state)
    events.sort(key=lambda event: event.time)
    if ended and current.done:  # last, even where a node's record (mtime) is later than EndTime's whole second
        reason = " ".join(word for word in current.reason.split() if word != current.state)
        events.append(job_end_event(ended, current, reason))
    return events


class SlurmProvider(BatchProvider[SlurmSettings]):
    name = "slurm"
    settings = SlurmSettings
    id_pattern = JOB_ID
    id_hint = "a Slurm job id (a number, as sbatch printed it)"

    script_request = staticmethod(render_sbatch)

    def job_id_in(self, answer: str) -> str:
        return answer.split(";")[0]  # --parsable: "ID" or "ID;CLUSTER"

    # -- follow-up calls ------------------------------------------------------------------
    def describe(self, job_id: str) -> dict[str, str] | None:
        """scontrol's record of the job, or None once Slurm has forgotten it (MinJobAge after the end)."""
        argv = ["scontrol", "show", "job", "-o", self.check_id(job_id)]
        result = run_tool(argv, env=self.time_environ, check=False)
        if result.returncode != 0:
            if "Invalid job id" in result.stderr:
                return None
            run_tool(argv, env=self.time_environ, what="scontrol")
        return parse_scontrol(result.stdout)

    def accounting(self, job_id: str) -> dict[str, str] | None:
        """sacct's record, where accounting storage exists (it needs slurmdbd)."""
        argv = ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ExitCode,NodeList,Submit,Start,End"]
        try:
            result = run_tool(argv, env=self.time_environ, check=False)
        except CloudDDPError:
            return None
        rows = [line.split("|") for line in result.stdout.splitlines() if line.strip()]
        if result.returncode != 0 or not rows:
            return None
        state, exit_code, nodes, submitted, started, ended = (rows[0] + [""] * 6)[:6]
        return {"JobState": state.split()[0], "ExitCode": exit_code, "NodeList": nodes, "SubmitTime": submitted,
                "StartTime": started, "EndTime": ended}  # fmt: skip

    @property
    def time_environ(self) -> dict[str, str]:
        """scontrol's and sacct's times as "%FT%T" in UTC, whatever SLURM_TIME_FORMAT the user chose (slurm_time)."""
        return {**self.utc_environ, "SLURM_TIME_FORMAT": "standard"}

    def status(self, job_id: str) -> JobStatus:
        record = self.describe(job_id) or self.accounting(job_id)
        if record is None:
            raise CloudDDPError(
                f"Slurm does not know job {job_id} (any more): scontrol forgets jobs MinJobAge after they end, "
                f"and sacct needs accounting storage (slurmdbd)."
            )
        return self.status_of(job_id, record)

    def events(self, job_id: str) -> list[JobEvent]:
        """The timeline from the record status reads; none once neither scontrol nor sacct knows the job."""
        record = self.describe(job_id) or self.accounting(job_id)
        if record is None:
            return []
        return slurm_timeline(record, self.status_of(job_id, record), self.hosts(record))

    def status_of(self, job_id: str, record: dict[str, str]) -> JobStatus:
        slurm_state = record.get("JobState", "UNKNOWN")
        state = JOB_STATE_OF_SLURM_STATE.get(slurm_state, "RUNNING")
        code_text, _, signal = record.get("ExitCode", "0:0").partition(":")
        exit_code = int(code_text) if code_text.isdigit() else None
        if exit_code == 0 and signal.isdigit() and int(signal):
            exit_code = 128 + int(signal)
        reason = record.get("Reason", "")
        reason = "" if reason in ("None", "") else reason
        nodes = {host: slurm_state.lower() for host in self.hosts(record)}
        stdout = stdout_path(record)
        artifacts = str(stdout.with_suffix("") / "model") if stdout and stdout.suffix == ".out" else None
        return JobStatus(job_id=job_id, state=state, reason=f"{slurm_state} {reason}".strip(), exit_code=exit_code,
                         nodes=nodes, artifacts=artifacts)  # fmt: skip

    @staticmethod
    def hosts(record: dict[str, str]) -> list[str]:
        nodelist = record.get("NodeList", "")
        if not nodelist or nodelist in ("(null)", "None assigned"):
            return []
        return expand_hostlist(nodelist, variable="NodeList")

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        """The job's output file, each line as `[host]` (task lines) or `[batch]` (the batch shell)."""
        record = self.describe(job_id)
        path = stdout_path(record) if record else None
        if record is None or path is None:
            raise CloudDDPError(f"no output file known for Slurm job {job_id} (scontrol show job {job_id}).")
        hosts = self.hosts(record)
        tail, pending = LogTail(path), ""
        while True:
            current = self.status(job_id) if follow else None
            done = current.done if current else True
            hosts = hosts or list(current.nodes if current else [])  # known once the job has its nodes
            if current and current.state == "PENDING":  # no output yet: say why it waits, once per reason
                if current.reason != pending:
                    pending = current.reason
                    yield pending_line(job_id, current.reason)
                time.sleep(1.0)
                continue
            yield from (self.labelled(line, hosts) for line in tail.new_lines())
            if done:
                yield from (self.labelled(line, hosts) for line in tail.rest())
                return
            time.sleep(1.0)

    @staticmethod
    def labelled(line: str, hosts: list[str]) -> str:
        match = LABELLED.match(line)
        if not match:
            return f"[batch] {line}"
        task = int(match.group(1))
        host = hosts[task] if task < len(hosts) else f"task {task}"  # one task per node: task N runs on node N
        return f"[{host}] {match.group(2)}"

    def find_by_name(self, name: str, spec: JobSpec) -> str | None:
        """The newest of the user's jobs in the queue named `name` (sbatch --job-name): `squeue --me` with each job's
        id and name (%i %j), compared whole, since --name would split a name at its commas (squeue(1), SchedMD/slurm
        doc/man/man1/squeue.1 at 284c3b95f08a2dc2478499837b03355e1b9c5c75: --name takes a comma separated list;
        without --states squeue lists pending, running and completing jobs). A job that has ended is not found: the
        rerun would submit again, as it would for an ended job it found."""
        argv = ["squeue", "--me", "--noheader", "--format=%i %j", *([f"--name={name}"] if "," not in name else [])]
        said = run_tool(argv, env=self.environ, what="squeue").stdout
        found = [job_id for job_id, _, named in (line.partition(" ") for line in said.splitlines())
                 if named == name and JOB_ID.match(job_id)]  # fmt: skip
        return max(found, key=lambda job_id: int(job_id.split("_")[0])) if found else None

    def cancel(self, job_id: str) -> None:
        """scancel, after checking the job exists and has not ended: scancel itself is silent about both (it prints
        ESLURM_INVALID_JOB_ID / ESLURM_ALREADY_DONE only with -v, SchedMD/slurm src/scancel/scancel.c at
        284c3b95f08a2dc2478499837b03355e1b9c5c75), so a mistyped id looked like a stopped job."""
        current = self.status(self.check_id(job_id))  # an unknown job: the error status gives
        if current.done:
            raise CloudDDPError(f"Slurm job {job_id} already ended ({current.reason}); nothing to stop.")
        # A job may still end between that check and scancel: --verbose makes scancel say so (same file).
        argv = ["scancel", "--verbose", job_id]
        said = run_tool(argv, env=self.environ, what="scancel", check=False)
        if any(error in said.stderr for error in SCANCEL_ENDED):
            try:
                ended = f" ({self.status(job_id).reason})"
            except CloudDDPError:  # already purged
                ended = ""
            raise CloudDDPError(f"Slurm job {job_id} ended before scancel reached it{ended}; nothing to stop.")
        if said.returncode != 0:
            raise tool_failure(argv, said, "scancel")


# slurm_strerror(ESLURM_ALREADY_DONE) and (ESLURM_INVALID_JOB_ID, a finished job already purged), as scancel --verbose
# prints them (SchedMD/slurm 284c3b95f08a2dc2478499837b03355e1b9c5c75 src/common/slurm_errno.c).
SCANCEL_ENDED = ("Job/step already completing or completed", "Invalid job id specified")
