"""Failover on the real Slurm test cluster (two partitions over the same node, infra/slurm/test-cluster.sh).

- A partition set DOWN with `scontrol update`: the job sent there waits with reason PartitionDown (SchedMD/slurm
  src/common/job_state_reason.c WAIT_PART_DOWN, a row of cloudddp/capacity.py); past failover.pending_timeout it
  is cancelled and the job runs on the next target's partition.
- A client killed after sbatch accepted the job and before it recorded the id: the rerun finds the job by the name
  it was submitted under (squeue --me, Slurm's own) and adopts it; there is still one job of that name. Slurm's
  Torque wrappers' qstat (PBS's way where there is no qselect) finds the same job.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import PYTHON, SOURCES
from helpers.slurm_cluster import PARTITIONS, SlurmCluster, partition_down, slurm_cluster

from cloudddp import config, job_index
from cloudddp.config import target_specs
from cloudddp.failover import Failover, Target, attempt_name, run_name, targets_from
from cloudddp.providers import JobHandle, JobRequest
from cloudddp.providers.pbs.provider import PBSProvider
from cloudddp.providers.slurm.provider import SlurmProvider

pytestmark = [pytest.mark.slow, pytest.mark.slurm]
UP, DOWN = PARTITIONS[1], PARTITIONS[0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), nodes=1) as running:
        yield running


def slurm_targets(tmp_path: Path, *partitions: str, **failover: Any) -> list[Target]:
    """allreduce_check.py on one node (seconds), one target per partition."""
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "name": "fo-slurm", "entry_point": "allreduce_check.py", "source_dir": str(SOURCES), "nodes": 1,
        "args": ["--out-dir", str(tmp_path / "out")], "failover": failover,
        "slurm": {"launcher": f"{PYTHON} -m cloudddp.launcher", "host_map": {"n1": "127.0.0.1"},
                  "runs_dir": str(tmp_path / "runs")},
        "targets": [{"name": partition, "provider": "slurm", "slurm": {"partition": partition}}
                    for partition in partitions],
    }))  # fmt: skip
    return targets_from(target_specs(config.job_spec("slurm", job, {}), job, {}))


def job_state(cluster: SlurmCluster, job_id: str) -> str:
    said = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=cluster.env, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    return said.split("JobState=", 1)[1].split()[0]


def test_a_job_on_a_down_partition_moves_to_the_next_after_the_pending_timeout(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    found = slurm_targets(tmp_path, DOWN, UP, pending_timeout=2)
    said: list[str] = []
    with partition_down(cluster, DOWN):
        run = Failover(found, say=said.append, provider_for=lambda _: SlurmProvider(environ=cluster.env), poll=0.5)
        assert run.run(logs=False) == 0, said
    attempts = job_index.attempts(run_name(found))
    assert [(a.target, a.state) for a in attempts] == [(DOWN, "moved on"), (UP, "succeeded")], said
    assert "PartitionDown" in attempts[0].reason
    assert job_state(cluster, attempts[0].job_id) == "CANCELLED"  # the first job was cancelled, not left queued
    assert sorted(path.name for path in (tmp_path / "out").glob("rank*.json")) == ["rank0.json"]


class Killed(BaseException):
    """kill -9 of the client: nothing of cloudddp runs after it."""


class KilledAfterSbatch(SlurmProvider):
    def submit(self, request: JobRequest) -> JobHandle:
        super().submit(request)
        raise Killed


def test_a_rerun_adopts_the_job_sbatch_accepted_for_a_killed_client(cluster: SlurmCluster, tmp_path: Path) -> None:
    found = slurm_targets(tmp_path, UP)
    name = attempt_name(found[0])
    with partition_down(cluster, UP):  # the job waits: it is found in the queue
        with pytest.raises(Killed):
            Failover(found, provider_for=lambda _: KilledAfterSbatch(environ=cluster.env)).run(wait=False)
        (left,) = job_index.attempts(run_name(found))
        assert (left.state, left.job_id) == ("submitting", name)
        queued = subprocess.run(["squeue", "--me", "--noheader", f"--name={name}", "--format=%i"],
                                env=cluster.env, capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
        assert len(queued) == 1  # sbatch --job-name: the attempt's name
        said: list[str] = []
        provider = SlurmProvider(environ=cluster.env)
        assert Failover(found, say=said.append, provider_for=lambda _: provider).run(wait=False) == 0
        (adopted,) = job_index.attempts(run_name(found))
        assert (adopted.state, adopted.job_id) == ("submitted", queued[0])
        assert any(line.startswith(f"cloudddp: adopting {queued[0]} ") for line in said)
        again = subprocess.run(["squeue", "--me", "--noheader", f"--name={name}", "--format=%i"],
                               env=cluster.env, capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
        assert again == queued  # one job, not two
        if shutil.which("qstat", path=cluster.env.get("PATH")):  # Slurm's Torque wrappers (slurm-wlm-torque)
            assert PBSProvider(environ=cluster.env).find_by_name(name, found[0].spec) == queued[0]
        provider.cancel(queued[0])
