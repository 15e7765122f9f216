"""Job spec fields that reached a Kubeflow job wrongly or not at all: a TrainJob's max_runtime and run policy,
an elastic job's `--rdzv-endpoint HOST`, and resource quantities Kubernetes takes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SOURCES, cli
from helpers.kubernetes_apiserver import OLDER_TRAINJOB_CRDS, crd_validator, trainjob_webhook_errors

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider

IMAGE = "registry.example.com/train:1"


def render(top: dict[str, Any] | None = None, **kubernetes: Any) -> dict[str, Any]:
    spec = build_spec({"name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2,
                       **(top or {}), "kubernetes": {"image": IMAGE, "namespace": "team-a", **kubernetes}})  # fmt: skip
    return KubernetesProvider().render(spec).request.body  # type: ignore[no-any-return]


# -- 6. TrainJob: max_runtime, and the run policy a TrainJob has no field for ---------------------------------------


@pytest.mark.parametrize(("top", "deadline"), [({}, 86400), ({"max_runtime": 3600}, 3600)])
def test_a_trainjob_for_v2_2_and_later_stops_at_max_runtime(top: dict[str, Any], deadline: int) -> None:
    """kubeflow/trainer v2.2.0 (commit dc7656ad878916f526cd401f30a347574cd47877) and v2.3.0 (commit
    658725bdae5c7e3a0854d93ac6ff492e109a22ab) pkg/apis/trainer/v1alpha1/trainjob_types.go
    TrainJobSpec.ActiveDeadlineSeconds (minimum 1), enforced by pkg/controller/trainjob_controller.go; the PyTorchJob
    puts the same limit (default 86400) in runPolicy.activeDeadlineSeconds."""
    manifest = render(top, kubeflow_api="trainer-v2")
    crd_validator("trainjobs").validate(manifest)
    assert trainjob_webhook_errors(manifest) == []
    assert manifest["spec"]["activeDeadlineSeconds"] == deadline
    assert render(top)["spec"]["runPolicy"]["activeDeadlineSeconds"] == deadline


@pytest.mark.parametrize("release", ["v2.1", "v2.0"])
def test_older_trainer_releases_have_no_deadline_and_refuse_one_asked_for(release: str) -> None:
    """v2.0.1 (commit 332ad393) and v2.1.0 (commit 73c9bece) TrainJobSpec has no activeDeadlineSeconds."""
    manifest = render(kubeflow_api="trainer-v2", trainer_release=release)
    crd_validator("trainjobs", OLDER_TRAINJOB_CRDS[release]).validate(manifest)
    assert "activeDeadlineSeconds" not in manifest["spec"]
    with pytest.raises(CloudDDPError) as refused:
        render({"max_runtime": 3600}, kubeflow_api="trainer-v2", trainer_release=release)
    message = str(refused.value)
    assert f"trainer_release={release!r} cannot carry: max_runtime=3600" in message and "v2.2" in message


@pytest.mark.parametrize(
    "field",
    [{"backoff_limit": 3}, {"backoff_limit": 0}, {"restart_policy": "OnFailure"}, {"restart_policy": "Never"},
     {"ttl_seconds_after_finished": 600}],
)  # fmt: skip
@pytest.mark.parametrize("release", ["v2.2", "v2.1", "v2.0"])
def test_run_policy_a_trainjob_cannot_carry_is_refused_by_name(field: dict[str, Any], release: str) -> None:
    """No TrainJob release has these (TrainJobSpec, and v2.2+'s RuntimePatch PodSpecPatch): the runtime's JobSet and
    Jobs decide them. Given even as the default value, they would be silently replaced by the runtime's."""
    (name,) = field
    with pytest.raises(CloudDDPError) as refused:
        render(kubeflow_api="trainer-v2", trainer_release=release, **field)
    message = str(refused.value)
    assert "cannot carry" in message and f"kubernetes.{name} (" in message and "kubeflow_api v1" in message
    manifest = render(**field)  # a PyTorchJob carries each of them
    crd_validator("pytorchjobs").validate(manifest)


def test_the_testers_trainjob_spec_is_refused_naming_every_field(tmp_path: Path) -> None:
    job = tmp_path / "tj.yaml"
    job.write_text(yaml.safe_dump({
        "name": "tj", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2, "max_runtime": 3600,
        "kubernetes": {"image": IMAGE, "kubeflow_api": "trainer-v2", "backoff_limit": 3, "restart_policy": "OnFailure",
                       "ttl_seconds_after_finished": 600},
    }))  # fmt: skip
    result = cli("launch", "-p", "kubernetes", "--dry-run", "-f", str(job), env={"KUBECONFIG": str(tmp_path / "no")})
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    for name in ("restart_policy", "backoff_limit", "ttl_seconds_after_finished"):
        assert f"kubernetes.{name}" in result.stderr, result.stderr


# -- 8. --rdzv-endpoint HOST without a port -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "endpoint", "host", "port"),
    [("c10d", "myhost", "myhost", 29400), ("etcd-v2", "etcd-service", "etcd-service", 2379),
     ("c10d", "myhost:1234", "myhost", 1234), ("etcd-v2", "etcd.infra:2379", "etcd.infra", 2379),
     ("c10d", "[fd00::1]:29500", "[fd00::1]", 29500)],
)  # fmt: skip
def test_the_rendezvous_host_is_kept_and_a_missing_port_is_torchruns_default(
    backend: str, endpoint: str, host: str, port: int
) -> None:
    """torchrun's defaults (torch 2.14.1 c10d_rendezvous_backend.py DEFAULT_PORT = 29400; etcd_rendezvous_backend.py
    default_port=2379), written out: without rdzvPort the operator would use the job's port, 23456
    (training-operator v1.9.0 pkg/controller.v1/pytorch/elastic.go generateEnvRDZVEndpoint)."""
    top = {"nodes": 4, "min_nodes": 2, "rdzv_backend": backend, "rdzv_endpoint": endpoint}
    manifest = render(top)
    crd_validator("pytorchjobs").validate(manifest)
    policy = manifest["spec"]["elasticPolicy"]
    assert (policy["rdzvBackend"], policy["rdzvHost"], policy["rdzvPort"]) == (backend, host, port)


@pytest.mark.parametrize(("endpoint", "named"), [("host:http", "its port='http'"), (":29400", "has no host"),
                                                 ("host:70000", "its port='70000'")])  # fmt: skip
def test_a_rendezvous_endpoint_without_a_usable_host_or_port_is_refused(endpoint: str, named: str) -> None:
    with pytest.raises(CloudDDPError) as refused:
        render({"nodes": 4, "min_nodes": 2, "rdzv_endpoint": endpoint})
    assert f"--rdzv-endpoint {endpoint!r}" in str(refused.value) and named in str(refused.value)


def test_an_etcd_endpoint_without_a_port_does_not_claim_the_host_is_missing(tmp_path: Path) -> None:
    result = cli("launch", "-p", "kubernetes", "--dry-run", "--image", IMAGE, "--nodes", "2:4", "--rdzv-backend",
                     "etcd-v2", "--rdzv-endpoint", "etcd-service", str(SOURCES / "train_ddp.py"),
                     env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip
    assert result.returncode == 0, result.stderr
    policy = yaml.safe_load(result.stdout)["spec"]["elasticPolicy"]
    assert (policy["rdzvHost"], policy["rdzvPort"]) == ("etcd-service", 2379)


# -- 9. Quantities --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "written"),
    [(".5", ".5"), ("1e3", "1e3"), ("1000n", "1000n"), ("+2", "+2"), ("5.", "5."), (4, "4"), (0.5, "0.5"),
     ("250m", "250m"), ("16Gi", "16Gi")],
)  # fmt: skip
@pytest.mark.parametrize("api", ["v1", "trainer-v2"])
def test_quantities_the_crds_take_are_taken(given: Any, written: str, api: str) -> None:
    """The CRDs' own pattern for resources (kubeflow.org_pytorchjobs.v1.9.0.yaml, x-kubernetes-int-or-string) and
    apimachinery's pkg/api/resource/quantity.go grammar (eed236ceee2c19c2753a3d93ac0631dc20750454)."""
    manifest = render(kubeflow_api=api, cpu=given, memory=given)
    crd_validator("pytorchjobs" if api == "v1" else "trainjobs").validate(manifest)
    if api == "v1":
        limits = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]
    else:
        limits = manifest["spec"]["trainer"]["resourcesPerNode"]
    assert limits["limits"] == {"cpu": written, "memory": written}


@pytest.mark.parametrize(("given", "message"), [("lots", "is not a Kubernetes quantity"), ("4 cores", "is not a"),
                                                ("-1", "is negative"), (True, "Input should be a valid string")])  # fmt: skip
def test_what_is_no_quantity_is_refused(given: Any, message: str) -> None:
    with pytest.raises(CloudDDPError, match=f"kubernetes.cpu: .*{message}"):
        render(cpu=given)


def test_a_yaml_integer_cpu_passes_the_cli(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(f"name: q\nentry_point: train_ddp.py\nsource_dir: {SOURCES}\nnodes: 2\n"
                   f"kubernetes: {{image: {IMAGE}, cpu: 4, memory: 8Gi}}\n")  # fmt: skip
    result = cli("launch", "-p", "kubernetes", "--dry-run", "-f", str(job), env={"KUBECONFIG": str(tmp_path / "no")})
    assert result.returncode == 0, result.stderr
    manifest = yaml.safe_load(result.stdout)
    crd_validator("pytorchjobs").validate(manifest)
    container = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "4", "memory": "8Gi"}
