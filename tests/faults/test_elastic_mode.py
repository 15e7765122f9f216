"""Elastic mode on the client side: `--nodes MIN:MAX`, `min_nodes`, `max_restarts`, c10d or etcd-v2.

What a user cares about: the range reaches every node's torchrun as an elastic rendezvous, the
providers whose platforms start a fixed set of hosts (SageMaker, OCI) refuse it with the reason
before anything is uploaded, and a malformed range is named, exit 2.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SOURCES, clean_env, cli, run_cli
from helpers.etcd import etcd  # noqa: F401  (the real etcd fixture)

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import JobSpec, build_spec
from cloudddp.launcher.cli import run as launcher_run
from cloudddp.providers.local.provider import LocalProvider

CHECK = str(SOURCES / "allreduce_check.py")


def elastic_spec(**fields: Any) -> JobSpec:
    base = {"entry_point": "allreduce_check.py", "source_dir": str(SOURCES), "nodes": 3, "min_nodes": 2}
    return build_spec({**base, **fields})


def node_plans(spec: JobSpec, tmp_path: Path, master_port: int = 29611) -> list[dict]:
    """Each rendered node's command, planned by the real launcher (`--dry-run`) under the node's environment."""
    request = LocalProvider(runs_dir=tmp_path / "runs").render(spec).request
    plans = []
    for node in request.nodes:
        argv = node.argv(master_port)
        out = io.StringIO()
        # the script path is relative (contextlib.chdir is Python 3.11's; the project runs on 3.10 too)
        with contextlib.redirect_stdout(out), pytest.MonkeyPatch.context() as here:
            here.chdir(node.cwd)
            assert launcher_run(["--dry-run", *argv[3:]], clean_env(node.env)) == 0
        plans.append(json.loads(out.getvalue()))
    return plans


@pytest.mark.parametrize("emulate", ["none", "kubeflow", "slurm"])
def test_every_node_plans_the_elastic_range_on_node_0s_c10d_store(tmp_path: Path, emulate: str) -> None:
    spec = elastic_spec(max_restarts=3, local={"emulate": emulate})
    plans = node_plans(spec, tmp_path)
    assert len(plans) == 3
    for rank, plan in enumerate(plans):
        assert plan["nnodes"] == "2:3" and plan["rdzv_backend"] == "c10d" and plan["max_restarts"] == 3
        assert plan["rdzv_endpoint"] is None and f"--rdzv_endpoint=127.0.0.1:{29611}" in plan["argv"]
        assert len({p["rdzv_id"] for p in plans}) == 1  # one job, one rendezvous
        conf = [a for a in plan["argv"] if a.startswith("--rdzv_conf=")]
        # Node 0 hosts the c10d store, as the master host does on a real cluster.
        assert conf == [f"--rdzv_conf=last_call_timeout=2,is_host={'true' if rank == 0 else 'false'}"]
        assert "--nnodes=2:3" in plan["argv"] and "--max_restarts=3" in plan["argv"]


def test_etcd_v2_sends_every_node_to_the_etcd_server(tmp_path: Path) -> None:
    spec = elastic_spec(rdzv_backend="etcd-v2", rdzv_endpoint="127.0.0.1:2379", local={"emulate": "none"})
    for plan in node_plans(spec, tmp_path):
        assert plan["rdzv_backend"] == "etcd-v2" and plan["rdzv_endpoint"] == "127.0.0.1:2379"
        assert not any("is_host" in a for a in plan["argv"])


def test_a_fixed_size_job_stays_static(tmp_path: Path) -> None:
    spec = build_spec({"entry_point": "allreduce_check.py", "source_dir": str(SOURCES), "nodes": 2,
                       "local": {"emulate": "none"}})  # fmt: skip
    plans = node_plans(spec, tmp_path)
    assert [(p["nnodes"], p["rdzv_backend"]) for p in plans] == [(2, "static"), (2, "static")]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"nodes": 2, "min_nodes": 3}, ["min_nodes", "3", "nodes=2"]),
        ({"min_nodes": 0}, ["min_nodes", "0"]),
        ({"max_restarts": -1}, ["max_restarts", "-1"]),
        ({"rdzv_backend": "etcd-v2"}, ["rdzv_endpoint", "etcd-v2"]),
        ({"rdzv_backend": "zookeeper"}, ["rdzv_backend", "zookeeper"]),
        ({"min_nodes": None, "max_restarts": 3}, ["max_restarts", "elastic jobs only", "(got 3)"]),
    ],
    ids=[
        "min-above-max",
        "zero-min",
        "negative-restarts",
        "etcd-without-endpoint",
        "unknown-backend",
        "fixed-restarts",
    ],
)
def test_a_bad_elastic_spec_names_the_field(fields: dict, named: list[str]) -> None:
    with pytest.raises(CloudDDPError) as error:
        elastic_spec(**fields)
    for text in named:
        assert text in str(error.value)


@pytest.mark.parametrize("emulate", ["sagemaker", "oci"])
def test_the_sagemaker_and_oci_emulations_refuse_elastic(tmp_path: Path, emulate: str) -> None:
    with pytest.raises(CloudDDPError, match=f"local.emulate='{emulate}'.*fixed set of hosts"):
        LocalProvider(runs_dir=tmp_path).render(elastic_spec(local={"emulate": emulate}))


@pytest.mark.parametrize(
    ("provider", "args"),
    [
        ("sagemaker", ["--instance-type", "ml.m5.xlarge", "--role", "arn:aws:iam::123456789012:role/SageMaker"]),
        ("oci", ["--compartment", "ocid1.compartment.oc1..aaaa", "--project", "ocid1.datascienceproject.oc1.iad.aaaa"]),
    ],
)
def test_sagemaker_and_oci_refuse_a_node_range_before_anything_is_rendered(
    tmp_path: Path, provider: str, args: list[str]
) -> None:
    result = cli("launch", "-p", provider, "--nodes", "2:4", *args, "--dry-run", CHECK, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert f"the {provider} provider cannot run" in result.stderr and "min_nodes=2 (nodes 2:4)" in result.stderr


def test_cli_range_and_flags_reach_the_spec(tmp_path: Path) -> None:
    result = cli("launch", "--emulate", "none", "--nodes", "2:4", "--max-restarts", "5",
                     "--runs-dir", str(tmp_path / "runs"), "--dry-run", CHECK, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    request = yaml.safe_load(result.stdout)["request"]
    assert request["elastic"] is True and len(request["nodes"]) == 4
    for node in request["nodes"]:
        assert {"--nnodes=2:4", "--max-restarts=5", "--rdzv-backend=c10d"} <= set(node["command"])
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--nodes", "two:3"], "--nodes 'two:3'"), (["--nodes", "2:3", "--min-nodes", "1"], "disagree")],
)
def test_cli_bad_node_range_is_named(tmp_path: Path, args: list[str], named: str) -> None:
    result = cli("launch", "--emulate", "none", *args, "--dry-run", CHECK, cwd=tmp_path)
    assert result.returncode == 2 and named in result.stderr and "Traceback" not in result.stderr


def test_elastic_nodes_share_node_0s_model_and_checkpoint_folders(tmp_path: Path) -> None:
    # Any node may be rank 0 after a rendezvous, and the survivors must read what the old rank 0 saved.
    request = LocalProvider(runs_dir=tmp_path / "runs").render(elastic_spec(local={"emulate": "slurm"})).request
    for name in ("CLOUDDDP_MODEL_DIR", "CLOUDDDP_CHECKPOINT_DIR"):
        assert {node.env[name] for node in request.nodes} == {request.nodes[0].env[name]}
    assert request.nodes[0].env["CLOUDDDP_MODEL_DIR"] == str(request.nodes[0].layout.model_dir)  # run/model's target


def test_the_host_map_rewrites_the_rendezvous_endpoints_host() -> None:
    # The EKS guide's elastic PyTorchJob: PET_RDZV_ENDPOINT names the etcd Service, which only
    # resolves inside the cluster; the host map sends it elsewhere, as it does the master's name.
    env = {"PET_NNODES": "2:3", "PET_RDZV_BACKEND": "etcd-v2", "PET_RDZV_ENDPOINT": "etcd-service:2379",
           "PET_NPROC_PER_NODE": "1", "HOSTNAME": "resnet-worker-0"}  # fmt: skip
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = launcher_run(["--dry-run", "--host-map", "etcd-service=127.0.0.1", CHECK], clean_env(env))
    plan = json.loads(out.getvalue())
    assert code == 0 and plan["rdzv_endpoint"] == "127.0.0.1:2379"
    assert "--rdzv_endpoint=127.0.0.1:2379" in plan["argv"]
    assert plan["sources"]["rdzv_endpoint"] == "host map (etcd-service) on PET_RDZV_ENDPOINT"


def kubernetes_body(**fields: object) -> dict:
    from cloudddp.providers.kubernetes.provider import KubernetesProvider

    spec = build_spec({"name": "resnet", "entry_point": "allreduce_check.py", "source_dir": str(SOURCES),
                       "nodes": 3, "kubernetes": {"image": "registry.example.com/train:1", "namespace": "ml"},
                       **fields})  # fmt: skip
    return KubernetesProvider().render(spec).request.body  # type: ignore[no-any-return]


def test_kubernetes_turns_a_node_range_into_the_pytorchjobs_elastic_policy() -> None:
    body = kubernetes_body(min_nodes=2, max_restarts=4, rdzv_backend="etcd-v2", rdzv_endpoint="etcd-service:2379")
    policy = dict(body["spec"]["elasticPolicy"])
    assert re.fullmatch(r"resnet-[0-9a-f]{8}", policy.pop("rdzvId"))  # etcd: this submission's own rendezvous
    assert policy == {"rdzvBackend": "etcd-v2", "minReplicas": 2, "maxReplicas": 3, "rdzvHost": "etcd-service",
                      "rdzvPort": 2379, "maxRestarts": 4}  # fmt: skip
    assert set(body["spec"]["pytorchReplicaSpecs"]) == {"Worker"}


def test_kubernetes_refuses_two_elastic_ranges_and_a_trainjob_range() -> None:
    with pytest.raises(CloudDDPError, match="give it once"):
        kubernetes_body(min_nodes=2, kubernetes={"image": "r/t:1", "elastic": {"min_nodes": 1, "max_nodes": 3}})
    with pytest.raises(CloudDDPError, match="cannot carry: elastic"):
        kubernetes_body(min_nodes=2, kubernetes={"image": "r/t:1", "kubeflow_api": "trainer-v2"})


def test_elastic_torchrun_gets_a_fresh_rendezvous_store_per_round_unless_the_user_chose() -> None:
    from cloudddp.cluster.plan import ClusterPlan
    from cloudddp.launcher.command import job_environment

    elastic = ClusterPlan("standalone", nnodes="2:3", rdzv_backend="c10d")
    assert job_environment(elastic, {}, 1)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"  # pytorch/pytorch#135712
    assert (
        job_environment(elastic, {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"}, 1)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"]
        == "0"
    )
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in job_environment(ClusterPlan("standalone", nnodes=2), {}, 1)


@pytest.mark.slow
@pytest.mark.torchrun
@pytest.mark.elastic
def test_a_local_elastic_job_runs_on_a_real_etcd_v2_rendezvous(tmp_path: Path, etcd: int) -> None:  # noqa: F811
    result = run_cli("launch", "--emulate", "none", "--nodes", "2:3", "--rdzv-backend", "etcd-v2",
                     "--rdzv-endpoint", f"127.0.0.1:{etcd}", "--runs-dir", str(tmp_path / "runs"),
                     CHECK, "--", "--out-dir", str(tmp_path / "out"),
                     cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    ranks = [json.loads(p.read_text()) for p in (tmp_path / "out").glob("rank*.json")]
    assert {(r["world_size"], r["sum"]) for r in ranks} == {(3, 6.0)} and len(ranks) == 3
