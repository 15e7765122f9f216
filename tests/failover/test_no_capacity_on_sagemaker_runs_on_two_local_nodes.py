"""End to end (full tier): `cloudddp launch -f job.yaml` with targets [sagemaker without capacity, local] as a user
runs it. SageMaker (moto behind the capacity proxy) refuses CreateTrainingJob with ResourceLimitExceeded; the job
runs on 2 local nodes, whose all_reduce gives the expected sum; `cloudddp status` lists both attempts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from helpers import SOURCES, run_cli
from helpers.capacity_proxy import CapacityProxy


@pytest.mark.slow
def test_no_capacity_on_sagemaker_runs_on_two_local_nodes(moto_server: dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(SOURCES / "allreduce_check.py", project / "allreduce_check.py")
    targets = [
        {"name": "p4d", "provider": "sagemaker", "sagemaker": {"instance_type": "ml.p4d.24xlarge"}},
        {"provider": "local", "nodes": 2, "nproc_per_node": 1, "local": {"runs_dir": str(tmp_path / "runs")}},
    ]
    (project / "job.yaml").write_text(yaml.safe_dump({"name": "fo-e2e", "entry_point": "allreduce_check.py",
                                                      "targets": targets}))  # fmt: skip
    with CapacityProxy(moto_server["AWS_ENDPOINT_URL"], refused={"ml.p4d.24xlarge"}) as proxy:
        env = {**moto_server, "AWS_ENDPOINT_URL": proxy.url}
        result = run_cli("launch", "-f", "job.yaml", cwd=project, env=env, timeout=180)
        status = run_cli("status", "latest", cwd=project, env=env, timeout=60)

    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "no capacity on target 1 (p4d, sagemaker): ResourceLimitExceeded" in out
    assert "(local, target 2: local)" in out
    assert out.count("all_reduce sum=3 (expected 3)") == 2  # ranks 1 + 2 over the 2 nodes
    assert [operation for operation, _, _ in proxy.requests] == ["CreateTrainingJob"]
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert "attempts:" in lines
    attempts = lines[lines.index("attempts:") + 1 :]
    assert attempts[0].strip().startswith("1. p4d (sagemaker) fo-e2e-") and "moved on:" in attempts[0]
    assert attempts[1].strip().startswith("2. local (local) ") and attempts[1].rstrip().endswith("succeeded")
