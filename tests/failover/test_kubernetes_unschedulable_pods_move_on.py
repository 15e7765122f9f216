"""Kubernetes through the API fake: a job whose pods the scheduler cannot place (PodScheduled False, reason
Unschedulable, as kube-scheduler's handleSchedulingFailure writes it; kubernetes/api core/v1/types.go
PodReasonUnschedulable) is pending for that reason in `status`, and failover cancels it after
failover.pending_timeout and runs the job on the next target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from helpers import SOURCES
from helpers.kubernetes_apiserver import FakeAPIServer, FakePod

from cloudddp import config, job_index
from cloudddp.config import target_specs
from cloudddp.failover import Failover, attempt_name, run_name, targets_from
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider

NO_GPU = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available."
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": NO_GPU}


def job_data(kubeconfig: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2,
        "inputs": {"train": "pvc://datasets/demo"},
        "kubernetes": {"image": "registry.example.com/train:1", "kubeconfig": str(kubeconfig)}, **extra,
    }  # fmt: skip


def waiting_pods(fake: FakeAPIServer, namespace: str, job: str, *conditions: dict[str, str]) -> None:
    for rank, role in enumerate(("master", "worker")):
        fake.add_pod(FakePod(namespace, f"{job}-{role}-0", {"training.kubeflow.org/job-name": job}, "pytorch",
                             phase="Pending", conditions=[dict(c) for c in conditions] if rank == 1 else []))  # fmt: skip


def test_status_of_a_pending_job_says_its_pods_are_unschedulable(kube_api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = kube_api
    provider = KubernetesProvider()
    job_id = provider.submit(provider.render(build_spec(job_data(kubeconfig)))).job_id
    fake.set_conditions("pytorchjobs", "training", "resnet", [{"type": "Created", "status": "True",
                                                              "reason": "PyTorchJobCreated"}])  # fmt: skip
    waiting_pods(fake, "training", "resnet", {**UNSCHEDULABLE, "status": "True"})  # scheduled after all: not it
    assert provider.status(job_id).reason == "PyTorchJobCreated"
    fake.pods.clear()
    waiting_pods(fake, "training", "resnet", UNSCHEDULABLE)
    current = provider.status(job_id)
    assert current.state == "PENDING"
    assert current.reason == f"Unschedulable: pod resnet-worker-0: {NO_GPU}"


def test_unschedulable_pods_past_the_pending_timeout_move_the_job_to_the_next_target(
    kube_api: tuple[FakeAPIServer, Path], tmp_path: Path
) -> None:
    fake, kubeconfig = kube_api
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(job_data(kubeconfig, failover={"pending_timeout": 60}, targets=[
        {"name": "gpu", "provider": "kubernetes"},
        {"name": "other", "provider": "kubernetes", "kubernetes": {"context": "other"}},
    ])))  # fmt: skip
    targets = targets_from(target_specs(config.job_spec("kubernetes", job, {}), job, {}))
    first, second = (attempt_name(target) for target in targets)  # each job is named after its attempt
    now = [0.0]

    def sleep(seconds: float) -> None:  # the scheduler's side, as time passes
        now[0] += 30
        if ("pytorchjobs", "training", first) in fake.objects and not fake.pods:
            waiting_pods(fake, "training", first, UNSCHEDULABLE)
        if ("pytorchjobs", "other-team", second) in fake.objects:
            fake.set_conditions("pytorchjobs", "other-team", second, [{"type": "Succeeded", "status": "True"}])

    said: list[str] = []
    code = Failover(targets, say=said.append, clock=lambda: now[0], sleep=sleep).run(logs=False)
    assert code == 0
    attempts = job_index.attempts(run_name(targets))
    assert [(a.target, a.state) for a in attempts] == [("gpu", "moved on"), ("other", "succeeded")]
    assert "Unschedulable" in attempts[0].reason and NO_GPU in attempts[0].reason
    # The first job was cancelled (deleted) before the second was created.
    verbs = [(verb, path) for verb, path in fake.requests if verb in ("POST", "DELETE") and "pytorchjobs" in path]
    assert verbs == [
        ("POST", "/apis/kubeflow.org/v1/namespaces/training/pytorchjobs"),
        ("DELETE", f"/apis/kubeflow.org/v1/namespaces/training/pytorchjobs/{first}"),
        ("POST", "/apis/kubeflow.org/v1/namespaces/other-team/pytorchjobs"),
    ]
