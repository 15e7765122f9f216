"""The Kubernetes provider through the real `kubernetes` client against the loopback API server
(tests/helpers/kubernetes_apiserver.py): what it sends, how it reads status and logs, how it cancels, and how the
fake's own checks reject what a real API server rejects."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from helpers import SOURCES, run_cli
from helpers.kubernetes_apiserver import OLDER_TRAINJOB_CRDS, FakeAPIServer, FakePod, write_kubeconfig

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider


@pytest.fixture
def api(kube_api: tuple[FakeAPIServer, Path]) -> tuple[FakeAPIServer, Path]:
    return kube_api


def spec_for(kubeconfig: Path, nodes: int = 2, **kubernetes: Any) -> Any:
    return build_spec({
        "name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": nodes,
        "inputs": {"train": "pvc://datasets/demo"}, "hyperparameters": {"epochs": 2},
        "kubernetes": {"image": "registry.example.com/train:1", "kubeconfig": str(kubeconfig), **kubernetes},
    })  # fmt: skip


def submit(kubeconfig: Path, nodes: int = 2, **kubernetes: Any) -> tuple[KubernetesProvider, str, Any]:
    provider = KubernetesProvider()
    request = provider.render(spec_for(kubeconfig, nodes, **kubernetes))
    return provider, provider.submit(request).job_id, request


def test_submit_creates_exactly_the_rendered_pytorchjob_in_the_contexts_namespace(
    api: tuple[FakeAPIServer, Path],
) -> None:
    fake, kubeconfig = api
    _, job_id, request = submit(kubeconfig)
    assert job_id == "pytorchjobs/training/resnet"
    stored = fake.objects[("pytorchjobs", "training", "resnet")]
    assert stored["spec"] == request.request.body["spec"] and fake.warnings == []
    assert ("POST", "/apis/kubeflow.org/v1/namespaces/training/pytorchjobs") in fake.requests


def test_trainer_v2_creates_a_trainjob(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    _, job_id, _ = submit(kubeconfig, kubeflow_api="trainer-v2", context="other")
    assert job_id == "trainjobs/other-team/resnet"
    assert fake.objects[("trainjobs", "other-team", "resnet")]["spec"]["trainer"]["numNodes"] == 2


def test_a_trainjob_a_clusters_older_trainer_cannot_carry_is_refused_not_trimmed(
    api: tuple[FakeAPIServer, Path],
) -> None:
    """Trainer v2.1 does not know `runtimePatches`: under the API server's default (Warn) the job would be created
    without its volume, so the input mount would be lost unseen. Sent with fieldValidation=Strict it is refused,
    the error names the field and the Trainer release that has it, and nothing is created."""
    fake, kubeconfig = api
    fake.crd_files["trainjobs"] = OLDER_TRAINJOB_CRDS["v2.1"]
    with pytest.raises(CloudDDPError) as refused:
        submit(kubeconfig, kubeflow_api="trainer-v2")
    message = str(refused.value)
    assert "creating TrainJob training/resnet" in message
    assert "does not know spec.activeDeadlineSeconds, spec.runtimePatches" in message  # max_runtime, the volume
    assert "rendered for Kubeflow Trainer v2.2 (kubernetes.trainer_release)" in message
    assert "--trainer-release" in message and "Nothing was created" in message
    assert fake.objects == {} and fake.warnings == []


@pytest.mark.parametrize(("release", "field"), [("v2.1", "podTemplateOverrides"), ("v2.0", "podSpecOverrides")])
def test_a_trainjob_rendered_for_the_clusters_older_release_keeps_its_volume(
    api: tuple[FakeAPIServer, Path], release: str, field: str
) -> None:
    fake, kubeconfig = api
    fake.crd_files["trainjobs"] = OLDER_TRAINJOB_CRDS[release]
    _, job_id, request = submit(kubeconfig, kubeflow_api="trainer-v2", trainer_release=release)
    stored = fake.objects[("trainjobs", "training", "resnet")]
    assert job_id == "trainjobs/training/resnet" and fake.warnings == []
    assert stored["spec"] == request.request.body["spec"]
    (override,) = stored["spec"][field]
    pod = override.get("spec", override)
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "datasets"}


def test_a_trainjob_with_nothing_to_patch_runs_on_trainer_v2_1_when_rendered_for_it(
    api: tuple[FakeAPIServer, Path],
) -> None:
    """Rendered for v2.2 (the default), even a job with nothing to patch carries max_runtime as
    spec.activeDeadlineSeconds, which v2.1's CRD lacks: refused by name rather than run without a time limit.
    Rendered for v2.1 (which has nowhere to put one) it runs."""
    fake, kubeconfig = api
    fake.crd_files["trainjobs"] = OLDER_TRAINJOB_CRDS["v2.1"]
    data = {
        "name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2,
        "kubernetes": {"image": "registry.example.com/train:1", "kubeconfig": str(kubeconfig),
                       "kubeflow_api": "trainer-v2"},
    }  # fmt: skip
    provider = KubernetesProvider()
    with pytest.raises(CloudDDPError, match=r"does not know spec.activeDeadlineSeconds, so .* --trainer-release"):
        provider.submit(provider.render(build_spec(data)))
    data["kubernetes"]["trainer_release"] = "v2.1"  # type: ignore[index]
    request = provider.render(build_spec(data))
    assert not {"runtimePatches", "podTemplateOverrides", "activeDeadlineSeconds"} & set(request.request.body["spec"])
    assert provider.submit(request).job_id == "trainjobs/training/resnet"
    assert fake.objects[("trainjobs", "training", "resnet")]["spec"] == request.request.body["spec"]


@pytest.mark.parametrize(("api_version", "limit"), [("v1", 54), ("trainer-v2", 48)])
def test_a_name_at_the_limit_is_created_and_one_over_it_is_never_sent(
    api: tuple[FakeAPIServer, Path], api_version: str, limit: int
) -> None:
    fake, kubeconfig = api
    provider = KubernetesProvider()
    spec = spec_for(kubeconfig, nodes=3, kubeflow_api=api_version)
    job_id = provider.submit(
        provider.render(build_spec({**spec.model_dump(exclude_unset=True), "name": "a" * limit}))
    ).job_id
    assert job_id.endswith(f"/training/{'a' * limit}") and len(fake.objects) == 1
    with pytest.raises(CloudDDPError, match=f"of at most {limit} characters for this job's 3 nodes"):
        provider.render(build_spec({**spec.model_dump(exclude_unset=True), "name": "a" * (limit + 1)}))
    assert [verb for verb, _ in fake.requests].count("POST") == 1


def test_a_second_job_of_the_same_name_shows_the_servers_refusal(api: tuple[FakeAPIServer, Path]) -> None:
    _, kubeconfig = api
    submit(kubeconfig)
    with pytest.raises(CloudDDPError, match=r'409: pytorchjobs.kubeflow.org "resnet" already exists'):
        submit(kubeconfig)


def test_a_wrong_token_is_refused(api: tuple[FakeAPIServer, Path], tmp_path: Path) -> None:
    fake, _ = api
    bad = write_kubeconfig(tmp_path / "bad", f"http://127.0.0.1:{fake.httpd.server_address[1]}", "not-the-token")
    with pytest.raises(CloudDDPError, match="401: Unauthorized"):
        submit(bad)
    assert fake.objects == {}


def test_an_unknown_context_is_named(api: tuple[FakeAPIServer, Path]) -> None:
    _, kubeconfig = api
    with pytest.raises(
        CloudDDPError, match=r"kubernetes.context='nope' is not in the kubeconfig \(it has: fake, other\)"
    ):
        submit(kubeconfig, context="nope")


def test_status_follows_the_operators_conditions(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    provider, job_id, _ = submit(kubeconfig)
    assert provider.status(job_id).state == "PENDING"  # no conditions yet
    steps = [("Created", "PENDING"), ("Running", "RUNNING"), ("Failed", "FAILED")]
    conditions: list[dict[str, str]] = []
    for minute, (kind, expected) in enumerate(steps, start=1):
        for condition in conditions:
            condition["status"] = (
                "False" if kind == "Failed" and condition["type"] == "Running" else condition["status"]
            )
        conditions.append({"type": kind, "status": "True", "reason": f"PyTorchJob{kind}", "message": f"job is {kind}",
                           "lastTransitionTime": f"2026-11-22T10:0{minute}:00Z"})  # fmt: skip
        fake.set_conditions("pytorchjobs", "training", "resnet", conditions)
        current = provider.status(job_id)
        assert current.state == expected
    assert current.reason == "PyTorchJobFailed: job is Failed"
    # The timeline: the job as the API server returned it, and its pod's container as the kubelet records it.
    ended = {
        "exitCode": 1,
        "reason": "Error",
        "startedAt": "2026-11-22T10:02:30Z",
        "finishedAt": "2026-11-22T10:02:50Z",
    }
    fake.add_pod(FakePod("training", "resnet-master-0", {"training.kubeflow.org/job-name": "resnet",
                                                         "training.kubeflow.org/replica-type": "master"}, "pytorch",
                         container_statuses=[{"name": "pytorch", "state": {"terminated": ended}, "lastState": {},
                                              "ready": False, "restartCount": 0, "image": "i", "imageID": ""}]))  # fmt: skip
    fake.objects[("pytorchjobs", "training", "resnet")]["status"]["replicaStatuses"] = {"Master": {"failed": 1}}
    assert [(event.node, event.what) for event in provider.events(job_id)] == [
        ("", "submitted"), ("", "created"), ("", "running"), ("Master", "resnet-master-0 started"),
        ("Master", "resnet-master-0 failed (exit 1)"), ("", "failed: job is Failed"),
    ]  # fmt: skip
    assert "Master" in provider.status(job_id).nodes


def test_logs_come_from_the_jobs_pods_prefixed_with_the_pod(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    provider, job_id, _ = submit(kubeconfig)
    labels = {
        "training.kubeflow.org/job-name": "resnet",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
    }
    fake.add_pod(FakePod("training", "resnet-master-0", {**labels, "training.kubeflow.org/replica-type": "master"},
                         "pytorch", log="cloudddp: provider=kubeflow node 0/2\nepoch=1/2 loss=0.5\n"))  # fmt: skip
    fake.add_pod(FakePod("training", "resnet-worker-0", {**labels, "training.kubeflow.org/replica-type": "worker"},
                         "pytorch", log="cloudddp: provider=kubeflow node 1/2\n"))  # fmt: skip
    fake.add_pod(
        FakePod("training", "other-master-0", {"training.kubeflow.org/job-name": "other"}, "pytorch", log="no")
    )
    assert list(provider.logs(job_id)) == [
        "[resnet-master-0] cloudddp: provider=kubeflow node 0/2",
        "[resnet-master-0] epoch=1/2 loss=0.5",
        "[resnet-worker-0] cloudddp: provider=kubeflow node 1/2",
    ]
    fake.set_conditions("pytorchjobs", "training", "resnet", [{"type": "Succeeded", "status": "True"}])
    followed = list(provider.logs(job_id, follow=True))
    assert sorted(followed) == sorted([
        "[resnet-master-0] cloudddp: provider=kubeflow node 0/2", "[resnet-master-0] epoch=1/2 loss=0.5",
        "[resnet-worker-0] cloudddp: provider=kubeflow node 1/2",
    ])  # fmt: skip


def test_logs_of_a_trainjob_use_jobsets_label_and_the_trainer_container(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    provider, job_id, _ = submit(kubeconfig, kubeflow_api="trainer-v2")
    # JobSet names pods <jobset>-<replicated job>-<job index>-<pod index>-<suffix>; the runtime's job and
    # container are both `node` (kubeflow/trainer v2.3.0 manifests/base/runtimes/torch_distributed.yaml).
    fake.add_pod(FakePod("training", "resnet-node-0-0-abcde", {"jobset.sigs.k8s.io/jobset-name": "resnet"},
                         "node", log="hello from node 0\n"))  # fmt: skip
    fake.add_pod(FakePod("training", "resnet-node-0-1-fghij", {"jobset.sigs.k8s.io/jobset-name": "resnet"},
                         "node", phase="Pending"))  # fmt: skip
    assert list(provider.logs(job_id)) == ["[resnet-node-0-0-abcde] hello from node 0"]


def test_a_trainjob_trainers_webhook_refuses_is_one_paragraph_and_nothing_is_created(
    api: tuple[FakeAPIServer, Path],
) -> None:
    fake, kubeconfig = api
    with pytest.raises(CloudDDPError) as refused:
        submit(kubeconfig, kubeflow_api="trainer-v2", runtime="deepspeed-distributed")  # not installed here
    message = str(refused.value)
    assert "answered 403" in message and 'admission webhook "validator.trainjob.trainer.kubeflow.org"' in message
    assert "'deepspeed-distributed': ClusterTrainingRuntime not found" in message and not fake.objects


def test_cancel_deletes_the_job_in_the_foreground(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    provider, job_id, _ = submit(kubeconfig)
    provider.cancel(job_id)
    assert fake.objects == {} and fake.deletions[-1]["propagationPolicy"] == "Foreground"
    with pytest.raises(CloudDDPError, match=r'404: pytorchjobs.kubeflow.org "resnet" not found'):
        provider.status(job_id)


def test_nodes_sharing_a_readwriteonce_claim_get_a_warning(
    api: tuple[FakeAPIServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    fake, kubeconfig = api
    fake.add_claim("training", "datasets", ["ReadWriteOnce"])
    submit(kubeconfig)
    assert "PersistentVolumeClaim 'datasets' is ReadWriteOnce" in capsys.readouterr().err


def test_an_elastic_job_that_may_grow_past_one_node_gets_the_warning(
    api: tuple[FakeAPIServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    fake, kubeconfig = api
    fake.add_claim("training", "datasets", ["ReadWriteOnce"])
    submit(kubeconfig, nodes=1, elastic={"min_nodes": 1, "max_nodes": 3})
    assert "3 nodes sharing it will stay Pending" in capsys.readouterr().err


def test_a_readwritemany_claim_or_one_node_gets_no_warning(
    api: tuple[FakeAPIServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    fake, kubeconfig = api
    fake.add_claim("training", "datasets", ["ReadWriteMany"])
    submit(kubeconfig)
    fake.add_claim("training", "datasets", ["ReadWriteOnce"])
    provider = KubernetesProvider()
    provider.submit(
        provider.render(
            build_spec({**spec_for(kubeconfig).model_dump(exclude_unset=True), "name": "single", "nodes": 1})
        )
    )
    assert "warning" not in capsys.readouterr().err


def test_a_missing_claim_is_reported_before_the_job_is_created(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    del fake.claims[("training", "datasets")]
    with pytest.raises(CloudDDPError, match=r'persistentvolumeclaims "datasets" not found'):
        submit(kubeconfig)
    assert fake.objects == {}


@pytest.mark.process
def test_status_logs_and_cancel_work_from_the_cli_with_kubeconfig(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    _, job_id, _ = submit(kubeconfig)
    fake.set_conditions("pytorchjobs", "training", "resnet", [{"type": "Running", "status": "True"}])
    env = {"KUBECONFIG": str(kubeconfig)}
    status = run_cli("status", "-p", "kubernetes", job_id, env=env, timeout=60)
    assert status.returncode == 0 and "RUNNING" in status.stdout, status.stderr
    cancel = run_cli("cancel", "-p", "kubernetes", "resnet", env=env, timeout=60)  # bare name: context's namespace
    assert cancel.returncode == 0, cancel.stderr
    assert fake.objects == {}


@pytest.mark.process
def test_launch_from_the_cli_submits_and_returns_with_no_wait(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    result = run_cli("launch", "-p", "kubernetes", "--no-wait", "--nodes", "2", "--image", "registry.example.com/train:1",
                     "-i", "train=pvc://datasets/demo", "--name", "cli-job", str(SOURCES / "train_ddp.py"),
                     env={"KUBECONFIG": str(kubeconfig)}, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "submitted pytorchjobs/training/cli-job (kubernetes)" in result.stdout
    assert (
        fake.objects[("pytorchjobs", "training", "cli-job")]["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
    )


# -- the fake's own checks, each made to fail -------------------------------------------------
def raw_request(url: str, token: str, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any], Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, dict(response.headers), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


@pytest.fixture
def served(api: tuple[FakeAPIServer, Path]) -> tuple[FakeAPIServer, str, dict[str, Any]]:
    fake, kubeconfig = api
    body = KubernetesProvider().render(spec_for(kubeconfig)).request.body
    return fake, f"http://127.0.0.1:{fake.httpd.server_address[1]}", body


COLLECTION = "/apis/kubeflow.org/v1/namespaces/training/pytorchjobs"


def test_fake_rejects_a_body_that_breaks_the_crd_schema(served: tuple[FakeAPIServer, str, dict[str, Any]]) -> None:
    fake, url, body = served
    body["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "one"
    code, _, answer = raw_request(url, fake.token, "POST", COLLECTION, body)
    assert (code, answer["reason"]) == (422, "Invalid") and "replicas" in answer["message"]


def test_fake_rejects_a_kind_that_does_not_match_the_path(served: tuple[FakeAPIServer, str, dict[str, Any]]) -> None:
    fake, url, body = served
    code, _, answer = raw_request(
        url, fake.token, "POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs", body
    )
    assert code == 400 and "does not match the expected API version" in answer["message"]


def test_fake_rejects_a_namespace_that_does_not_match_the_path(
    served: tuple[FakeAPIServer, str, dict[str, Any]],
) -> None:
    fake, url, body = served
    code, _, answer = raw_request(
        url, fake.token, "POST", "/apis/kubeflow.org/v1/namespaces/elsewhere/pytorchjobs", body
    )
    assert code == 400 and "namespace of the provided object does not match" in answer["message"]


def test_fake_rejects_an_invalid_name(served: tuple[FakeAPIServer, str, dict[str, Any]]) -> None:
    fake, url, body = served
    body["metadata"]["name"] = "Resnet_1"
    code, _, answer = raw_request(url, fake.token, "POST", COLLECTION, body)
    assert (code, answer["reason"]) == (422, "Invalid")


TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs"
DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
           "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
           "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")  # fmt: skip


def trainjob_body(kubeconfig: Path, release: str = "v2.2", **kubernetes: Any) -> dict[str, Any]:
    spec = spec_for(kubeconfig, kubeflow_api="trainer-v2", trainer_release=release, **kubernetes)
    return KubernetesProvider().render(spec).request.body  # type: ignore[no-any-return]


def test_fake_refuses_a_pytorchjob_name_the_operators_webhook_refuses(
    served: tuple[FakeAPIServer, str, dict[str, Any]],
) -> None:
    fake, url, body = served
    body["metadata"]["name"] = "9start"  # a DNS-1123 subdomain, so the API server's own name check passes
    code, _, answer = raw_request(url, fake.token, "POST", COLLECTION, body)
    assert (code, answer["reason"]) == (403, "Forbidden") and fake.objects == {}
    assert answer["message"] == ('admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the '
                                 f'request: metadata.name: Invalid value: "9start": should match: {DNS1035}')  # fmt: skip


@pytest.mark.parametrize(
    ("name", "elastic", "service"),
    [("a" * 55, None, "a" * 55 + "-master-0"),  # the Master's and the Worker's Services: 64 characters
     ("a" * 54, {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 12}, "a" * 54 + "-worker-11")],
)  # fmt: skip
def test_fake_refuses_a_pytorchjob_whose_service_names_would_be_too_long(
    served: tuple[FakeAPIServer, str, dict[str, Any]], name: str, elastic: Any, service: str
) -> None:
    fake, url, body = served
    body["metadata"]["name"] = name
    if elastic:
        body["spec"]["elasticPolicy"] = elastic
        body["spec"]["pytorchReplicaSpecs"].pop("Master")
    code, _, answer = raw_request(url, fake.token, "POST", COLLECTION, body)
    assert (code, answer["reason"]) == (422, "Invalid") and fake.objects == {}
    error = (
        f'Service "{service}" is invalid: metadata.name: Invalid value: "{service}": must be no more than 63 characters'
    )
    assert error in answer["message"]


@pytest.mark.parametrize(
    ("name", "rule"),
    [("9start", "metadata.name must match RFC 1035 DNS label format"),
     ("a" * 64, "metadata.name must be no more than 63 characters")],
)  # fmt: skip
def test_fake_refuses_a_trainjob_name_by_the_crds_rules(api: tuple[FakeAPIServer, Path], name: str, rule: str) -> None:
    fake, kubeconfig = api
    body = trainjob_body(kubeconfig)
    body["metadata"]["name"] = name
    code, _, answer = raw_request(fake_url(fake), fake.token, "POST", TRAINJOBS, body)
    assert (code, answer["reason"]) == (422, "Invalid") and fake.objects == {}
    assert f'<nil>: Invalid value: "object": {rule}' in answer["message"]


def test_fake_refuses_a_trainjob_name_by_trainer_v2_0s_webhook(api: tuple[FakeAPIServer, Path]) -> None:
    fake, kubeconfig = api
    fake.crd_files["trainjobs"] = OLDER_TRAINJOB_CRDS["v2.0"]  # no CEL rules: the webhook checks the name
    body = trainjob_body(kubeconfig, release="v2.0")
    body["metadata"]["name"] = "9start"
    code, _, answer = raw_request(fake_url(fake), fake.token, "POST", TRAINJOBS, body)
    assert (code, answer["reason"]) == (403, "Forbidden") and fake.objects == {}
    assert answer["message"] == ('admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
                                 f'metadata.name: Invalid value: "9start": {DNS1035}')  # fmt: skip


@pytest.mark.parametrize(
    ("name", "too_long"),
    [("a" * 49, ["pod"]),  # a...a-node-0-1-abcde: 64 characters
     ("a" * 57, ["job", "pod"])],  # a...a-node-0: 64
)  # fmt: skip
def test_fake_refuses_a_trainjob_whose_jobset_names_would_be_too_long(
    api: tuple[FakeAPIServer, Path], name: str, too_long: list[str]
) -> None:
    fake, kubeconfig = api
    body = trainjob_body(kubeconfig)
    body["metadata"]["name"] = name
    code, _, answer = raw_request(fake_url(fake), fake.token, "POST", TRAINJOBS, body)
    assert (code, answer["reason"]) == (422, "Invalid") and fake.objects == {}
    for what in too_long:
        error = f"JobSet name is too long, {what} names generated for this JobSet will exceed 63 characters"
        assert f'spec.replicatedJobs[0].name: Invalid value: "{name}-node-0": {error}' in answer["message"]
    assert answer["message"].count("JobSet name is too long") == len(too_long)


@pytest.mark.parametrize(("sub_path", "error"), [("../x", "must not contain '..'"), ("/x", "must be a relative path")])
def test_fake_refuses_a_sub_path_outside_the_volume(api: tuple[FakeAPIServer, Path], sub_path: str, error: str) -> None:
    fake, kubeconfig = api
    pytorchjob = KubernetesProvider().render(spec_for(kubeconfig)).request.body
    trainjob = trainjob_body(kubeconfig)
    pytorchjob["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["volumeMounts"][0][
        "subPath"] = sub_path  # fmt: skip
    trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
        "spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["subPath"] = sub_path  # fmt: skip
    for path, body in ((COLLECTION, pytorchjob), (TRAINJOBS, trainjob)):
        code, _, answer = raw_request(fake_url(fake), fake.token, "POST", path, body)
        assert (code, answer["reason"]) == (422, "Invalid"), answer
        assert f'spec.containers[0].volumeMounts.subPath: Invalid value: "{sub_path}": {error}' in answer["message"]
    assert fake.objects == {}


@pytest.mark.parametrize(
    ("selector", "error"),
    [({"bad key": "x"}, 'spec.nodeSelector: Invalid value: "bad key": name part must consist of alphanumeric '
      "characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
     ({"Example.com/gpu": "x"}, 'spec.nodeSelector: Invalid value: "Example.com/gpu": prefix part a lowercase RFC '
      "1123 subdomain must consist of"),
     ({"a/b/c": "x"}, 'spec.nodeSelector: Invalid value: "a/b/c": a qualified name must consist of'),
     ({"gpu": "a b"}, 'spec.nodeSelector: Invalid value: "a b": a valid label must be an empty string or consist of'),
     ({"gpu": "v" * 64}, f'spec.nodeSelector: Invalid value: "{"v" * 64}": must be no more than 63 characters')],
)  # fmt: skip
def test_fake_refuses_a_node_selector_that_is_not_labels(
    api: tuple[FakeAPIServer, Path], selector: dict[str, str], error: str
) -> None:
    fake, kubeconfig = api
    pytorchjob = KubernetesProvider().render(spec_for(kubeconfig)).request.body
    trainjob = trainjob_body(kubeconfig, node_selector={"pool": "gpu"})
    pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["nodeSelector"] = selector
    trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
        "spec"]["template"]["spec"]["nodeSelector"] = selector  # fmt: skip
    for path, body in ((COLLECTION, pytorchjob), (TRAINJOBS, trainjob)):
        code, _, answer = raw_request(fake_url(fake), fake.token, "POST", path, body)
        assert (code, answer["reason"]) == (422, "Invalid") and error in answer["message"], answer
    assert fake.objects == {}


def fake_url(fake: FakeAPIServer) -> str:
    return f"http://127.0.0.1:{fake.httpd.server_address[1]}"


def test_fake_prunes_unknown_fields_with_a_warning(served: tuple[FakeAPIServer, str, dict[str, Any]]) -> None:
    fake, url, body = served
    body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["workdir"] = "/x"
    code, headers, answer = raw_request(url, fake.token, "POST", COLLECTION, body)
    assert code == 201 and "workdir" in headers["Warning"]
    assert "workdir" not in answer["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]


def test_fake_refuses_unknown_fields_under_strict_field_validation(
    served: tuple[FakeAPIServer, str, dict[str, Any]],
) -> None:
    fake, url, body = served
    body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["workdir"] = "/x"
    body["spec"]["elasticity"] = {}
    code, _, answer = raw_request(url, fake.token, "POST", COLLECTION + "?fieldValidation=Strict", body)
    assert (code, answer["reason"]) == (400, "BadRequest")
    assert answer["message"] == (
        'PyTorchJob in version "v1" cannot be handled as a PyTorchJob: strict decoding error: unknown field '
        '"spec.pytorchReplicaSpecs.Master.template.spec.containers[0].workdir", unknown field "spec.elasticity"'
    )
    # Another kind is not pruned against this CRD: its version mismatch is what the server says.
    trainjobs = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs?fieldValidation=Strict"
    code, _, answer = raw_request(url, fake.token, "POST", trainjobs, body)
    assert code == 400 and "does not match the expected API version" in answer["message"]
    assert fake.objects == {}


def test_fake_refuses_unknown_paths_and_verbs(served: tuple[FakeAPIServer, str, dict[str, Any]]) -> None:
    fake, url, _ = served
    assert raw_request(url, fake.token, "GET", "/apis/kubeflow.org/v1/namespaces/training/tfjobs/x")[0] == 404
    assert raw_request(url, fake.token, "PUT", COLLECTION + "/resnet", {})[0] == 405
    assert raw_request(url, fake.token, "DELETE", COLLECTION + "/resnet", {"propagationPolicy": "Sideways"})[0] == 400


def test_fake_refuses_logs_of_a_container_the_pod_lacks(served: tuple[FakeAPIServer, str, dict[str, Any]]) -> None:
    fake, url, _ = served
    fake.add_pod(FakePod("training", "p", {}, "pytorch", log="x"))
    code, _, answer = raw_request(url, fake.token, "GET", "/api/v1/namespaces/training/pods/p/log?container=trainer")
    assert code == 400 and "not valid for pod" in answer["message"]
