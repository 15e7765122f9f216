"""A whole cloudddp provider in one file, registered through the `cloudddp.providers` entry point.

It runs the job's script once, as a plain subprocess on this machine, when the job is
submitted: enough to prove that a third-party provider plugs into the job spec, the CLI,
the Estimator and `run_job` with nothing but this file and its entry point. The tests copy
it next to a `.dist-info` folder whose entry_points.txt says
`[cloudddp.providers] throwaway = throwaway_provider:PROVIDER`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudddp.providers.base import JobHandle, JobRequest, JobStatus, Provider
from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.spec import Section


class ThrowawaySettings(Section):
    greeting: str = "hello"
    folder: str = "throwaway-runs"


@dataclass
class ThrowawayRequest:
    """What `submit` runs: exactly this argv, in this folder, with this variable."""

    argv: list[str]
    cwd: str
    greeting: str
    run_dir: str

    def to_document(self) -> dict[str, Any]:
        return {"argv": self.argv, "cwd": self.cwd, "env": {"GREETING": self.greeting}, "run_dir": self.run_dir}


class ThrowawayProvider(Provider):
    name = "throwaway"

    def render(self, spec: Any) -> JobRequest[ThrowawayRequest]:
        spec.require_source()
        program = ["-m", spec.entry_point] if spec.module else [spec.entry_point]
        run_dir = Path(spec.throwaway.folder).resolve() / spec.name
        request = ThrowawayRequest(argv=[sys.executable, *program, *spec.script_args()],
                                   cwd=str(Path(spec.source_dir).resolve()), greeting=spec.throwaway.greeting,
                                   run_dir=str(run_dir))  # fmt: skip
        return JobRequest(provider=self.name, name=spec.name, spec=spec, request=request)

    def submit(self, job: JobRequest[ThrowawayRequest]) -> JobHandle:
        run = job.request
        Path(run.run_dir).mkdir(parents=True, exist_ok=True)
        with open(Path(run.run_dir) / "log", "w") as log:
            done = subprocess.run(run.argv, cwd=run.cwd, env={"GREETING": run.greeting}, stdout=log, stderr=log)
        (Path(run.run_dir) / "exit_code").write_text(str(done.returncode))
        return JobHandle(provider=self.name, job_id=run.run_dir)

    def status(self, job_id: str) -> JobStatus:
        code = int((Path(job_id) / "exit_code").read_text())
        return JobStatus(job_id=job_id, state="SUCCEEDED" if code == 0 else "FAILED", exit_code=code)

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        for line in (Path(job_id) / "log").read_text().splitlines():
            yield f"[throwaway] {line}"

    def cancel(self, job_id: str) -> None:
        """Jobs end before submit returns: nothing to stop."""


PROVIDER = ProviderInfo(
    name="throwaway",
    summary="runs the script once, right away, on this machine (a test provider)",
    settings=ThrowawaySettings,
    options=(
        Option("--greeting", "greeting", help="the GREETING variable of the job"),
        Option("--throwaway-folder", "folder", help="where runs go"),
    ),
    interrupt_stops_job=True,
    factory=ThrowawayProvider,
    install_hint="it ships with cloudddp's tests",
)
