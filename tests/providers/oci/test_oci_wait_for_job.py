"""Submitting waits for the new job to leave CREATING (oci.wait_until on GetJob); the loopback service tests
cover the job that is ACTIVE at the first look, these the two ways it can go wrong."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from cloudddp.errors import CloudDDPError
from cloudddp.providers.oci.provider import OCIProvider


class JobsStuckIn:
    """A Data Science client whose GetJob always answers `state` (as the SDK's response object does)."""

    def __init__(self, state: str) -> None:
        self.state, self.gets = state, 0

    def get_job(self, job_id: str) -> Any:
        self.gets += 1
        return SimpleNamespace(request=SimpleNamespace(method="GET"), data=SimpleNamespace(lifecycle_state=self.state))


def job(state: str) -> Any:
    return SimpleNamespace(id="ocid1.datasciencejob.oc1.iad.aaaa", lifecycle_state=state, lifecycle_details="quota")


def test_a_job_still_creating_at_the_deadline_is_an_error_naming_it() -> None:
    client = JobsStuckIn("CREATING")
    with pytest.raises(
        CloudDDPError, match=r"the job ocid1\.datasciencejob\.oc1\.iad\.aaaa is still CREATING after 0 s"
    ):
        OCIProvider(environ={}).wait_for_job(client, job("CREATING"), timeout=0)
    assert client.gets == 1


def test_a_job_that_fails_to_create_is_an_error_with_its_state() -> None:
    with pytest.raises(CloudDDPError, match="is FAILED, not ACTIVE: quota"):
        OCIProvider(environ={}).wait_for_job(JobsStuckIn("FAILED"), job("FAILED"))
    client = JobsStuckIn("FAILED")
    with pytest.raises(CloudDDPError, match="is FAILED, not ACTIVE"):
        OCIProvider(environ={}).wait_for_job(client, job("CREATING"))
    assert client.gets == 1
