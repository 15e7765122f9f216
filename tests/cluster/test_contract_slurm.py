"""Slurm's job side against what Slurm itself sets: fixtures captured from the real test cluster
(tests/cluster/fixtures/slurm/*.env, see their headers) and, for real, `sbatch`/`srun` on a 4-node
test cluster (infra/slurm/test-cluster.sh, shared through tests/helpers/slurm_cluster.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import PYTHON, REPO, SOURCES, launcher
from helpers.slurm_cluster import SlurmCluster, slurm_cluster

from cloudddp.cluster import DetectOptions, slurm

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
CHECK = str(SOURCES / "allreduce_check.py")


def captured(name: str) -> dict[str, str]:
    lines = (FIXTURES / name).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_a_step_on_part_of_the_allocation_plans_on_the_steps_hosts() -> None:
    plans = [slurm.plan(captured(f"step-2-of-4-node{r}.env"), DetectOptions()) for r in range(2)]
    assert [(p.node_rank, p.nnodes) for p in plans] == [(0, 2), (1, 2)]
    assert {tuple(p.hosts or []) for p in plans} == {("n3", "n4")}
    assert {p.master_addr for p in plans} == {"n3"}
    assert {p.rdzv_id for p in plans} == {"1.0"}
    assert plans[0].sources["hosts"] == "SLURM_STEP_NODELIST"


def test_the_batch_script_of_a_multi_node_allocation_is_refused_with_the_srun_advice() -> None:
    result = launcher("--dry-run", CHECK, env=captured("batch-step-4-nodes.env"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "not in a job step" in result.stderr and "srun --ntasks-per-node=1" in result.stderr
    assert "SLURM_JOB_NODELIST='n[1-4]'" in result.stderr


@pytest.fixture(scope="module")
def slurm4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm4"), nodes=4) as cluster:
        yield cluster


def sbatch(cluster: SlurmCluster, tmp: Path, script: str) -> tuple[subprocess.CompletedProcess[str], str]:
    log = tmp / "job.log"
    job = subprocess.run(
        ["sbatch", "--wait", "-N4", "--ntasks-per-node=1", "-o", str(log), f"--chdir={REPO}", "--wrap", script],
        env={**cluster.env, "CLOUDDDP_HOST_MAP": ",".join(f"{n}=127.0.0.1" for n in cluster.nodes)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return job, log.read_text() if log.exists() else ""


@pytest.mark.slow
@pytest.mark.slurm
def test_real_slurm_step_on_two_of_four_nodes_trains_and_the_batch_step_is_refused(
    slurm4: SlurmCluster, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    launch = f"{PYTHON} -m cloudddp.launcher"
    script = (
        f"{launch} --dry-run {CHECK}; echo batch-exit=$?; "
        f"srun -N2 -n2 -r2 --kill-on-bad-exit=1 {launch} {CHECK} --out-dir {out}"
    )
    job, log = sbatch(slurm4, tmp_path, script)
    assert job.returncode == 0, job.stderr + log
    assert "batch-exit=2" in log and "not in a job step" in log
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["sum"] for r in results] == [3.0, 3.0]
    assert "provider=slurm node 0/2" in log and "provider=slurm node 1/2" in log
