"""Recovery on a real Slurm (Debian's slurm-wlm + munge, two node names on 127.0.0.1): an elastic job that
loses a node, and a job requeued after it checkpointed on Slurm's warning signal.

Nothing is faked: sbatch/scontrol/scancel are Slurm's own, Slurm sets SLURM_* in the job, and the launchers
rendezvous on 127.0.0.1 through the launcher's host map (n1/n2 do not resolve). Every step waits for a log
line or a job state, never for a fixed time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import PYTHON, SOURCES
from helpers.slurm_cluster import SlurmCluster, slurm_cluster

from cloudddp.job_spec import JobSpec
from cloudddp.providers.slurm.provider import SlurmProvider

pytestmark = [pytest.mark.slow, pytest.mark.slurm]
# 96 training images, 8 per batch: 6 steps an epoch on two nodes, 12 on one. One epoch unless a test asks for more.
TRAIN_ARGS = ["--arch", "tiny", "--epochs", "1", "--image-size", "16", "--batch-size", "8", "--lr", "0.05",
              "--log-steps", "--checkpoint-every", "1", "--step-sleep", "0.3"]  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), nodes=2) as running:
        yield running


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cloudddp.demo_data import write_demo_dataset

    root = tmp_path_factory.mktemp("data")
    write_demo_dataset(root, train_per_class=48, val_per_class=16)
    return root


def spec(tmp_path: Path, data: Path, name: str, **top: object) -> JobSpec:
    slurm = {"launcher": f"{PYTHON} -m cloudddp.launcher", "host_map": {"n1": "127.0.0.1", "n2": "127.0.0.1"},
             "runs_dir": str(tmp_path / "runs"), **top.pop("slurm", {})}  # type: ignore[dict-item]  # fmt: skip
    return JobSpec.model_validate({
        "name": name, "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2, "nproc_per_node": 1,
        "inputs": {"train": str(data / "train"), "val": str(data / "val")}, "args": TRAIN_ARGS,
        "environment": {"OMP_NUM_THREADS": "1"}, "slurm": slurm, **top,
    })  # fmt: skip


def output(tmp_path: Path, name: str, job_id: str) -> str:
    path = tmp_path / "runs" / f"{name}-{job_id}.out"
    return path.read_text(errors="replace") if path.is_file() else ""


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


def done(provider: SlurmProvider, job_id: str) -> bool:
    return provider.status(job_id).done


def processes_of_task(job_id: str, node_id: int) -> list[int]:
    """Every process Slurm started for task `node_id` of the job's step 0 (launcher, torchrun, workers)."""
    wanted = {f"SLURM_JOB_ID={job_id}", f"SLURM_NODEID={node_id}", "SLURM_STEP_ID=0"}
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                variables = set((entry / "environ").read_bytes().decode(errors="replace").split("\0"))
            except OSError:
                continue
            if wanted <= variables:
                found.append(int(entry.name))
    return found


def test_an_elastic_job_loses_a_node_and_the_survivor_finishes(
    cluster: SlurmCluster, data: Path, tmp_path: Path
) -> None:
    provider = SlurmProvider(environ=cluster.env)
    hold = tmp_path / "hold"
    hold.touch()  # both nodes hold after step 1 and its checkpoint until n2 is gone: the kill lands mid-epoch
    # 1:2 nodes; the survivor re-forms alone after 2 s of last call instead of torchrun's 30 s.
    job = spec(tmp_path, data, "elastic", min_nodes=1, max_restarts=2, args=[*TRAIN_ARGS, "--hold-while", str(hold)],
               slurm={"launcher_args": ["--torchrun-arg=--rdzv-conf=last_call_timeout=2"]})  # fmt: skip
    job_id = provider.submit(provider.render(job)).job_id
    try:
        # Slurm gave both nodes of the range and training runs on both.
        wait_for(lambda: "world_size=2" in output(tmp_path, "elastic", job_id), 240, "training on two nodes")
        wait_for(lambda: "checkpoint at step 1:" in output(tmp_path, "elastic", job_id), 120, "step 1's checkpoint")
        lost = processes_of_task(job_id, 1)
        assert lost, "found no process of task 1"
        for pid in lost:  # every process of node n2 at once: a machine that vanished
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        hold.unlink()  # n1 goes on to step 2, whose all-reduce finds n2 gone
        wait_for(lambda: "world_size=1" in output(tmp_path, "elastic", job_id), 180, "n1 to re-form alone")
        print(f"kill -9 of n2 -> the survivor resumed alone: {time.monotonic() - killed:.1f} s")
        wait_for(lambda: done(provider, job_id), 300, "the job to end")
    finally:
        subprocess.run(["scancel", job_id], env=cluster.env, capture_output=True)
    log, final = output(tmp_path, "elastic", job_id), provider.status(job_id)
    assert final.state == "SUCCEEDED", (final, log[-4000:])
    # The timeline: n1's launcher recorded its end (exit/node-0); n2, killed, left no record, so no end of its own.
    ends = [(event.node, event.what) for event in provider.events(job_id) if event.what != "started"]
    assert ends == [("", "submitted"), ("n1", "succeeded"), ("", "succeeded")], ends
    assert "provider=slurm node 1/1:2" in log and "rdzv=c10d@127.0.0.1:" in log  # both launchers, elastic
    assert "node(s) 1 were lost and the other 1 finished: the elastic job succeeded" in log
    resumed = re.search(r"resumed from \S+ at step (\d+) .*world_size=1", log)
    assert resumed, log[-4000:]
    # n2 died while both nodes held after step 1's checkpoint: training goes on alone from step 2.
    assert resumed.group(1) == "1" and "step=2 epoch=1" in log[resumed.end() :], log[-4000:]
    metrics = json.loads((tmp_path / "runs" / f"elastic-{job_id}" / "model" / "metrics.json").read_text())
    assert metrics["epoch"] == 1 and metrics["world_size"] == 1
    assert not processes_of_task(job_id, 0) and not processes_of_task(job_id, 1)


def test_a_requeued_job_resumes_from_the_checkpoint_it_wrote_on_the_warning(
    cluster: SlurmCluster, data: Path, tmp_path: Path
) -> None:
    provider = SlurmProvider(environ=cluster.env)
    # Two epochs: the warning comes at step 3 of 12, with room to stop before the end whatever the machine's load.
    job = spec(tmp_path, data, "requeued", args=[*TRAIN_ARGS, "--epochs", "2"], slurm={"requeue": True})
    job_id = provider.submit(provider.render(job)).job_id
    try:
        wait_for(lambda: "step=3 " in output(tmp_path, "requeued", job_id), 240, "step 3")
        # What `--signal=B:USR1@N` makes Slurm do before the time limit (and at preemption with
        # PreemptParameters=send_user_signal): signal the batch shell, which passes it on.
        subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], env=cluster.env, check=True)
        wait_for(lambda: done(provider, job_id), 120, "the warned job to stop")
        first = output(tmp_path, "requeued", job_id)
        saved = re.search(r"stop requested \([^)]*\): checkpoint at step (\d+) is saved", first)
        assert saved, first[-3000:]
        # The scheduler puts the job back in the queue (what PreemptMode=REQUEUE does); it starts again
        # after cred_expire + 1 s (infra/slurm/test-cluster.sh) from the top of the same script.
        subprocess.run(["scontrol", "requeue", job_id], env=cluster.env, check=True)
        wait_for(lambda: "resumed from" in output(tmp_path, "requeued", job_id), 240, "the requeued run to resume")
        wait_for(lambda: done(provider, job_id), 240, "the requeued run to end")
    finally:
        subprocess.run(["scancel", job_id], env=cluster.env, capture_output=True)
    log, final = output(tmp_path, "requeued", job_id), provider.status(job_id)
    assert final.state == "SUCCEEDED", (final, log[-4000:])
    record = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=cluster.env, capture_output=True, text=True)
    assert "Restarts=1" in record.stdout, record.stdout
    # --open-mode=append kept the first run's lines; the second resumed at the step the first saved.
    assert log.index("stop requested") < log.index("resumed from")
    assert f"at step {saved.group(1)} " in log[log.index("resumed from") :].splitlines()[0]
    metrics = json.loads((tmp_path / "runs" / f"requeued-{job_id}" / "model" / "metrics.json").read_text())
    assert metrics["epoch"] == 2 and metrics["world_size"] == 2
