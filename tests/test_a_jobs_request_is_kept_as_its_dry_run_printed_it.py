"""Every launched job keeps what was sent as its dry run printed it (secrets masked) in the job index, so the
dashboard's job page shows the request for a job on any provider, not only a local run's request.yaml; and where
the provider records no course of its own, the page's timeline is the job index's (submitted, how it ended)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cloudddp import job_index, session
from cloudddp.job_spec import build_spec
from cloudddp.providers import JobHandle, JobRequest, JobStatus, Provider
from cloudddp.ui import server
from cloudddp.ui.log_stream import Followers

SECRET = "hf_abcdefghijklmnop123456"


class Service(Provider):
    """A provider whose service takes every job and keeps no copy of what it was sent."""

    name = "sagemaker"

    def render(self, spec: Any) -> JobRequest:
        return JobRequest(provider=self.name, name="job-1", spec=spec,
                          request={"Environment": dict(spec.environment), "Image": "train:1"})  # fmt: skip

    def submit(self, request: JobRequest) -> JobHandle:
        return JobHandle(self.name, "job-1")

    def status(self, job_id: str) -> JobStatus:
        return JobStatus(job_id=job_id, state="RUNNING", reason="")

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        return iter(())

    def cancel(self, job_id: str) -> None:
        pass


def test_the_index_keeps_the_dry_runs_text_and_the_job_page_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = build_spec({"name": "train", "entry_point": "train.py", "environment": {"HF_TOKEN": SECRET, "EPOCHS": "2"},
                       "sagemaker": {"region": "us-east-1", "role": "arn:aws:iam::123456789012:role/R"}})  # fmt: skip
    printed: list[str] = []
    assert session.run_job(Service(), spec, dry_run=True, say=printed.append) == 0
    assert session.run_job(Service(), spec, wait=False, say=lambda line: None) == 0

    kept = job_index.find("job-1", "sagemaker")
    assert kept is not None and kept.request == printed[0]
    assert SECRET not in printed[0] and "EPOCHS" in printed[0]

    monkeypatch.setattr(server, "get_provider", lambda name: Service())
    assert server.job_page(Followers(), "sagemaker", "job-1")["request"] == printed[0]


def test_a_provider_without_a_timeline_gets_the_indexs(monkeypatch: pytest.MonkeyPatch) -> None:
    service = Service()
    spec = build_spec({"name": "train", "entry_point": "train.py",
                       "sagemaker": {"region": "us-east-1", "role": "arn:aws:iam::123456789012:role/R"}})  # fmt: skip
    assert session.run_job(service, spec, wait=False, say=lambda line: None) == 0
    monkeypatch.setattr(server, "get_provider", lambda name: service)
    entry = job_index.find("job-1", "sagemaker")
    assert entry is not None
    running = server.job_page(Followers(), "sagemaker", "job-1")["events"]
    assert running == [{"time": entry.submitted, "node": "", "what": "submitted"}]

    monkeypatch.setattr(service, "status", lambda job_id: JobStatus(job_id=job_id, state="FAILED", reason="exit 3"))
    job_index.remember_state(entry.provider, entry.job_id, "FAILED")
    ended = job_index.find("job-1", "sagemaker")
    assert ended is not None and ended.finished is not None
    assert [(e["time"], e["what"]) for e in server.job_page(Followers(), "sagemaker", "job-1")["events"]] == [
        (entry.submitted, "submitted"), (ended.finished, "failed")]  # fmt: skip
