"""Four findings of a tester, each through the real `kubernetes` client against the loopback API server
(tests/helpers/kubernetes_apiserver.py) or the CLI: a job id whose name is `.` or `..` (a DELETE of the
collection), a running TrainJob read as PENDING, a TrainJob setting the variables Trainer's torch runtime
reserves, and an elastic etcd PyTorchJob without a rendezvous id of its own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SOURCES, cli, run_cli
from helpers.kubernetes_apiserver import FakeAPIServer, crd_validator, trainjob_webhook_errors

from cloudddp.cluster import kubeflow
from cloudddp.cluster.options import DetectOptions
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider

IMAGE = "registry.example.com/train:1"
TRAIN = str(SOURCES / "train_ddp.py")


@pytest.fixture
def api(kube_api: tuple[FakeAPIServer, Path]) -> tuple[FakeAPIServer, Path]:
    return kube_api


def spec_data(nodes: Any = 2, **kubernetes: Any) -> dict[str, Any]:
    return {
        "name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": nodes,
        "inputs": {"train": "pvc://datasets/demo"},
        "kubernetes": {"image": IMAGE, "namespace": "training", **kubernetes},
    }  # fmt: skip


def render(nodes: Any = 2, **kubernetes: Any) -> Any:
    return KubernetesProvider().render(build_spec(spec_data(nodes, **kubernetes)))


# -- 1. a job id naming `.` or `..` is refused before anything is sent ------------------------------------------
BAD_IDS = ["pytorchjobs/team/.", "trainjobs/ns/..", ".", "..", "training/.", "pytorchjobs/./resnet",
           "pytorchjobs/Team/resnet", "pytorchjobs/training/Resnet"]  # fmt: skip


@pytest.mark.parametrize("job_id", BAD_IDS)
def test_a_job_id_kubernetes_would_not_name_is_refused_and_nothing_is_sent(
    api: tuple[FakeAPIServer, Path], job_id: str
) -> None:
    fake, kubeconfig = api
    fake.objects[("pytorchjobs", "training", "keep")] = {"kind": "PyTorchJob", "metadata": {"name": "keep"}}
    provider = KubernetesProvider(build_spec(spec_data(kubeconfig=str(kubeconfig))).kubernetes)  # type: ignore[attr-defined]
    for call in (provider.cancel, provider.status, lambda job: list(provider.logs(job))):
        with pytest.raises(CloudDDPError, match=r"is not a Kubernetes job id: its (namespace|name) "):
            call(job_id)
    assert fake.requests == [] and fake.deletions == [] and ("pytorchjobs", "training", "keep") in fake.objects


@pytest.mark.process
@pytest.mark.parametrize("command", ["cancel", "status", "logs"])
@pytest.mark.parametrize("job_id", ["pytorchjobs/training/.", "trainjobs/training/..", "."])
def test_a_dot_job_id_from_the_cli_is_exit_2_and_sends_nothing(
    api: tuple[FakeAPIServer, Path], command: str, job_id: str
) -> None:
    fake, kubeconfig = api
    fake.objects[("pytorchjobs", "training", "keep")] = {"kind": "PyTorchJob", "metadata": {"name": "keep"}}
    result = run_cli(command, "-p", "kubernetes", job_id, env={"KUBECONFIG": str(kubeconfig)}, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert f"{job_id!r} is not a Kubernetes job id" in result.stderr and "Traceback" not in result.stderr
    assert fake.requests == [] and ("pytorchjobs", "training", "keep") in fake.objects


def test_dotted_names_kubernetes_takes_are_still_read(api: tuple[FakeAPIServer, Path]) -> None:
    """A name with dots inside is a DNS-1123 subdomain: the API server takes it, so cloudddp asks for it."""
    fake, kubeconfig = api
    provider = KubernetesProvider(build_spec(spec_data(kubeconfig=str(kubeconfig))).kubernetes)  # type: ignore[attr-defined]
    with pytest.raises(CloudDDPError, match=r'404: pytorchjobs.kubeflow.org "a.b" not found'):
        provider.status("pytorchjobs/training/a.b")
    assert fake.requests == [("GET", "/apis/kubeflow.org/v1/namespaces/training/pytorchjobs/a.b")]


# -- 2. a TrainJob's state comes from its jobsStatus, for it has no Running condition -----------------------------
def trainjob_status(api: tuple[FakeAPIServer, Path], status: dict[str, Any]) -> Any:
    fake, kubeconfig = api
    provider = KubernetesProvider()
    job_id = provider.submit(render(kubeconfig=str(kubeconfig), kubeflow_api="trainer-v2")).job_id
    fake.objects[("trainjobs", "training", "resnet")]["status"] = status
    return provider.status(job_id)


def node_job(**counts: int) -> dict[str, Any]:
    return {"name": "node", **counts}


@pytest.mark.parametrize(
    ("status", "state"),
    [({}, "PENDING"),
     ({"jobsStatus": [node_job(active=1, ready=0, succeeded=0, failed=0, suspended=0)]}, "PENDING"),  # pods pending
     ({"jobsStatus": [node_job(active=1, ready=1, succeeded=0, failed=0, suspended=0)]}, "RUNNING"),
     ({"jobsStatus": [node_job(ready=1)]}, "RUNNING"),  # v2.1.0 and later: every count optional
     ({"jobsStatus": [node_job(ready=1)], "conditions": [{"type": "Suspended", "status": "False"}]}, "RUNNING"),
     ({"jobsStatus": [node_job(ready=0, suspended=1)], "conditions": [{"type": "Suspended", "status": "True"}]},
      "PENDING"),
     ({"jobsStatus": [node_job(ready=0, succeeded=1)], "conditions": [{"type": "Complete", "status": "True"}]},
      "SUCCEEDED"),
     ({"jobsStatus": [node_job(ready=1, failed=1)], "conditions": [{"type": "Failed", "status": "True"}]}, "FAILED")],
)  # fmt: skip
def test_a_trainjobs_state_follows_its_jobs_status(
    api: tuple[FakeAPIServer, Path], status: dict[str, Any], state: str
) -> None:
    assert trainjob_status(api, status).state == state


def test_a_running_trainjob_reports_its_jobs_counts(api: tuple[FakeAPIServer, Path]) -> None:
    counts = {"active": 1, "ready": 1, "succeeded": 0, "failed": 0, "suspended": 0}  # v2.0.1: every count present
    current = trainjob_status(api, {"jobsStatus": [node_job(**counts)]})
    assert (current.state, current.nodes) == (
        "RUNNING",
        {"node": "active 1, ready 1, succeeded 0, failed 0, suspended 0"},
    )


@pytest.mark.process
def test_a_running_trainjob_is_running_from_the_cli(api: tuple[FakeAPIServer, Path]) -> None:
    kubeconfig = api[1]
    trainjob_status(api, {"jobsStatus": [node_job(active=1, ready=1)]})
    result = run_cli("status", "-p", "kubernetes", "trainjobs/training/resnet", env={"KUBECONFIG": str(kubeconfig)},
                     timeout=60)  # fmt: skip
    assert result.returncode == 0 and "RUNNING" in result.stdout, (result.stdout, result.stderr)


# -- 3. the variables Trainer's torch runtime sets are refused in a TrainJob ------------------------------------
RESERVED = ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"]


@pytest.mark.parametrize("release", ["v2.2", "v2.1", "v2.0"])
@pytest.mark.parametrize("name", RESERVED)
def test_a_trainjob_setting_a_torch_runtime_variable_is_refused_at_render(release: str, name: str) -> None:
    with pytest.raises(CloudDDPError, match=f"environment.{name}: a TrainJob may not set {name}"):
        KubernetesProvider().render(build_spec({
            **spec_data(kubeflow_api="trainer-v2", trainer_release=release), "environment": {name: "5"}
        }))  # fmt: skip
    with pytest.raises(CloudDDPError, match=f"kubernetes.secret_env.{name}: a TrainJob may not set {name}"):
        render(kubeflow_api="trainer-v2", trainer_release=release, secret_env={name: "team/value"})


def test_what_is_refused_is_what_trainers_webhook_refuses() -> None:
    """Rendered without the check, Trainer's webhook (as the fake ports it) refuses the job; other PET_ names pass."""
    body = render(kubeflow_api="trainer-v2", secret_env={"PET_RDZV_CONF": "team/conf"}).request.body
    assert not trainjob_webhook_errors(body)
    body["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "5"})
    assert trainjob_webhook_errors(body) == [
        "spec.trainer.env: Invalid value: must not have reserved envs, invalid envs configured: ['PET_NNODES']"
    ]


def test_a_reserved_variable_from_the_cli_is_exit_2_naming_it(tmp_path: Path) -> None:
    result = cli("launch", "-p", "kubernetes", "--kubeflow-api", "trainer-v2", "--image", IMAGE, "--dry-run",
                     "-e", "PET_NNODES=5", TRAIN, env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip
    assert result.returncode == 2 and "environment.PET_NNODES" in result.stderr, (result.stdout, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr


# -- 4. an elastic etcd PyTorchJob gets a rendezvous id of its own ------------------------------------------------
ETCD = {"elastic": {"min_nodes": 2, "max_nodes": 4, "rdzv_backend": "etcd-v2", "rdzv_host": "etcd", "rdzv_port": 2379}}


@pytest.mark.parametrize("backend", ["etcd", "etcd-v2"])
def test_each_etcd_submission_gets_its_own_rendezvous_id(backend: str) -> None:
    elastic = {**ETCD["elastic"], "rdzv_backend": backend}
    first, second = (render(elastic=elastic).request.body for _ in range(2))
    ids = [body["spec"]["elasticPolicy"]["rdzvId"] for body in (first, second)]
    assert all(re.fullmatch(r"resnet-[0-9a-f]{8}", rdzv_id) for rdzv_id in ids) and ids[0] != ids[1]
    crd_validator("pytorchjobs").validate(first)


def test_the_spec_range_with_an_etcd_endpoint_gets_one_and_c10d_none() -> None:
    body = KubernetesProvider().render(build_spec({
        **spec_data(4), "min_nodes": 2, "rdzv_backend": "etcd-v2", "rdzv_endpoint": "etcd:2379"})).request.body  # fmt: skip
    assert re.fullmatch(r"resnet-[0-9a-f]{8}", body["spec"]["elasticPolicy"]["rdzvId"])
    assert "rdzvId" not in render(elastic={"min_nodes": 1, "max_nodes": 4}).request.body["spec"]["elasticPolicy"]
    assert (
        "rdzvId"
        not in KubernetesProvider()
        .render(build_spec({**spec_data(4), "min_nodes": 2}))
        .request.body["spec"]["elasticPolicy"]
    )


def test_the_rendered_id_is_what_is_created_and_what_the_pods_meet_under(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    request = render(kubeconfig=str(kubeconfig), **ETCD)
    KubernetesProvider().submit(request)
    policy = fake.objects[("pytorchjobs", "training", "resnet")]["spec"]["elasticPolicy"]
    assert policy == request.request.body["spec"]["elasticPolicy"] and policy["rdzvId"].startswith("resnet-")
    # elastic.go: the operator hands rdzvId to every pod as PET_RDZV_ID, which the job side takes over the job name.
    env = {"HOSTNAME": "resnet-worker-1", "PET_RDZV_BACKEND": "etcd-v2", "PET_RDZV_ENDPOINT": "etcd:2379",
           "PET_NNODES": "2:4", "PET_NPROC_PER_NODE": "1", "PET_RDZV_ID": policy["rdzvId"]}  # fmt: skip
    assert kubeflow.plan(env, DetectOptions()).rdzv_id == policy["rdzvId"]


def test_the_dry_run_prints_the_id_it_would_send(tmp_path: Path) -> None:
    result = cli("launch", "-p", "kubernetes", "--dry-run", "--nodes", "2:4", "--rdzv-backend", "etcd-v2",
                     "--rdzv-endpoint", "etcd:2379", "--image", IMAGE, TRAIN,
                     env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = yaml.safe_load(result.stdout)
    crd_validator("pytorchjobs").validate(manifest)
    name = manifest["metadata"]["name"]
    assert re.fullmatch(rf"{name}-[0-9a-f]{{8}}", manifest["spec"]["elasticPolicy"]["rdzvId"])
