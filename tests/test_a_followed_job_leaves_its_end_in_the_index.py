"""A launch that follows its job to the end leaves that end in the job index, so `cloudddp list` shows how the job
ended without asking its provider again, which may no longer know it (a local run folder removed, credentials
expired): it showed "unknown (never seen)" for a job the launch had watched succeed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers import cli

from cloudddp import job_index, session
from cloudddp import providers as providers_module
from cloudddp.job_spec import build_spec
from cloudddp.providers import JobHandle, JobRequest, JobStatus, Provider


class EndsThenForgets(Provider):
    """A service whose job succeeds while the launch follows it and that knows nothing of it afterwards."""

    name = "sagemaker"
    forgot = False

    def render(self, spec: Any) -> JobRequest:
        return JobRequest(provider=self.name, name="job-1", spec=spec, request={"Image": "train:1"})

    def submit(self, request: JobRequest) -> JobHandle:
        return JobHandle(self.name, "job-1")

    def status(self, job_id: str) -> JobStatus:
        if self.forgot:
            raise RuntimeError("no such job")
        return JobStatus(job_id=job_id, state="SUCCEEDED", reason="")

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        return iter(["epoch=1 loss=0.5"])

    def cancel(self, job_id: str) -> None:
        pass


def test_list_shows_the_end_the_launch_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    service = EndsThenForgets()
    spec = build_spec({"name": "train", "entry_point": "train.py",
                       "sagemaker": {"region": "us-east-1", "role": "arn:aws:iam::123456789012:role/R"}})  # fmt: skip
    assert session.run_job(service, spec, wait=True, logs=True, say=lambda line: None) == 0
    entry = job_index.find("job-1", "sagemaker")
    assert entry is not None and entry.state == "SUCCEEDED" and entry.finished is not None

    service.forgot = True
    monkeypatch.setattr(providers_module, "get_provider", lambda name, **kw: service)
    listed = cli("list", "--deadline", "1")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[:3] == ["train", "sagemaker", "SUCCEEDED"]
