"""An OCI job run's timeline (`events`), parsed from GetJobRun's answer as the service sends it (camelCase JSON,
Data Science API 20190101 JobRun) and the real SDK deserializes it (oci 2.189.0 DataScienceClient's own
deserializer, into data_science.models.JobRun and NodeGroupDetails). The single-node failure's wording is the
one ADS's tests show ("Job run artifact execution failed with exit code 21.", oracle/accelerated-data-science
tests/unitary/default_setup/jobs/test_jobs_run.py @0e785b9f); the node group's details are made up (the service's
wording is not published), as the fake's docstring says."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import oci

from cloudddp.providers.base import JobEvent
from cloudddp.providers.oci.provider import run_events


def at(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def job_run(config: Path, **fields: Any) -> Any:
    """The JobRun the SDK's get_job_run returns for this JSON body."""
    body = {"id": "ocid1.datasciencejobrun.oc1.iad.aaaa", "jobId": "ocid1.datasciencejob.oc1.iad.aaaa",
            "projectId": "ocid1.datascienceproject.oc1.iad.aaaa", "compartmentId": "ocid1.compartment.oc1..aaaa",
            "displayName": "resnet", "createdBy": "ocid1.user.oc1..aaaa", "timeAccepted": "2026-11-29T10:00:00.120Z",
            "timeStarted": None, "timeFinished": None, "lifecycleState": "ACCEPTED", "lifecycleDetails": None,
            "nodeGroupDetailsList": [{"name": "cloudddp", "lifecycleState": "CREATING", "lifecycleDetails": None}],
            **fields}  # fmt: skip
    client = oci.data_science.DataScienceClient(oci.config.from_file(str(config)))
    return client.base_client.deserialize_response_data(json.dumps(body).encode(), "JobRun")


def test_an_accepted_run_is_only_submitted(config: Path) -> None:
    assert run_events(job_run(config)) == [JobEvent(at("2026-11-29T10:00:00.120Z"), "", "submitted")]


def test_a_failed_multi_node_run_ends_with_its_node_groups_and_its_details(config: Path) -> None:
    run = job_run(
        config, timeStarted="2026-11-29T10:04:00.500Z", timeFinished="2026-11-29T10:09:30Z", lifecycleState="FAILED",
        lifecycleDetails="Job run artifact execution failed with exit code 21.",
        nodeGroupDetailsList=[{"name": "cloudddp", "lifecycleState": "FAILED", "lifecycleDetails": "1 node failed"}],
    )  # fmt: skip
    assert run_events(run) == [
        JobEvent(at("2026-11-29T10:00:00.120Z"), "", "submitted"),
        JobEvent(at("2026-11-29T10:04:00.500Z"), "", "started"),
        JobEvent(at("2026-11-29T10:09:30Z"), "cloudddp", "failed: 1 node failed"),
        JobEvent(at("2026-11-29T10:09:30Z"), "", "failed: Job run artifact execution failed with exit code 21."),
    ]


def test_a_canceled_run_reads_stopped_and_its_groups_as_left(config: Path) -> None:
    run = job_run(config, timeFinished="2026-11-29T10:01:00Z", lifecycleState="CANCELED",
                  nodeGroupDetailsList=[{"name": "cloudddp", "lifecycleState": "DELETED"}])  # fmt: skip
    assert [(event.node, event.what) for event in run_events(run)] == [
        ("", "submitted"), ("cloudddp", "deleted"), ("", "stopped")
    ]  # fmt: skip
