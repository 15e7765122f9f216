"""Kubeflow's job side against the training-operator's and Trainer's own code (fixtures/kubeflow_upstream.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.kubeflow_upstream import v1_elastic_worker, v1_pod, v2_node
from helpers import REPO, launcher

from cloudddp.cluster import DetectOptions, kubeflow
from cloudddp.cluster.environment import EmulatedCluster
from cloudddp.errors import CloudDDPError


def test_v1_pods_agree_on_master_port_and_nodes() -> None:
    plans = [kubeflow.plan(v1_pod("resnet", r, 3), DetectOptions()) for r in range(3)]
    assert [p.node_rank for p in plans] == [0, 1, 2]
    assert {(p.master_addr, p.master_port, p.nnodes, p.nproc_per_node) for p in plans} == {
        ("resnet-master-0", 23456, 3, "auto")
    }


def test_v2_nodes_use_the_trainer_port() -> None:
    plans = [kubeflow.plan(v2_node("tj", r, 2), DetectOptions()) for r in range(2)]
    assert {(p.master_addr, p.master_port) for p in plans} == {("tj-node-0-0.tj", 29500)}


def test_two_elastic_jobs_sharing_a_rendezvous_server_get_their_own_ids() -> None:
    etcd = {"PET_RDZV_BACKEND": "etcd-v2", "PET_RDZV_ENDPOINT": "etcd.infra:2379"}
    first = [kubeflow.plan({**v1_elastic_worker("job-a", i, 1, 4), **etcd}, DetectOptions()) for i in range(2)]
    second = kubeflow.plan({**v1_elastic_worker("job-b", 0, 1, 4), **etcd}, DetectOptions())
    assert {p.rdzv_id for p in first} == {"job-a"}
    assert second.rdzv_id == "job-b"
    assert first[0].sources["rdzv_id"].startswith("HOSTNAME")


def test_the_jobs_own_rdzv_id_wins() -> None:
    env = {**v1_elastic_worker("job-a", 0, 1, 4), "PET_RDZV_ID": "explicit"}
    assert kubeflow.plan(env, DetectOptions()).rdzv_id == "explicit"


@pytest.mark.parametrize("name", ["MASTER_PORT", "PET_MASTER_PORT"])
@pytest.mark.parametrize("value", ["0", "65536", "99999"])
def test_ports_outside_the_tcp_range_are_named(name: str, value: str) -> None:
    env = {**v1_pod("resnet", 1, 2), "MASTER_PORT": "23456", "PET_MASTER_PORT": "23456", name: value}
    if name == "MASTER_PORT":
        del env["PET_MASTER_PORT"]  # PET_* wins when both are there
    with pytest.raises(CloudDDPError, match=f"{name}='{value}'.*between 1 and 65535"):
        kubeflow.plan(env, DetectOptions())


def test_an_elastic_endpoint_with_an_impossible_port_is_named() -> None:
    env = {**v1_elastic_worker("job", 0, 1, 2), "PET_RDZV_ENDPOINT": "job-worker-0:70000"}
    with pytest.raises(CloudDDPError, match="PET_RDZV_ENDPOINT='job-worker-0:70000'"):
        kubeflow.plan(env, DetectOptions())


def test_emulation_sets_every_variable_the_operator_sets(tmp_path: Path) -> None:
    nodes = kubeflow.emulate(EmulatedCluster(nodes=3, job_name="resnet", run_dir=tmp_path, nproc_per_node=2))
    for rank, node in enumerate(nodes):
        expected = v1_pod("resnet", rank, 3, nproc="2")
        assert {k: node.env.get(k) for k in expected} == expected


def test_emulating_a_job_without_nproc_per_node_gives_the_operators_auto(tmp_path: Path) -> None:
    """A PyTorchJob without nprocPerNode gets "auto" (pytorch_defaults.go setDefaultNprocPerNode, see the fixture's
    docstring) and WORLD_SIZE counts it as 1 (envvar.go getNprocPerNodeInt): the emulation said "1", hiding that."""
    nodes = kubeflow.emulate(EmulatedCluster(nodes=2, job_name="resnet", run_dir=tmp_path, nproc_per_node=None))
    for rank, node in enumerate(nodes):
        expected = v1_pod("resnet", rank, 2)
        assert {k: node.env.get(k) for k in expected} == expected


def test_the_operators_rdzv_conf_is_kept_when_the_launcher_adds_its_own() -> None:
    """torchrun reads PET_RDZV_CONF only as --rdzv-conf's default, which any --rdzv-conf replaces: the operator's
    elasticPolicy.rdzvConf (read_timeout here) was lost once --rdzv-timeout added join_timeout."""
    pod = v1_elastic_worker("job", 1, 1, 3, rdzv_conf={"read_timeout": "600", "join_timeout": "50"})
    script = str(REPO / "sources" / "allreduce_check.py")
    result = launcher("--dry-run", "--rdzv-timeout", "100", "--torchrun-arg=--rdzv-conf=read_timeout=700", script,
                          env=pod)  # fmt: skip
    assert result.returncode == 0, result.stderr
    confs = [arg for arg in json.loads(result.stdout)["argv"] if arg.startswith("--rdzv_conf")]
    # Every key, once; what the launcher was told wins over the pod's environment, the user's torchrun arg over both.
    assert confs == ["--rdzv_conf=join_timeout=100,read_timeout=700"]
    alone = launcher("--dry-run", "--rdzv-timeout", "100", script, env=pod)
    assert [a for a in json.loads(alone.stdout)["argv"] if a.startswith("--rdzv_conf")] == [
        "--rdzv_conf=read_timeout=600,join_timeout=100"
    ]


def test_a_workers_only_job_with_a_fixed_node_count_is_planned_as_the_rendezvous_numbers_it() -> None:
    """An elasticPolicy without min/maxReplicas gives PET_NNODES = the Worker count (elastic.go generateEnvNnodes at
    ee1162919408cbca4a899f2916cfcd0ecd562881), and without a Master the operator sets no RANK (envvar.go). Every pod
    planned itself node 0: each started the fail-fast channel as node 0, and a failing pod reported itself as the
    rank that never reached node 0 while the other waited out torchrun's 300 s exit barrier."""
    pod = {**v1_elastic_worker("job", 1, 1, 2), "PET_NNODES": "2"}
    result = launcher("--dry-run", str(REPO / "sources" / "allreduce_check.py"), env=pod)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["nnodes"] == "2:2" and "--nnodes=2:2" in plan["argv"]
    assert "assigned by the c10d rendezvous" in plan["sources"]["nnodes"]
    assert not any(arg.startswith("--node-rank") for arg in plan["argv"])
    fixed = launcher("--dry-run", str(REPO / "sources" / "allreduce_check.py"), env=v1_pod("job", 1, 2))
    assert json.loads(fixed.stdout)["nnodes"] == 2  # a job with a Master: ranks from the operator, as before
