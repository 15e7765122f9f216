"""Never two at once, where the client dies after the service accepted the job and before it recorded the id: the
rerun finds the job by the name the attempt recorded before submitting (`Provider.find_by_name`) and adopts it.
OCI through the loopback service (ListJobRuns' displayName filter, through the real oci SDK), Kubernetes through
the API fake (the job's id follows from its manifest's kind, namespace and name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SOURCES, clean_env
from helpers.kubernetes_apiserver import FakeAPIServer
from helpers.oci_loopback_server import COMPARTMENT, IMAGE, IMAGE_ENV, LOG_GROUP, PROJECT, QUICK_SOURCES, WORK_DIR

from cloudddp import config, job_index
from cloudddp.config import target_specs
from cloudddp.failover import Failover, Target, attempt_name, run_name, targets_from
from cloudddp.providers import JobHandle, JobRequest
from cloudddp.providers.kubernetes.provider import KubernetesProvider
from cloudddp.providers.oci.provider import OCIProvider


class Killed(BaseException):
    """kill -9 of the client: nothing of cloudddp runs after it."""


class KilledOCI(OCIProvider):
    def submit(self, job_request: JobRequest) -> JobHandle:
        super().submit(job_request)
        raise Killed


class KilledKubernetes(KubernetesProvider):
    def submit(self, request: JobRequest) -> JobHandle:
        super().submit(request)
        raise Killed


def targets_of(provider: str, job: Path, data: dict[str, Any]) -> list[Target]:
    job.write_text(yaml.safe_dump(data))
    return targets_from(target_specs(config.job_spec(provider, job, {}), job, {}))


def killed_then_rerun(found: list[Target], killed: Any, between: Any = None) -> tuple[job_index.Attempt, list[str]]:
    with pytest.raises(Killed):
        Failover(found, provider_for=lambda _: killed).run(wait=False)
    (left,) = job_index.attempts(run_name(found))
    assert left.state == "submitting" and left.job_id.startswith(attempt_name(found[0]))  # the name, before submit
    if between:
        between()
    said: list[str] = []
    assert Failover(found, say=said.append).run(wait=False) == 0
    (adopted,) = job_index.attempts(run_name(found))
    assert adopted.id == left.id and adopted.state == "submitted"
    return adopted, [left.job_id, *said]


def test_oci_a_rerun_adopts_the_run_found_by_its_display_name(
    oci_service: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.oci_loopback_server import FakeOCI, ThrowawayKey

    key = ThrowawayKey.generate()
    server = oci_service(key, kind=FakeOCI, node_env=clean_env(IMAGE_ENV), hold_states=True)
    monkeypatch.setenv("CLOUDDDP_OCI_SERVICE_ENDPOINT", server.url)
    monkeypatch.setenv("OCI_CONFIG_FILE", str(key.write_config(tmp_path / ".oci")))
    monkeypatch.chdir(QUICK_SOURCES)
    common = {"compartment_id": COMPARTMENT, "project_id": PROJECT, "image": IMAGE, "work_dir": WORK_DIR,
              "log_group_id": LOG_GROUP, "shape": "VM.Standard.E4.Flex"}  # fmt: skip
    found = targets_of("oci", tmp_path / "job.yaml", {"name": "fo-oci", "entry_point": "quick_train.py",
                       "args": ["--wait"], "oci": common, "targets": [{"name": "e4", "provider": "oci"}]})  # fmt: skip

    def another_run_after_it() -> None:  # newest in the compartment: without the displayName filter, it is found
        other = found[0].spec.model_copy(update={"name": "another"})
        OCIProvider().submit(OCIProvider().render(other))

    adopted, (name, *said) = killed_then_rerun(found, KilledOCI(), between=another_run_after_it)
    runs = {run["displayName"]: run_id for run_id, run in server.runs.items()}
    assert len(server.calls("POST", r"/20190101/jobRuns$")) == 2  # the killed client's and the other: none more
    assert adopted.job_id == runs[name]
    (listed,) = [call.query for call in server.calls("GET", r"/20190101/jobRuns$")]
    assert listed["displayName"] == [name] and listed["compartmentId"] == [COMPARTMENT]
    assert any(line.startswith(f"cloudddp: adopting {runs[name]} ") for line in said)


def kubernetes_targets(kubeconfig: Path, tmp_path: Path) -> list[Target]:
    return targets_of("kubernetes", tmp_path / "job.yaml", {
        "name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2,
        "inputs": {"train": "pvc://datasets/demo"}, "targets": [{"name": "gpu", "provider": "kubernetes"}],
        "kubernetes": {"image": "registry.example.com/train:1", "kubeconfig": str(kubeconfig)},
    })  # fmt: skip


def creations(fake: FakeAPIServer) -> list[str]:
    return [path for verb, path in fake.requests if verb == "POST" and "pytorchjobs" in path]


def test_kubernetes_a_rerun_adopts_the_job_its_manifest_names(
    kube_api: tuple[FakeAPIServer, Path], tmp_path: Path
) -> None:
    fake, kubeconfig = kube_api
    found = kubernetes_targets(kubeconfig, tmp_path)
    adopted, (name, *said) = killed_then_rerun(found, KilledKubernetes())
    assert name == attempt_name(found[0])  # metadata.name
    assert adopted.job_id == f"pytorchjobs/training/{name}"
    assert creations(fake) == ["/apis/kubeflow.org/v1/namespaces/training/pytorchjobs"]  # once
    assert any(line.startswith(f"cloudddp: adopting pytorchjobs/training/{name} ") for line in said)


def test_kubernetes_a_job_the_killed_client_never_created_is_created_on_rerun(
    kube_api: tuple[FakeAPIServer, Path], tmp_path: Path
) -> None:
    fake, kubeconfig = kube_api
    found = kubernetes_targets(kubeconfig, tmp_path)
    target, name = found[0], attempt_name(found[0])
    job_index.begin_attempt(run_name(found), name, 0, target.name, "kubernetes", name)  # killed before the POST
    assert Failover(found).run(wait=False) == 0
    assert creations(fake) == ["/apis/kubeflow.org/v1/namespaces/training/pytorchjobs"]
    assert [(a.state, a.job_id) for a in job_index.attempts(run_name(found))] == [
        ("never submitted", name), ("submitted", f"pytorchjobs/training/{name}")]  # fmt: skip
