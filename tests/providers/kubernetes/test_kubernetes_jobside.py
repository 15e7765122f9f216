"""The pods of a rendered manifest, run on this machine under the environment the operator injects:
each pod's own command, args and env from the manifest, plus the operator's variables, two pods,
a real gloo all-reduce over 127.0.0.1 (pod DNS names map to loopback through the launcher's host map).

- PyTorchJob v1 (static): the operator's variables come from the Kubeflow emulation of the local
  provider (`cloudddp.cluster.kubeflow.emulate`).
- PyTorchJob v1 elastic and Trainer v2: written here from upstream, as no emulation exists for them:
  kubeflow/training-operator pkg/controller.v1/pytorch/{envvar,elastic}.go (tag v1.9.0, commit
  6f74c7f6b2ed6c27aabd82d0a316b23f0646059c) and kubeflow/trainer
  pkg/runtime/framework/plugins/torch/torch.go (commit a55f03a8ccb7798a741ff3c4af502d367ed0f6d2).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import PYTHON, SOURCES, clean_env
from helpers.etcd import etcd  # noqa: F401  (the shared real-etcd fixture)

from cloudddp import session
from cloudddp.cluster.environment import EmulatedCluster
from cloudddp.cluster.kubeflow import emulate
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider
from cloudddp.providers.local.provider import free_port

pytestmark = pytest.mark.slow
WORKDIR = "/workspace"  # the manifest's workingDir; the source folder is mounted there in the image


def manifest(tmp_path: Path, metrics: dict[str, str] | None = None, **kubernetes: Any) -> dict[str, Any]:
    spec = build_spec({
        "name": "resnet", "entry_point": "allreduce_check.py", "source_dir": str(SOURCES), "nodes": 2,
        "nproc_per_node": 1, "args": ["--out-dir", str(tmp_path / "out")], "metrics": metrics or {},
        "kubernetes": {"image": "registry.example.com/train:1", "namespace": "team-a", **kubernetes},
    })  # fmt: skip
    return session.render(KubernetesProvider(), spec).request.body  # type: ignore[no-any-return]  # as every door


def in_image(words: list[str]) -> list[str]:
    """The image holds the code at /workspace; here it is the sources folder."""
    return [word.replace(WORKDIR, str(SOURCES)) for word in words]


def run_pods(pods: list[tuple[list[str], dict[str, str]]], host_map: str, tmp_path: Path) -> list[dict[str, Any]]:
    path = f"{Path(PYTHON).parent}:{os.environ['PATH']}"  # cloudddp-launch is on the image's PATH
    running = [
        subprocess.Popen(
            argv,
            cwd=SOURCES,
            env=clean_env({**env, "PATH": path, "CLOUDDDP_HOST_MAP": host_map}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for argv, env in pods
    ]
    outputs = [process.communicate(timeout=240)[0] for process in running]
    for process, output in zip(running, outputs, strict=True):
        assert process.returncode == 0, output[-3000:]
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("rank*.json"))]


def container_env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}


def test_pytorchjob_pods_all_reduce_under_the_operators_environment_and_keep_a_metrics_history(
    tmp_path: Path,
) -> None:
    replicas = manifest(tmp_path, metrics={"sum": r"all_reduce sum=([0-9.]+)"})["spec"]["pytorchReplicaSpecs"]
    operator = emulate(EmulatedCluster(nodes=2, job_name="resnet", run_dir=tmp_path / "emulated", nproc_per_node=1))
    port = str(free_port())  # the operator's 23456, moved so parallel test runs don't collide
    pods = []
    for node, role in zip(operator, ("Master", "Worker"), strict=True):
        container = replicas[role]["template"]["spec"]["containers"][0]
        env = {**container_env(container), **node.env, "MASTER_PORT": port, "PET_MASTER_PORT": port}
        env["CLOUDDDP_METRICS_DIR"] = str(tmp_path / "pods" / node.env["HOSTNAME"])  # each pod's own filesystem
        pods.append((in_image(container["command"] + container["args"]), env))
    results = run_pods(pods, "resnet-master-0=127.0.0.1", tmp_path)
    assert [(r["rank"], r["world_size"], r["sum"]) for r in results] == [(0, 2, 3.0), (1, 2, 3.0)]
    # The spec's metrics reached each pod's launcher (CLOUDDDP_METRICS in the manifest): a history per pod, named
    # after the pod, a row per rank
    rows = [json.loads(line) for f in sorted((tmp_path / "pods").rglob("metrics-*.jsonl"))
            for line in f.read_text().splitlines()]  # fmt: skip
    assert [(r["metric"], r["value"], r["node"], r["rank"]) for r in rows] == [
        ("sum", 3.0, "resnet-master-0", 0), ("sum", 3.0, "resnet-worker-0", 1)]  # fmt: skip
    assert all(isinstance(r["timestamp"], float) for r in rows)


def test_elastic_pytorchjob_pods_all_reduce_through_the_c10d_rendezvous(tmp_path: Path) -> None:
    body = manifest(tmp_path, elastic={"min_nodes": 2, "max_nodes": 2})
    container = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    port = free_port()  # elastic.go: the Worker container's port, 23456 by default
    # elastic.go sets PET_RDZV_ENDPOINT=resnet-worker-0:<port>. The launcher's host map rewrites the master
    # and local addresses but not a rendezvous endpoint (ClusterPlan.map_hosts), so the endpoint is given
    # as the address that name would resolve to here.
    pods = []
    for index in range(2):
        env = {**container_env(container), "PYTHONUNBUFFERED": "1", "HOSTNAME": f"resnet-worker-{index}",
               "PET_NPROC_PER_NODE": body["spec"]["nprocPerNode"], "PET_RDZV_ENDPOINT": f"127.0.0.1:{port}",
               "PET_RDZV_BACKEND": body["spec"]["elasticPolicy"]["rdzvBackend"], "PET_NNODES": "2:2"}  # fmt: skip
        pods.append((in_image(container["command"] + container["args"]), env))
    results = run_pods(pods, "resnet-worker-0=127.0.0.1", tmp_path)
    assert sorted(r["rank"] for r in results) == [0, 1] and {r["sum"] for r in results} == {3.0}


def test_elastic_pytorchjob_pods_all_reduce_through_an_etcd_rendezvous(tmp_path: Path, etcd: int) -> None:  # noqa: F811
    # The EKS guide's setup: an etcd service and elasticPolicy.rdzvBackend etcd(-v2).
    body = manifest(tmp_path, elastic={"min_nodes": 2, "max_nodes": 2, "rdzv_backend": "etcd-v2",
                                       "rdzv_host": "etcd-service", "rdzv_port": etcd})  # fmt: skip
    policy = body["spec"]["elasticPolicy"]
    container = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    pods = []
    for index in range(2):
        # elastic.go: PET_RDZV_ENDPOINT=<rdzvHost>:<rdzvPort>; the service name is given as its address here
        # (the launcher's host map does not rewrite rendezvous endpoints).
        env = {**container_env(container), "PYTHONUNBUFFERED": "1", "HOSTNAME": f"resnet-worker-{index}",
               "PET_NPROC_PER_NODE": body["spec"]["nprocPerNode"], "PET_RDZV_BACKEND": policy["rdzvBackend"],
               "PET_RDZV_ENDPOINT": f"127.0.0.1:{policy['rdzvPort']}", "PET_NNODES": "2:2"}  # fmt: skip
        pods.append((in_image(container["command"] + container["args"]), env))
    results = run_pods(pods, "etcd-service=127.0.0.1", tmp_path)
    assert sorted(r["rank"] for r in results) == [0, 1] and {r["sum"] for r in results} == {3.0}


def test_trainjob_pods_all_reduce_under_the_torch_runtimes_environment(tmp_path: Path) -> None:
    trainer = manifest(tmp_path, kubeflow_api="trainer-v2")["spec"]["trainer"]
    master = "resnet-node-0-0.resnet"  # torch.go at v2.3.0: <job>-node-0-0.<job> (constants.Node)
    port = str(free_port())  # torch.go: ContainerTrainerPort 29500, moved here
    pods = []
    for index in range(2):
        env = {**container_env(trainer), "PET_NNODES": str(trainer["numNodes"]),
               "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"]), "PET_NODE_RANK": str(index),
               "PET_MASTER_ADDR": master, "PET_MASTER_PORT": port}  # fmt: skip
        pods.append((in_image(trainer["command"] + trainer["args"]), env))
    results = run_pods(pods, f"{master}=127.0.0.1", tmp_path)
    assert [(r["rank"], r["world_size"], r["sum"]) for r in results] == [(0, 2, 3.0), (1, 2, 3.0)]
