"""Rendered Kubeflow manifests: every variant validates against the CRD's OpenAPI schema (copied from
kubeflow/training-operator v1.9.0 and kubeflow/trainer into tests/data/schemas), and bad input is
refused with a message naming the field."""

from __future__ import annotations

import subprocess
from typing import Any, TypedDict

import jsonschema
import pytest
import yaml
from helpers import PYTHON, SOURCES, cli
from helpers.kubernetes_apiserver import OLDER_TRAINJOB_CRDS, crd_schema, crd_validator, trainjob_webhook_errors

from cloudddp import session
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider

IMAGE = "registry.example.com/train:1"


def render(nodes: int = 2, inputs: dict[str, str] | None = None, **kubernetes: Any) -> dict[str, Any]:
    spec = build_spec({
        "name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": nodes,
        "inputs": inputs if inputs is not None else {"train": "pvc://datasets/demo"},
        "hyperparameters": {"epochs": 2}, "kubernetes": {"image": IMAGE, "namespace": "team-a", **kubernetes},
    })  # fmt: skip
    return KubernetesProvider().render(spec).request.body  # type: ignore[no-any-return]


VARIANTS = {
    "static": {},
    "gpus-and-placement": {"gpus": 2, "cpu": "8", "memory": "32Gi", "node_selector": {"gpu": "a100"},
                           "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                           "image_pull_secrets": ["regcred"], "service_account": "trainer"},
    "elastic-c10d": {"elastic": {"min_nodes": 1, "max_nodes": 4, "max_restarts": 3}},
    "elastic-etcd": {"elastic": {"min_nodes": 2, "max_nodes": 2, "rdzv_backend": "etcd-v2", "rdzv_host": "etcd-service",
                                 "rdzv_port": 2379}},
    "secret-env": {"secret_env": {"WANDB_API_KEY": "wandb/api-key"}},
}  # fmt: skip


@pytest.mark.parametrize("variant", VARIANTS)
def test_pytorchjob_variants_validate_against_the_crd(variant: str) -> None:
    manifest = render(**VARIANTS[variant])
    crd_validator("pytorchjobs").validate(manifest)
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    container = next(iter(replicas.values()))["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch" and container["command"] == ["cloudddp-launch", "/workspace/train_ddp.py"]
    assert container["args"] == ["--epochs", "2"]


def test_static_job_has_one_master_and_the_rest_workers() -> None:
    replicas = render(nodes=3)["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 2)
    assert "Worker" not in render(nodes=1)["spec"]["pytorchReplicaSpecs"]


def test_elastic_job_has_workers_only_and_the_policy() -> None:
    spec = render(nodes=2, elastic={"min_nodes": 1, "max_nodes": 4})["spec"]
    assert list(spec["pytorchReplicaSpecs"]) == ["Worker"] and spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert spec["elasticPolicy"] == {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 4}


def test_gpus_and_placement_reach_the_pod() -> None:
    pod = render(**VARIANTS["gpus-and-placement"])["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"] == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 2}
    assert pod["nodeSelector"] == {"gpu": "a100"} and pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_s3_inputs_are_pulled_by_the_jobs_image_with_keys_from_the_secret() -> None:
    manifest = render(
        inputs={"train": "s3://datasets/demo/train", "val": "s3://datasets/demo/val"},
        s3_endpoint="http://minio.minio:9000", s3_secret="minio-creds", s3_region="eu-west-1",
    )  # fmt: skip
    crd_validator("pytorchjobs").validate(manifest)
    for replica in manifest["spec"]["pytorchReplicaSpecs"].values():  # every pod pulls its own copy
        pod = replica["template"]["spec"]
        (pull,) = pod["initContainers"]  # one for all channels: one interpreter start per pod
        assert (pull["name"], pull["image"]) == ("pull-inputs", IMAGE)
        assert pull["command"] == ["python", "-m", "cloudddp.launcher.pull_inputs", "--into", "/cloudddp/data",
                                   "train=s3://datasets/demo/train", "val=s3://datasets/demo/val"]  # fmt: skip
        assert pull["env"] == [
            {"name": "AWS_ENDPOINT_URL", "value": "http://minio.minio:9000"},
            {"name": "AWS_REGION", "value": "eu-west-1"},
            *({"name": key, "valueFrom": {"secretKeyRef": {"name": "minio-creds", "key": key}}}
              for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")),
        ]  # fmt: skip
        assert {"name": "cloudddp-data", "emptyDir": {}} in pod["volumes"]
        training = pod["containers"][0]
        assert {"name": "CLOUDDDP_CHANNEL_TRAIN", "value": "/cloudddp/data/train"} in training["env"]
        assert not any(item["name"].startswith("AWS_") for item in training["env"])  # keys: the pull only
        assert {"name": "cloudddp-data", "mountPath": "/cloudddp/data"} in training["volumeMounts"]


class S3Settings(TypedDict, total=False):
    """The kubernetes provider's S3 settings a case gives (render's **kubernetes)."""

    s3_secret: str


@pytest.mark.parametrize(
    ("s3", "env"),
    [({}, None),  # EKS: AWS S3, with the pod's own role (IRSA / Pod Identity of the service account)
     ({"s3_secret": "aws-keys"}, [{"name": key, "valueFrom": {"secretKeyRef": {"name": "aws-keys", "key": key}}}
                                  for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")])],
)  # fmt: skip
def test_s3_inputs_on_aws_need_no_endpoint_and_keys_only_if_given(s3: S3Settings, env: Any) -> None:
    manifest = render(inputs={"train": "s3://datasets/demo/train"}, service_account="s3-reader", **s3)
    crd_validator("pytorchjobs").validate(manifest)
    for replica in manifest["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        (pull,) = pod["initContainers"]
        assert pull.get("env") == env and pod["serviceAccountName"] == "s3-reader"
        assert pull["command"][-1] == "train=s3://datasets/demo/train"


@pytest.mark.parametrize(
    "kubernetes",
    [{}, {"node_selector": {"pool": "gpu"}, "gpus": 1, "tolerations": [{"key": "gpu", "operator": "Exists"}]}],
)
def test_trainjob_validates_against_the_crd(kubernetes: dict[str, Any]) -> None:
    manifest = render(kubeflow_api="trainer-v2", **kubernetes)
    crd_validator("trainjobs").validate(manifest)
    assert trainjob_webhook_errors(manifest) == []
    trainer = manifest["spec"]["trainer"]
    assert manifest["spec"]["runtimeRef"]["name"] == "torch-distributed" and trainer["numNodes"] == 2
    assert trainer["command"][-2:] == ["cloudddp-launch", "/workspace/train_ddp.py"]
    (patch,) = manifest["spec"]["runtimePatches"]
    (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = job["template"]["spec"]["template"]["spec"]
    assert (patch["manager"], job["name"], pod["containers"][0]["name"]) == ("cloudddp.io/launch", "node", "node")
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "datasets"}
    assert pod.get("nodeSelector") == kubernetes.get("node_selector")


def test_trainjob_carries_pull_secrets_and_secret_env_by_reference() -> None:
    """Trainer copies valueFrom from trainer.env (pkg/apply/apply.go EnvVar, at v2.3.0 as at v2.0.1) and
    v2.3.0 patches imagePullSecrets (trainjob_types.go PodSpecPatch)."""
    manifest = render(kubeflow_api="trainer-v2", image_pull_secrets=["regcred"], secret_env={"HF_TOKEN": "hf/token"})
    crd_validator("trainjobs").validate(manifest)
    assert trainjob_webhook_errors(manifest) == []
    env = manifest["spec"]["trainer"]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}} in env
    pod = manifest["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert pod["template"]["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]


def test_trainjob_pulls_s3_inputs_in_the_node_container_with_the_keys_by_reference() -> None:
    """No init container (the runtime has none to amend): the `node` container pulls, then execs the launcher
    without the pull's variables, which it holds under CLOUDDDP_PULL_* only."""
    manifest = render(inputs={"train": "s3://datasets/demo"}, kubeflow_api="trainer-v2", s3_endpoint="http://m:9000",
                      s3_secret="minio-creds")  # fmt: skip
    crd_validator("trainjobs").validate(manifest)
    assert trainjob_webhook_errors(manifest) == []
    trainer = manifest["spec"]["trainer"]
    pulled = {item["name"]: item.get("value", item.get("valueFrom")) for item in trainer["env"]}
    assert pulled["CLOUDDDP_PULL_AWS_ENDPOINT_URL"] == "http://m:9000"
    assert pulled["CLOUDDDP_PULL_AWS_SECRET_ACCESS_KEY"] == {
        "secretKeyRef": {"name": "minio-creds", "key": "AWS_SECRET_ACCESS_KEY"}
    }
    assert not [name for name in pulled if name.startswith("AWS_")]  # the launcher's env names no key
    script = trainer["command"][2]
    assert "cloudddp.launcher.pull_inputs --into /cloudddp/data train=s3://datasets/demo" in script
    assert "unset CLOUDDDP_PULL_AWS_ENDPOINT_URL CLOUDDDP_PULL_AWS_ACCESS_KEY_ID" in script
    mounts = pod_of(manifest)["containers"][0]["volumeMounts"]
    assert {"name": "cloudddp-data", "mountPath": "/cloudddp/data"} in mounts
    assert {"name": "cloudddp-data", "emptyDir": {}} in pod_of(manifest)["volumes"]


@pytest.mark.parametrize(
    ("change", "refusal"),
    [(lambda m: m["spec"]["runtimeRef"].update(name="torch-distributed-gpu"), "ClusterTrainingRuntime not found"),
     (lambda m: m["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "3"}), "must not have reserved envs"),
     (lambda m: m["spec"]["runtimePatches"][0].update(manager="cloudddp"), "must be a domain-prefixed path"),
     (lambda m: job_of(m).update(name="trainer-node"), "replicated job that doesn't exist"),
     (lambda m: pod_of(m)["containers"][0].update(name="trainer"), "container that doesn't exist in the runtime job node"),
     (lambda m: pod_of(m).update(initContainers=[{"name": "pull-inputs"}]), "initContainer that doesn't exist"),
     (lambda m: pod_of(m)["containers"][0].update(env=[{"name": "A", "value": "1"}]), "must not have envs for the")],
)  # fmt: skip
def test_each_of_trainers_webhook_checks_refuses(change: Any, refusal: str) -> None:
    """The fake API server's Trainer webhook (kubernetes_apiserver.trainjob_webhook_errors), each check failing."""
    manifest = render(kubeflow_api="trainer-v2")
    change(manifest)
    crd_validator("trainjobs").validate(manifest)  # the schema alone lets each of these through
    errors = trainjob_webhook_errors(manifest)
    assert len(errors) == 1 and refusal in errors[0], errors


PLACEMENT = {"node_selector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Exists"}],
             "service_account": "trainer"}  # fmt: skip


@pytest.mark.parametrize(("release", "field"), [("v2.1", "podTemplateOverrides"), ("v2.0", "podSpecOverrides")])
def test_trainjob_for_an_older_trainer_release_takes_its_overrides_field(release: str, field: str) -> None:
    """The pod fields reach the `node` job in the release's own field, valid against that release's CRD (and
    not against v2.3.0's, which dropped the field), and pass its webhook."""
    manifest = render(kubeflow_api="trainer-v2", trainer_release=release, inputs={"train": "s3://datasets/demo"},
                      s3_endpoint="http://m:9000", **PLACEMENT)  # fmt: skip
    crd_validator("trainjobs", OLDER_TRAINJOB_CRDS[release]).validate(manifest)
    assert trainjob_webhook_errors(manifest) == []
    assert "runtimePatches" not in manifest["spec"]
    (override,) = manifest["spec"][field]
    assert override["targetJobs"] == [{"name": "node"}]
    pod = override["spec"] if release == "v2.1" else override
    assert (pod["nodeSelector"], pod["serviceAccountName"]) == ({"pool": "gpu"}, "trainer")
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert {"name": "cloudddp-data", "emptyDir": {}} in pod["volumes"]
    (container,) = pod["containers"]
    assert container["name"] == "node" and "env" not in container
    assert {"name": "cloudddp-data", "mountPath": "/cloudddp/data"} in container["volumeMounts"]
    assert field not in crd_schema("trainjobs")["properties"]["spec"]["properties"]  # v2.3.0 would drop it


def test_trainer_v2_1_carries_image_pull_secrets_and_v2_0_refuses_them() -> None:
    manifest = render(kubeflow_api="trainer-v2", trainer_release="v2.1", image_pull_secrets=["regcred"])
    crd_validator("trainjobs", OLDER_TRAINJOB_CRDS["v2.1"]).validate(manifest)
    assert manifest["spec"]["podTemplateOverrides"][0]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    with pytest.raises(CloudDDPError) as refused:
        render(kubeflow_api="trainer-v2", trainer_release="v2.0", image_pull_secrets=["regcred"])
    assert "trainer_release='v2.0' cannot carry: image_pull_secrets" in str(refused.value)


def override_pod(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]
    return spec["podTemplateOverrides"][0]["spec"] if "podTemplateOverrides" in spec else spec["podSpecOverrides"][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("release", "change", "refusal"),
    [("v2.1", lambda m: m["spec"]["podTemplateOverrides"][0]["targetJobs"][0].update(name="trainer-node"),
      "spec.podTemplateOverrides: Invalid value: must not have targetJob that doesn't exist"),
     ("v2.1", lambda m: override_pod(m)["containers"][0].update(name="trainer"), "container that doesn't exist in the runtime job node"),
     ("v2.1", lambda m: override_pod(m).update(initContainers=[{"name": "pull"}]), "initContainer that doesn't exist"),
     ("v2.1", lambda m: override_pod(m)["containers"][0].update(env=[{"name": "A", "value": "1"}]), "must not have envs for the"),
     ("v2.0", lambda m: m["spec"]["podSpecOverrides"].append({"targetJobs": [{"name": "node"}]}),
      "spec.podSpecOverrides: Duplicate value: 'node'"),
     ("v2.0", lambda m: m["spec"]["podSpecOverrides"][0]["targetJobs"][0].update(name="trainer-node"),
      "spec.podSpecOverrides: Invalid value: must not have targetJob that doesn't exist"),
     ("v2.0", lambda m: override_pod(m)["containers"][0].update(env=[{"name": "A", "value": "1"}]), "must not have envs for the")],
)  # fmt: skip
def test_each_of_the_older_webhooks_override_checks_refuses(release: str, change: Any, refusal: str) -> None:
    manifest = render(kubeflow_api="trainer-v2", trainer_release=release)
    change(manifest)
    crd_validator("trainjobs", OLDER_TRAINJOB_CRDS[release]).validate(manifest)  # the schema lets each through
    errors = trainjob_webhook_errors(manifest)
    assert len(errors) == 1 and refusal in errors[0], errors


def job_of(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]  # type: ignore[no-any-return]


def pod_of(manifest: dict[str, Any]) -> dict[str, Any]:
    return job_of(manifest)["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_a_broken_manifest_is_caught_by_the_schema() -> None:
    manifest = render()
    manifest["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = 7
    with pytest.raises(jsonschema.ValidationError):
        crd_validator("pytorchjobs").validate(manifest)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kubernetes": {"image": None}}, "kubernetes.image is not set"),
        ({"kubernetes": {"s3_secret": "Minio_Creds"}}, "kubernetes.s3_secret: Value error, Secret name 'Minio_Creds' is not a valid Kubernetes name"),
        ({"kubernetes": {"secret_env": {"TOKEN": "bad name/key"}}}, "is not a valid Kubernetes name"),
        ({"kubernetes": {"memory": "lots"}}, "kubernetes.memory: Value error, 'lots' is not a Kubernetes quantity"),
        ({"inputs": {"train": "./demo-data"}}, "inputs.train='./demo-data': pods cannot read a folder on this machine"),
        ({"inputs": {"train": "s3://Bad_Bucket/p"}}, "inputs.train='s3://Bad_Bucket/p': 'Bad_Bucket' is not an S3 bucket name"),
        ({"inputs": {"train": "s3:///p"}}, "inputs.train='s3:///p': '' is not an S3 bucket name"),
        ({"kubernetes": {"s3_endpoint": "minio.minio:9000"}}, "kubernetes.s3_endpoint: Value error, 'minio.minio:9000' is not an http:// or https:// URL"),
        ({"kubernetes": {"s3_image": "minio/mc"}}, "kubernetes.s3_image: unknown field"),
        ({"environment": {"HF_TOKEN": "hf_abc"}}, "environment.HF_TOKEN looks like a secret"),
        ({"kubernetes": {"elastic": {"min_nodes": 3, "max_nodes": 4}}}, "nodes=2 is outside kubernetes.elastic's range 3..4"),
        ({"kubernetes": {"elastic": {"min_nodes": 4, "max_nodes": 2}}}, "min_nodes=4 is above max_nodes=2"),
        ({"kubernetes": {"elastic": {"min_nodes": 1, "max_nodes": 2, "rdzv_backend": "etcd"}}}, "needs kubernetes.elastic.rdzv_host"),
        ({"nodes": 0}, "nodes: Input should be greater than or equal to 1"),
        ({"output": "/mnt/out"}, "output='/mnt/out': on Kubernetes write it to a PersistentVolumeClaim"),
    ],
)  # fmt: skip
def test_bad_input_is_named(change: dict[str, Any], message: str) -> None:
    data: dict[str, Any] = {"name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2,
                            "inputs": {"train": "pvc://datasets/demo"}, "kubernetes": {"image": IMAGE}}  # fmt: skip
    for key, value in change.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and key == "kubernetes" else value
    with pytest.raises(CloudDDPError) as caught:
        session.render(KubernetesProvider(), build_spec(data))  # as every door: the secrets policy, then render
    assert message in str(caught.value)


def test_dry_run_prints_a_manifest_ready_for_kubectl_apply(tmp_path: Any) -> None:
    result = cli(
        "launch", "-p", "kubernetes", "--dry-run", "--nodes", "2", "--image", IMAGE, "--namespace", "team-a",
        "-i", "train=pvc://datasets/demo", "-e", "MODE=fast", str(SOURCES / "train_ddp.py"), "--", "--epochs", "3",
        env={"KUBECONFIG": str(tmp_path / "none")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = yaml.safe_load(result.stdout)
    crd_validator("pytorchjobs").validate(manifest)
    assert (manifest["kind"], manifest["metadata"]["namespace"]) == ("PyTorchJob", "team-a")
    container = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["--epochs", "3"] and {"name": "MODE", "value": "fast"} in container["env"]


def test_dry_run_with_an_inline_secret_fails_without_printing_it(tmp_path: Any) -> None:
    result = cli("launch", "-p", "kubernetes", "--dry-run", "--image", IMAGE, "-e", "MY_PASSWORD=hunter2",
                     str(SOURCES / "train_ddp.py"), env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip
    assert result.returncode == 2 and "kubernetes.secret_env" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--s3-secret", "Minio_Creds"], "kubernetes.s3_secret: Value error, Secret name 'Minio_Creds'"),
     (["--image-pull-secret", "reg cred"], "image pull Secret name 'reg cred' is not a valid Kubernetes name"),
     (["--nodes", "0"], "nodes: "),
     (["--kubeflow-api", "trainer-v2", "--trainer-release", "v2.5"], "kubernetes.trainer_release: Input should be"),
     (["--kubeflow-api", "trainer-v2", "--trainer-release", "v2.0", "--image-pull-secret", "regcred"],
      "trainer_release='v2.0' cannot carry: image_pull_secrets")],
)  # fmt: skip
def test_bad_input_from_the_cli_is_one_paragraph_and_exit_2(tmp_path: Any, flags: list[str], message: str) -> None:
    result = cli("launch", "-p", "kubernetes", "--image", IMAGE, *flags, "--dry-run", str(SOURCES / "train_ddp.py"),
                     env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.process
def test_declaring_the_provider_imports_no_kubernetes_client() -> None:
    # The registry imports every provider's __init__ on each CLI start: the SDK must load only when used.
    code = "import sys, cloudddp.providers.kubernetes; print('kubernetes' in sys.modules)"
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


def container_env(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]


def test_the_users_own_model_folder_wins_as_on_every_other_provider() -> None:
    spec = build_spec({"name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES),
                       "environment": {"CLOUDDDP_MODEL_DIR": "/mnt/models"}, "kubernetes": {"image": IMAGE}})  # fmt: skip
    env = container_env(KubernetesProvider().render(spec).request.body)
    assert [e for e in env if e["name"] == "CLOUDDDP_MODEL_DIR"] == [
        {"name": "CLOUDDDP_MODEL_DIR", "value": "/mnt/models"}
    ]


@pytest.mark.parametrize(("environment", "where"), [({"DB_HOST": "db"}, "in environment"), ({}, "by cloudddp")])
def test_a_secret_variable_also_set_another_way_is_refused(environment: dict[str, str], where: str) -> None:
    # Two entries of one name would reach the kubelet, which keeps the last: makeEnvironmentVariables fills a map,
    # tmpEnv[envVar.Name] = runtimeVal (kubernetes/kubernetes pkg/kubelet/kubelet_pods.go at
    # 001a80e975bb880d0fe60b304d30950fe661f278). The secret or the plain value would be lost silently.
    name = "DB_HOST" if environment else "CLOUDDDP_MODEL_DIR"
    spec = build_spec({"name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES),
                       "environment": environment, "kubernetes": {"image": IMAGE, "secret_env": {name: "s/k"}}})  # fmt: skip
    with pytest.raises(CloudDDPError, match=f"kubernetes.secret_env.{name}: {name} is also set {where}"):
        KubernetesProvider().render(spec)
