"""`--provider pbs`: qsub from a login node; status from `qstat -f -F json` (PBS Pro/OpenPBS), falling back
to `qstat -f` text (Torque, Slurm's Torque wrappers); logs by following each node's log in the run
folder; cancel with qdel.

JSON layout: openpbs/openpbs src/cmds/qstat.c and doc/man1/qstat.1B (commit
cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a): {"Jobs": {"<id>": {"job_state": "R", "Exit_status": 0,
"Job_Name": ..., "Variable_List": {"NAME": "value", ...}, ...}}}.
"""

from __future__ import annotations

import calendar
import getpass
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudddp.errors import CloudDDPError
from cloudddp.providers.base import JobEvent, JobStatus
from cloudddp.providers.batch.base import BatchProvider, BatchRequest, job_end_event, node_end_events
from cloudddp.providers.batch.tools import run_tool
from cloudddp.providers.log_tail import folder_lines
from cloudddp.providers.pbs.script import render_qsub
from cloudddp.providers.pbs.settings import PBSSettings

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

# qstat job states (PBS Pro: Q H W T R E F B S X M U; Torque adds C for completed).
JOB_STATE_OF_PBS_STATE = {"Q": "PENDING", "H": "PENDING", "W": "PENDING", "T": "PENDING", "S": "PENDING", "U": "PENDING",
          "M": "PENDING", "R": "RUNNING", "B": "RUNNING", "E": "STOPPING"}  # fmt: skip
FINISHED = ("F", "C", "X")
JOB_ID = re.compile(r"^\d+(\[\d*\])?(\.[A-Za-z0-9_.-]+)?$")
# The negative Exit_status values PBS sets when it kills a job for a limit (openpbs/openpbs cd7ab5ed
# src/include/job.h JOB_EXEC_KILL_*, set by resmom/mom_main.c when a job exceeds them).
EXEC_KILLS = {
    -24: "killed by PBS for exceeding its ncpus (burst)", -25: "killed by PBS for exceeding its ncpus (sum)",
    -26: "killed by PBS for exceeding its vmem", -27: "killed by PBS for exceeding its mem",
    -28: "killed by PBS for exceeding its cput", -29: "killed by PBS for exceeding its walltime",
}  # fmt: skip
QDEL_EXIT_CODES = (271,)  # PBS Pro sets Exit_status 271 (SIGTERM+256) for jobs deleted while running

# Slurm's Torque wrapper prints qtime = submitted, mtime = started and ctime = ended (a running job's time limit),
# each once set (SchedMD/slurm contribs/torque/qstat.pl print_job_full at 284c3b95f08a2dc2478499837b03355e1b9c5c75,
# as at slurm-22-05-8-1); parse_full_text gives them OpenPBS's names: ctime created, stime started, obittime ended
# (openpbs/openpbs doc/man1/pbs_job_attributes.7B; obittime: src/server/req_jobobit.c).
SLURM_WRAPPER_TIMES = {"qtime": "ctime", "mtime": "stime", "ctime": "obittime"}

KEY_LINE = re.compile(r"^\s+([A-Za-z_][\w.]*) = (.*)$")


def parse_full_text(text: str) -> dict[str, Any]:
    """`qstat -f ID` as text: `Job Id: X`, then indented `key = value` lines (4 spaces in Torque and
    PBS Pro, a tab in Slurm's qstat.pl), long values continued on tab-indented lines.
    Variable_List becomes a dict, as in the JSON form; qstat.pl's times take OpenPBS's names (SLURM_WRAPPER_TIMES)."""
    record: dict[str, Any] = {}
    key = None
    for line in text.splitlines():
        match = KEY_LINE.match(line)
        if line.startswith("Job Id:"):
            record["Job Id"] = line.split(":", 1)[1].strip()
        elif match:
            key = match.group(1)
            record[key] = match.group(2).strip()
        elif key and line[:1] in ("\t", " ") and line.strip():
            record[key] += line.strip()
    if isinstance(record.get("Variable_List"), str):
        record["Variable_List"] = split_variable_list(record["Variable_List"])
    if text.startswith("Job Id:\t"):  # Slurm's qstat.pl (print_job_full prints "Job Id:\t%s")
        record = {SLURM_WRAPPER_TIMES.get(key, key): value for key, value in record.items()}
    return record


# The server escapes these in Variable_List with a backslash (openpbs/openpbs at cd7ab5ed,
# src/lib/Libattr/attr_fn_arst.c encode_arst_bs), so a comma in a value is not a separator.
ESCAPED = "\"',\\"


def split_variable_list(text: str) -> dict[str, str]:
    """Variable_List as `qstat -f` prints it: NAME=value items split at unescaped commas, each item
    stripped and unescaped as parse_comma_string_bs (same file) does; other backslashes stay."""
    items: list[str] = []
    current = ""
    chars = iter(text)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            current += following if following and following in ESCAPED else char + following
        elif char == ",":
            items, current = [*items, current], ""
        else:
            current += char
    pairs = (item.strip().partition("=") for item in [*items, current])
    return {name: value for name, _, value in pairs if name}


def json_variable(value: Any) -> str:
    """A Variable_List value from `qstat -F json`: qstat.c prt_attr drops only a comma's escape and
    pbs_json_insert_parsed reads a value that parses as JSON (a number) as such."""
    text = value if isinstance(value, str) else json.dumps(value)
    return re.sub(r"\\([\"'\\])", r"\1", text)


def pbs_time(text: object) -> float | None:
    """A time as qstat -f prints it: ctime(3)'s "Thu Nov 26 09:05:01 2026" in qstat's time zone (describe runs it in
    UTC), in the text and the JSON form alike (openpbs/openpbs src/cmds/qstat.c display_statjob at
    cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a; Perl's `scalar localtime` in qstat.pl hRTime); None if absent."""
    try:
        return calendar.timegm(time.strptime(" ".join(str(text).split()), "%a %b %d %H:%M:%S %Y"))
    except ValueError:
        return None


def pbs_timeline(record: dict[str, Any], current: JobStatus, run_dir: Path | None) -> list[JobEvent]:
    """The job's course in its qstat record: submitted (ctime, else qtime), each exec_host node started (stime),
    each node's end where its node.sh wrote its exit code (run folder's exit/<short host name>), the job's end
    (obittime, else mtime, once it finished)."""
    submitted = pbs_time(record.get("ctime", record.get("qtime")))
    started, ended = pbs_time(record.get("stime")), pbs_time(record.get("obittime", record.get("mtime")))
    events = [JobEvent(submitted, "", "submitted")] if submitted else []
    if started and current.state != "PENDING":
        events += [JobEvent(started, host, "started") for host in current.nodes]
    if run_dir:
        events += node_end_events(
            {host: run_dir / "exit" / host.split(".")[0] for host in current.nodes}, current.state
        )
    events.sort(key=lambda event: event.time)
    if ended and current.done:  # last, even where a node's exit file (mtime) is later than the whole second
        events.append(job_end_event(ended, current, EXEC_KILLS.get(current.exit_code or 0, "")))
    return events


class PBSProvider(BatchProvider[PBSSettings]):
    name = "pbs"
    settings = PBSSettings
    id_pattern = JOB_ID
    id_hint = "a PBS job id (as qsub printed it, e.g. 1234.server)"

    script_request = staticmethod(render_qsub)

    def send(self, batch: BatchRequest, env: dict[str, str]) -> str:
        # qsub reads the script from a file; it holds no secrets (they travel by name in -v).
        with tempfile.NamedTemporaryFile("w", suffix=".pbs", dir=batch.runs_dir, delete=False) as handle:
            handle.write(batch.script)
        try:
            # From the runs folder: PBS returns the job's own output file (<name>.o<id>) to where qsub ran.
            return run_tool([*batch.argv, Path(handle.name).name], env=env, what="qsub", cwd=batch.runs_dir).stdout
        finally:
            os.unlink(handle.name)

    # -- follow-up calls ------------------------------------------------------------------
    def describe(self, job_id: str) -> dict[str, Any]:
        """The job's attributes: JSON from PBS Pro/OpenPBS (-x: finished jobs too), else Torque's text."""
        self.check_id(job_id)
        result = run_tool(["qstat", "-x", "-f", "-F", "json", job_id], env=self.utc_environ, check=False)
        if result.returncode == 0 and result.stdout.lstrip().startswith("{"):
            jobs = json.loads(result.stdout).get("Jobs", {})
            if jobs:
                full_id, record = next(iter(jobs.items()))
                record = {**record, "Job Id": full_id}  # the full id, as qstat -f text gives it (run_dir)
                if isinstance(record.get("Variable_List"), dict):
                    record["Variable_List"] = {k: json_variable(v) for k, v in record["Variable_List"].items()}
                return record
        result = run_tool(["qstat", "-f", job_id], env=self.utc_environ, what="qstat")
        record: dict[str, Any] = parse_full_text(result.stdout)
        if not record:
            raise CloudDDPError(f"qstat -f {job_id} printed nothing PBS-like: {result.stdout.strip()[:200]!r}")
        return record

    def status(self, job_id: str) -> JobStatus:
        return self.status_of(job_id, self.describe(job_id))

    def events(self, job_id: str) -> list[JobEvent]:
        record = self.describe(job_id)
        return pbs_timeline(record, self.status_of(job_id, record), self.run_dir(record, job_id))

    def status_of(self, job_id: str, record: dict[str, Any]) -> JobStatus:
        pbs_state = str(record.get("job_state", "?"))
        exit_text = record.get("Exit_status", record.get("exit_status"))
        exit_code = int(exit_text) if exit_text is not None and str(exit_text).lstrip("-").isdigit() else None
        run_dir = self.run_dir(record, job_id)
        reason = f"job_state={pbs_state}"
        if pbs_state in FINISHED:
            if exit_code is None:  # Torque-style wrappers may not report it: the nodes wrote theirs
                exit_code, reason = self.node_exit_code(run_dir), f"{reason}; exit code from the nodes' exit files"
            if exit_code is None:
                state, reason = "STOPPED", f"job_state={pbs_state}; no exit status and no node finished (deleted?)"
            elif exit_code == 0:
                state = "SUCCEEDED"
            elif exit_code in QDEL_EXIT_CODES or exit_code > 256:
                state = "STOPPED"  # killed by a signal (exit status 256 + signal): qdel
            else:
                state = "FAILED"  # a limit PBS enforced is a failure, as Slurm's TIMEOUT is (slurm/provider.py)
                reason += f"; {EXEC_KILLS[exit_code]}" if exit_code in EXEC_KILLS else ""
        else:
            state = JOB_STATE_OF_PBS_STATE.get(pbs_state, "RUNNING")
        hosts = [chunk.split("/")[0] for chunk in str(record.get("exec_host", "")).split("+") if chunk]
        return JobStatus(job_id=job_id, state=state, reason=reason, exit_code=exit_code,
                         nodes={host: pbs_state for host in hosts},
                         artifacts=str(run_dir / "model") if run_dir else None)  # fmt: skip

    @staticmethod
    def node_exit_code(run_dir: Path | None) -> int | None:
        """The job's exit code by the job script's own rule (script.OUTCOME: the last non-zero code in node order),
        so that status agrees with the Exit_status a scheduler reports; 0 if all succeeded, None if none recorded.
        Which code wins matters when a node stopped by another's failure records its own (1 from a lost peer)."""
        codes = [f.read_text().strip() for f in sorted(run_dir.glob("exit/*"))] if run_dir else []
        if not codes:
            return None
        failed = [int(c) if c.isdigit() else 255 for c in codes if c != "0"]
        return failed[-1] if failed else 0

    @staticmethod
    def run_dir(record: dict[str, Any], job_id: str) -> Path | None:
        """The job's run folder, named by the script with the full $PBS_JOBID (`1234.server`). A short id (`1234`)
        works with qstat, which adds the default server (openpbs/openpbs src/lib/Libcmds/get_server.c get_server,
        commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a), so the id qstat answers with names the folder."""
        variables = record.get("Variable_List") or {}
        runs_dir = variables.get("CLOUDDDP_RUNS_DIR") if isinstance(variables, dict) else None
        if not runs_dir or not record.get("Job_Name"):
            return None
        return Path(runs_dir) / f"{record['Job_Name']}-{record.get('Job Id') or job_id}"

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        """Each node's log in the run folder, lines prefixed with `[host]`."""
        run_dir = self.run_dir(self.describe(job_id), job_id)
        if run_dir is None:
            raise CloudDDPError(
                f"PBS job {job_id} was not started by cloudddp (no CLOUDDDP_RUNS_DIR in its variables)."
            )
        lines = folder_lines(run_dir / "logs", lambda: not follow or self.status(job_id).done, 1.0)
        yield from (f"[{host}] {line}" for host, line in lines)

    def cancel(self, job_id: str) -> None:
        run_tool(["qdel", self.check_id(job_id)], env=self.environ, what="qdel")

    def find_by_name(self, name: str, spec: JobSpec) -> str | None:
        """The newest of the user's queued or running jobs named `name` (qsub -N, the script's #PBS -N): `qselect -N
        NAME -u USER`, which prints their ids separated by white space, each `<seq>.<server>[@<server>]`
        (openpbs/openpbs doc/man1/qselect.1B at 293bce8c3f80d83895965f474ba154b1bfe0cfa0: finished jobs only with
        -x). Slurm's Torque wrappers have no qselect (SchedMD/slurm contribs/torque): there `qstat -f`, every job's
        record, read for its Job_Name, a Job_Owner `USER@host` and a job_state that is not finished (the wrapper's
        qstat.pl prints its short table, not the records, once -u is given)."""
        user = self.environ.get("USER") or getpass.getuser()
        if shutil.which("qselect", path=self.environ.get("PATH")):
            said = run_tool(["qselect", "-N", name, "-u", user], env=self.environ, what="qselect").stdout
            found = [word.split("@")[0] for word in said.split()]
        else:
            said = run_tool(["qstat", "-f"], env=self.environ, what="qstat").stdout
            records = [parse_full_text(part) for part in re.split(r"^(?=Job Id:)", said, flags=re.MULTILINE)]
            found = [str(record["Job Id"]) for record in records if record.get("Job Id")
                     and record.get("Job_Name") == name and record.get("job_state") not in FINISHED
                     and str(record.get("Job_Owner", "")).split("@")[0] == user]  # fmt: skip
        return max(found, key=sequence_number) if found else None


def sequence_number(job_id: str) -> int:
    """`1234.server` -> 1234: which of two jobs is newer."""
    digits = re.match(r"\d+", job_id)
    return int(digits.group()) if digits else -1
