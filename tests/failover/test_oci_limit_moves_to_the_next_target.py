"""Failover on the OCI loopback service: CreateJobRun for one shape is refused with 400 LimitExceeded (OCI's API
Errors page: "Fulfilling this request exceeds the Oracle-defined limit for this tenancy for this resource type"), as
the oci SDK raises it (ServiceError, code LimitExceeded); the job runs on the next target's shape."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import clean_env
from helpers.oci_loopback_server import (
    COMPARTMENT,
    IMAGE,
    IMAGE_ENV,
    LOG_GROUP,
    PROJECT,
    QUICK_SOURCES,
    WORK_DIR,
    ApiError,
    FakeOCI,
    ThrowawayKey,
)

from cloudddp import config, job_index
from cloudddp.config import target_specs
from cloudddp.failover import Failover, run_name, targets_from

NO_CAPACITY = "BM.GPU.A100-v2.8"
LIMIT = "Fulfilling this request exceeds the Oracle-defined limit for this tenancy for this resource type."


class LimitedOCI(FakeOCI):
    """The loopback service whose tenancy has no limit left for NO_CAPACITY."""

    def create_run(self, body: dict[str, Any]) -> dict[str, Any]:
        job = self.jobs.get(body.get("jobId", "")) or {}
        groups = (job.get("jobNodeConfigurationDetails") or {}).get("jobNodeGroupConfigurationDetailsList") or []
        if any((group.get("jobInfrastructureConfigurationDetails") or {}).get("shapeName") == NO_CAPACITY
               for group in groups):  # fmt: skip
            raise ApiError(400, "LimitExceeded", LIMIT)
        return super().create_run(body)


def test_a_limit_exceeded_run_moves_to_the_next_shape(
    oci_service: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = ThrowawayKey.generate()
    server = oci_service(key, kind=LimitedOCI, node_env=clean_env(IMAGE_ENV), hold_states=True)
    monkeypatch.setenv("CLOUDDDP_OCI_SERVICE_ENDPOINT", server.url)
    monkeypatch.setenv("OCI_CONFIG_FILE", str(key.write_config(tmp_path / ".oci")))
    monkeypatch.chdir(QUICK_SOURCES)
    common = {"compartment_id": COMPARTMENT, "project_id": PROJECT, "image": IMAGE, "work_dir": WORK_DIR,
              "log_group_id": LOG_GROUP}  # fmt: skip
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "name": "fo-oci", "entry_point": "quick_train.py", "args": ["--wait"], "oci": common,
        "targets": [{"name": "a100", "provider": "oci", "oci": {"shape": NO_CAPACITY}},
                    {"name": "e4", "provider": "oci", "oci": {"shape": "VM.Standard.E4.Flex"}}],
    }))  # fmt: skip
    said: list[str] = []
    found = targets_from(target_specs(config.job_spec("oci", job, {}), job, {}))
    assert Failover(found, say=said.append).run(wait=False) == 0

    assert len(server.calls("POST", r"/20190101/jobRuns$")) == 2
    attempts = job_index.attempts(run_name(found))
    assert [(a.target, a.state) for a in attempts] == [("a100", "moved on"), ("e4", "submitted")]
    assert "LimitExceeded" in attempts[0].reason and re.match(r"ocid1\.datasciencejobrun\.", attempts[1].job_id)
    assert any("no capacity on target 1 (a100, oci): LimitExceeded" in line for line in said)
