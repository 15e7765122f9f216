"""The launcher under a real Slurm: slurmctld + two slurmd on 127.0.0.1, sbatch + srun.

Nothing here fakes SLURM_* variables: Slurm sets them, cloudddp-launch reads them, and
the two nodes do a real gloo all-reduce. Needs Debian's slurm-wlm and munge and root;
`.ci/run` installs them. Skipped elsewhere, except in CI where a missing Slurm fails.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import PYTHON, REPO, SOURCES
from helpers.slurm_cluster import SlurmCluster, slurm_cluster

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), nodes=2) as cluster:
        yield cluster


def test_two_slurm_nodes_all_reduce_through_cloudddp_launch(slurm: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "out"
    step = (f"srun --kill-on-bad-exit=1 {PYTHON} -m cloudddp.launcher --host-map n1=127.0.0.1 "
            f"{SOURCES / 'allreduce_check.py'} --out-dir {out}")  # fmt: skip
    job = subprocess.run(
        ["sbatch", "--wait", "--parsable", "-N2", "--ntasks-per-node=1", "-o", str(tmp_path / "job.log"),
         f"--chdir={REPO}", "--wrap", step],
        env=slurm.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    log = (tmp_path / "job.log").read_text() if (tmp_path / "job.log").exists() else ""
    assert job.returncode == 0, job.stderr + log
    job_id = int(job.stdout.strip().split(";")[0])
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["sum"] for r in results] == [3.0, 3.0]
    assert "provider=slurm node 0/2" in log and "provider=slurm node 1/2" in log
    # The master port is derived from the job id, so two jobs on one node don't collide.
    assert f"127.0.0.1:{20000 + 2 * (job_id % 6000)}" in log


def test_a_failing_slurm_node_fails_the_job(slurm: SlurmCluster, tmp_path: Path) -> None:
    step = (f"srun --kill-on-bad-exit=1 {PYTHON} -m cloudddp.launcher --host-map n1=127.0.0.1 "
            f"{SOURCES / 'allreduce_check.py'} --out-dir {tmp_path} --fail-rank 1 --fail-code 3")  # fmt: skip
    job = subprocess.run(
        ["sbatch", "--wait", "-N2", "--ntasks-per-node=1", "-o", str(tmp_path / "job.log"), f"--chdir={REPO}",
         "--wrap", step],
        env=slurm.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert job.returncode != 0
    assert "failing on purpose" in (tmp_path / "job.log").read_text()


def test_several_tasks_per_node_are_refused_by_every_task(slurm: SlurmCluster, tmp_path: Path) -> None:
    """`srun --ntasks-per-node=2 cloudddp-launch`: both launchers on a node would claim it. Each task refuses
    with exit 2 before starting anything (Slurm sets SLURM_STEP_TASKS_PER_NODE=2(x2)). The test cluster's nodes
    have one CPU each, so the step overcommits them (--overcommit)."""
    step = (f"srun --overcommit -N2 -n4 --ntasks-per-node=2 --label {PYTHON} -m cloudddp.launcher --host-map n1=127.0.0.1 "
            f"{SOURCES / 'allreduce_check.py'} --out-dir {tmp_path / 'out'}")  # fmt: skip
    job = subprocess.run(
        ["sbatch", "--wait", "-N2", "--ntasks-per-node=1", "-o", str(tmp_path / "job.log"),
         f"--chdir={REPO}", "--wrap", step],
        env=slurm.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    log = (tmp_path / "job.log").read_text() if (tmp_path / "job.log").exists() else ""
    assert job.returncode != 0 and log, job.stderr + log
    refusals = [line for line in log.splitlines() if "runs more than one task per node" in line]
    assert sorted(line.split(":")[0] for line in refusals) == ["0", "1", "2", "3"], log
    assert "SLURM_STEP_TASKS_PER_NODE='2(x2)'" in refusals[0] and "Traceback" not in log
    assert not (tmp_path / "out").exists()  # no training process started


def test_the_sbatch_template_runs_as_shipped(slurm: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**slurm.env, "PATH": f"{Path(PYTHON).parent}:{slurm.env['PATH']}", "CLOUDDDP_HOST_MAP": "n1=127.0.0.1"}
    job = subprocess.run(
        # This test cluster has 1 CPU per node: the template's 8 CPUs per task are overridden, nothing else.
        ["sbatch", "--wait", "--cpus-per-task=1", "-o", str(tmp_path / "job.log"), f"--chdir={REPO}",
         str(REPO / "infra" / "slurm" / "cloudddp.sbatch"), str(SOURCES / "allreduce_check.py"), "--out-dir", str(out)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert job.returncode == 0, job.stderr + (tmp_path / "job.log").read_text()
    assert [json.loads((out / f"rank{r}.json").read_text())["sum"] for r in range(2)] == [3.0, 3.0]
