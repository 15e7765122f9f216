"""`--provider slurm`: sbatch from a login node; status from scontrol (sacct once Slurm forgot the job);
logs by following the job's output file; cancel with scancel.

Job ids are Slurm's own (`12345`). Everything runs through the Slurm commands on PATH with the
user's environment (SLURM_CONF, the cluster's defaults), as a person on the login node would.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cloudddp.cluster.hostlist import expand_hostlist
from cloudddp.errors import CloudDDPError
from cloudddp.providers.base import JobHandle, JobRequest, JobStatus, Provider
from cloudddp.providers.slurm.script import SbatchRequest, render_sbatch
from cloudddp.providers.slurm.settings import SlurmSettings
from cloudddp.providers.slurm.shell import ScriptJobRequest
from cloudddp.providers.slurm.tools import run_tool
from cloudddp.spec import JobSpec

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


def settings_of(spec: JobSpec) -> SlurmSettings:
    """The spec's `slurm:` section (the registry adds it to JobSpec), defaults where it is absent."""
    section = getattr(spec, "slurm", None)
    return section if isinstance(section, SlurmSettings) else SlurmSettings.model_validate(section or {})


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol show job -o ID`: one line of Key=Value pairs (values may hold spaces only in known keys)."""
    fields: dict[str, str] = {}
    for match in re.finditer(r"(\S+?)=(.*?)(?=\s+\S+?=|$)", text.strip()):
        fields[match.group(1)] = match.group(2)
    return fields


class SlurmProvider(Provider):
    name = "slurm"

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        # The environment the Slurm commands run with (tests point SLURM_CONF at their cluster).
        self.environ = dict(os.environ if environ is None else environ)

    # -- render / submit ----------------------------------------------------------------
    def render(self, spec: JobSpec) -> JobRequest:
        request = render_sbatch(spec, settings_of(spec))
        return ScriptJobRequest(provider=self.name, name=spec.name, spec=spec, request=request)

    def submit(self, request: JobRequest) -> JobHandle:
        sbatch: SbatchRequest = request.request
        Path(sbatch.runs_dir).mkdir(parents=True, exist_ok=True)  # Slurm does not create --output's folder
        env = {**self.environ, **{name: request.spec.environment[name] for name in sbatch.secret_names}}
        result = run_tool(sbatch.argv, stdin=sbatch.script, env=env, what="sbatch")
        job_id = result.stdout.strip().split(";")[0]  # --parsable: "ID" or "ID;CLUSTER"
        if not JOB_ID.match(job_id):
            raise CloudDDPError(f"sbatch answered {result.stdout.strip()!r}, not a job id.")
        return JobHandle(provider=self.name, job_id=job_id, details={"runs_dir": sbatch.runs_dir})

    # -- follow-up calls ------------------------------------------------------------------
    def check_id(self, job_id: str) -> str:
        if not JOB_ID.match(job_id):
            raise CloudDDPError(f"{job_id!r} is not a Slurm job id (a number, as sbatch printed it).")
        return job_id

    def describe(self, job_id: str) -> dict[str, str] | None:
        """scontrol's record of the job, or None once Slurm has forgotten it (MinJobAge after the end)."""
        result = run_tool(["scontrol", "show", "job", "-o", self.check_id(job_id)], env=self.environ, check=False)
        if result.returncode != 0:
            if "Invalid job id" in result.stderr:
                return None
            run_tool(["scontrol", "show", "job", "-o", job_id], env=self.environ, what="scontrol")
        return parse_scontrol(result.stdout)

    def accounting(self, job_id: str) -> dict[str, str] | None:
        """sacct's record, where accounting storage exists (it needs slurmdbd)."""
        argv = ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ExitCode,NodeList"]
        try:
            result = run_tool(argv, env=self.environ, check=False)
        except CloudDDPError:
            return None
        rows = [line.split("|") for line in result.stdout.splitlines() if line.strip()]
        if result.returncode != 0 or not rows:
            return None
        state, exit_code, nodes = rows[0][:3]
        return {"JobState": state.split()[0], "ExitCode": exit_code, "NodeList": nodes}

    def status(self, job_id: str) -> JobStatus:
        record = self.describe(job_id) or self.accounting(job_id)
        if record is None:
            raise CloudDDPError(
                f"Slurm does not know job {job_id} (any more): scontrol forgets jobs MinJobAge after they end, "
                f"and sacct needs accounting storage (slurmdbd)."
            )
        slurm_state = record.get("JobState", "UNKNOWN")
        state = JOB_STATE_OF_SLURM_STATE.get(slurm_state, "RUNNING")
        code_text, _, signal = record.get("ExitCode", "0:0").partition(":")
        exit_code = int(code_text) if code_text.isdigit() else None
        if exit_code == 0 and signal.isdigit() and int(signal):
            exit_code = 128 + int(signal)
        reason = record.get("Reason", "")
        reason = "" if reason in ("None", "") else reason
        nodes = {host: slurm_state.lower() for host in self.hosts(record)}
        stdout = record.get("StdOut", "")
        artifacts = str(Path(stdout).with_suffix("") / "model") if stdout.endswith(".out") else None
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
        if record is None or not record.get("StdOut"):
            raise CloudDDPError(f"no output file known for Slurm job {job_id} (scontrol show job {job_id}).")
        path, hosts = Path(record["StdOut"]), self.hosts(record)
        position, partial = 0, ""
        while True:
            done = self.status(job_id).done if follow else True
            if path.is_file():
                with open(path, "rb") as handle:
                    handle.seek(position)
                    chunk = handle.read()
                    position = handle.tell()
                lines = (partial + chunk.decode(errors="replace")).split("\n")
                partial = lines.pop()
                yield from (self.labelled(line, hosts) for line in lines)
            if done:
                if partial:
                    yield self.labelled(partial, hosts)
                return
            time.sleep(1.0)
            hosts = hosts or self.hosts(self.describe(job_id) or {})

    @staticmethod
    def labelled(line: str, hosts: list[str]) -> str:
        match = LABELLED.match(line)
        if not match:
            return f"[batch] {line}"
        task = int(match.group(1))
        host = hosts[task] if task < len(hosts) else f"task {task}"  # one task per node: task N runs on node N
        return f"[{host}] {match.group(2)}"

    def cancel(self, job_id: str) -> None:
        run_tool(["scancel", self.check_id(job_id)], env=self.environ, what="scancel")


def create(**options: Any) -> SlurmProvider:
    return SlurmProvider(**options)
