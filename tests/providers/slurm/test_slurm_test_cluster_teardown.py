"""The real-Slurm test cluster leaves nothing behind when a test ends while a job still runs (a timeout)."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
from helpers.slurm_cluster import slurm_cluster

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


def processes_running(marker: str) -> list[str]:
    listed = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in listed.splitlines() if marker in line and "ps -eo" not in line]


def test_stopping_the_cluster_ends_a_job_still_running(tmp_path_factory: pytest.TempPathFactory) -> None:
    # A unique sleep length names the job's processes: the batch shell, srun, slurmstepd's task.
    seconds = 100000 + uuid.uuid4().int % 100000
    marker = f"sleep {seconds}"
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), nodes=2) as cluster:
        submitted = subprocess.run(
            ["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "-o", "/dev/null", "--wrap", f"srun {marker}"],
            env=cluster.env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        deadline = time.monotonic() + 60
        while len(processes_running(marker)) < 2 and time.monotonic() < deadline:  # both nodes' tasks
            time.sleep(0.25)
        assert len(processes_running(marker)) >= 2, processes_running(marker)
    deadline = time.monotonic() + 10  # the OS may take a moment to reap what slurmd killed
    while processes_running(marker) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert processes_running(marker) == []
