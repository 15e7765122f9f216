"""End to end (full tier), the issue's case: `cloudddp launch -f job.yaml` with targets [sagemaker, local] is killed
with SIGKILL the moment SageMaker (moto behind the capacity proxy) has created its job, before the answer reaches
it; the rerun finds the open attempt, adopts that job and creates none: one CreateTrainingJob in all."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import PYTHON, SOURCES, clean_env, run_cli
from helpers.capacity_proxy import CapacityProxy
from helpers.sagemaker_fixtures import set_job_status

from cloudddp import job_index


@pytest.mark.slow
def test_a_client_killed_after_create_training_job_is_adopted_on_rerun(
    moto_server: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "allreduce_check.py").write_text((SOURCES / "allreduce_check.py").read_text())
    targets = [{"name": "m5", "provider": "sagemaker", "sagemaker": {"instance_type": "ml.m5.xlarge"}},
               {"provider": "local", "local": {"runs_dir": str(tmp_path / "runs")}}]  # fmt: skip
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({"name": "fo-kill", "entry_point": "allreduce_check.py",
                                                       "targets": targets}))  # fmt: skip
    client: list[subprocess.Popen[str]] = []

    def kill_the_client(job: str) -> None:  # moto created it; the answer is not sent yet
        set_job_status(job, "InProgress", "Starting")  # moto ends every job at once; a real one starts for a while
        os.kill(client[0].pid, signal.SIGKILL)  # it waits for this answer: it dies before reading it

    with CapacityProxy(moto_server["AWS_ENDPOINT_URL"], refused=set(), on_create=kill_the_client) as proxy:
        env = clean_env({**moto_server, "AWS_ENDPOINT_URL": proxy.url})
        client.append(subprocess.Popen([PYTHON, "-c", "from cloudddp.console import main; main()", "launch", "-f",
                                        "job.yaml"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True))  # fmt: skip
        out, _ = client[0].communicate(timeout=180)
        assert client[0].returncode == -signal.SIGKILL, out
        (left,) = job_index.read_attempts("ORDER BY id", ())
        assert left.state == "submitting" and not left.ended  # killed before it heard the job's name back

        proxy.on_create = None
        rerun = run_cli("launch", "-f", "job.yaml", "--no-wait", cwd=tmp_path, env=env, timeout=180)

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    creates = [name for operation, _, name in proxy.requests if operation == "CreateTrainingJob"]
    assert creates == [left.job_id]  # one job, under the name the index held before it was sent
    assert f"cloudddp: adopting {left.job_id} (sagemaker, target 1: m5)" in rerun.stdout + rerun.stderr
    (adopted,) = job_index.read_attempts("ORDER BY id", ())
    assert (adopted.id, adopted.state, adopted.job_id) == (left.id, "submitted", left.job_id)
    assert [entry.job_id for entry in job_index.entries()] == [left.job_id]
