"""Pod fields the CRDs do not check: the API server refuses such a pod only when the operator (or JobSet) creates
it, so the job would exist and never start. cloudddp checks them offline, as it checks node selectors.

Rules from kubernetes/kubernetes pkg/apis/core/validation/validation.go at commit
000f26050b9be6fb3d79fae95e06b47fc96128cd (a stored copy of the file): ValidateVolumes (a volume's name is a DNS-1123
label), ValidateTolerations, validateSecretKeySelector (IsConfigMapKey), ValidateServiceAccountName
(NameIsDNSSubdomain); and kubernetes/apimachinery pkg/util/validation/validation.go and pkg/api/validation/generic.go
at eed236ceee2c19c2753a3d93ac0631dc20750454 (IsDNS1123Label, IsConfigMapKey, NameIsDNSSubdomain).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SOURCES, cli
from helpers.kubernetes_apiserver import crd_validator, trainjob_webhook_errors

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider

IMAGE = "registry.example.com/train:1"
# apimachinery IsDNS1123Label: dns1123LabelFmt, at most DNS1123LabelMaxLength = 63.
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LONG = "a" * 60


def render(inputs: dict[str, str], output: str | None = None, **kubernetes: Any) -> dict[str, Any]:
    spec = build_spec({"name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2,
                       "inputs": inputs, "output": output,
                       "kubernetes": {"image": IMAGE, "namespace": "team-a", **kubernetes}})  # fmt: skip
    return KubernetesProvider().render(spec).request.body  # type: ignore[no-any-return]


def pod_and_mounts(manifest: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if manifest["kind"] == "PyTorchJob":
        pod = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    else:
        job = manifest["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        pod = job["template"]["spec"]["template"]["spec"]
    return pod, pod["containers"][0]["volumeMounts"]


def claims_by_mount_path(manifest: dict[str, Any]) -> dict[str, str]:
    """Mount path -> the claim the pod really mounts there (through the volume the mount names)."""
    pod, mounts = pod_and_mounts(manifest)
    claim_of = {
        v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v
    }
    return {m["mountPath"]: claim_of[m["name"]] for m in mounts if m["name"] in claim_of}


@pytest.mark.parametrize("api", ["v1", "trainer-v2"])
def test_volume_names_are_dns_labels_and_one_per_claim(api: str) -> None:
    inputs = {"train": f"pvc://{LONG}x/d", "val": f"pvc://{LONG}y/d", "dotted": "pvc://data.v1/d",
              "plain": "pvc://datasets/demo", "again": "pvc://datasets/other"}  # fmt: skip
    manifest = render(inputs, output=f"pvc://out.{'b' * 240}/run", kubeflow_api=api)
    crd_validator("pytorchjobs" if api == "v1" else "trainjobs").validate(manifest)
    assert api == "v1" or trainjob_webhook_errors(manifest) == []
    pod, _ = pod_and_mounts(manifest)
    names = [volume["name"] for volume in pod["volumes"]]
    assert all(DNS1123_LABEL.fullmatch(name) and len(name) <= 63 for name in names), names
    assert len(names) == len(set(names))
    # Every channel mounts its own claim: the two long names once shared one volume, so `val` read `train`'s claim.
    assert claims_by_mount_path(manifest) == {
        "/cloudddp/data/train": f"{LONG}x", "/cloudddp/data/val": f"{LONG}y", "/cloudddp/data/dotted": "data.v1",
        "/cloudddp/data/plain": "datasets", "/cloudddp/data/again": "datasets", "/cloudddp/output": f"out.{'b' * 240}",
    }  # fmt: skip
    assert "pvc-datasets" in names  # a name that already was a label stays as it was
    assert sum(1 for v in pod["volumes"] if v.get("persistentVolumeClaim", {}).get("claimName") == "datasets") == 1


TOLERATIONS = [
    ({"key": "nvidia.com/gpu", "operator": "Exists", "value": "present", "effect": "NoSchedule"},
     "operator Exists takes no value"),
    ({"operator": "Equal", "value": "x"}, "without a key must have operator Exists"),
    ({"value": "x"}, "without a key must have operator Exists"),  # an empty operator means Equal
    ({"key": "a", "tolerationSeconds": 30, "effect": "NoSchedule"}, "tolerationSeconds applies to effect NoExecute"),
    ({"key": "a", "tolerationSeconds": 30}, "tolerationSeconds applies to effect NoExecute"),
    ({"key": "bad key!", "value": "v"}, "the key 'bad key!' is not a label key"),
    ({"key": "a/b/c", "operator": "Exists"}, "more than one '/'"),
    ({"key": "a", "value": "not a label value"}, "the value 'not a label value' is not a label value"),
]  # fmt: skip


@pytest.mark.parametrize(("toleration", "problem"), TOLERATIONS)
def test_a_toleration_the_api_server_refuses_is_refused_offline(toleration: dict[str, Any], problem: str) -> None:
    ok = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    with pytest.raises(CloudDDPError) as refused:
        render({"train": "pvc://datasets/demo"}, tolerations=[ok, toleration])
    message = str(refused.value)
    assert "kubernetes.tolerations" in message and "tolerations[1]" in message and problem in message, message


@pytest.mark.parametrize(
    "toleration",
    [{"operator": "Exists"}, {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
     {"key": "example.com/pool", "value": "gpu", "effect": "NoSchedule"}, {"key": "a", "operator": "Equal"}],
)  # fmt: skip
def test_tolerations_kubernetes_takes_pass(toleration: dict[str, Any]) -> None:
    manifest = render({"train": "pvc://datasets/demo"}, tolerations=[toleration])
    crd_validator("pytorchjobs").validate(manifest)
    pod, _ = pod_and_mounts(manifest)
    assert pod["tolerations"] == [{"operator": "Equal", **toleration}]


@pytest.mark.parametrize("account", ["My_Trainer SA", "Trainer", "-trainer", "a" * 254])
def test_a_service_account_name_must_be_a_dns_subdomain(account: str) -> None:
    with pytest.raises(CloudDDPError, match=r"kubernetes.service_account: Value error, service account name"):
        render({"train": "pvc://datasets/demo"}, service_account=account)


def test_a_valid_service_account_passes() -> None:
    pod, _ = pod_and_mounts(render({"train": "pvc://datasets/demo"}, service_account="s3-reader.team-a"))
    assert pod["serviceAccountName"] == "s3-reader.team-a"


@pytest.mark.parametrize(
    ("reference", "key"),
    [("hf/token/with/slash", "token/with/slash"), ("wandb/key with space", "key with space"),
     ("s/..hidden", "..hidden"), ("s/..", ".."), ("s/" + "k" * 254, "k" * 254)],
)  # fmt: skip
def test_a_secret_key_kubernetes_refuses_is_refused_offline(reference: str, key: str) -> None:
    with pytest.raises(CloudDDPError) as refused:
        render({"train": "pvc://datasets/demo"}, secret_env={"HF_TOKEN": reference})
    message = str(refused.value)
    assert "kubernetes.secret_env" in message and f"the key {key!r} is not a Secret key" in message, message


def test_secret_keys_kubernetes_takes_pass() -> None:
    manifest = render({"train": "pvc://datasets/demo"}, secret_env={"A_KEY": "s/.env", "B_KEY": "s/WANDB_API-key.1"})
    env = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]
    refs = [item["valueFrom"]["secretKeyRef"]["key"] for item in env if "valueFrom" in item]
    assert refs == [".env", "WANDB_API-key.1"]


def test_the_cli_names_the_field_in_one_paragraph_with_exit_2(tmp_path: Path) -> None:
    """The tester's spec: each of these was accepted and printed as a manifest whose pods could never start."""
    bad = {
        "service_account": "My_Trainer SA",
        "secret_env": {"HF_TOKEN": "hf/token/with/slash"},
        "tolerations": [{"key": "bad key!", "value": "v"}],
    }
    for field, value in bad.items():
        job = tmp_path / f"{field}.yaml"
        job.write_text(yaml.safe_dump({"name": "tol", "entry_point": "train_ddp.py", "source_dir": str(SOURCES),
                                       "nodes": 2, "kubernetes": {"image": IMAGE, field: value}}))  # fmt: skip
        result = cli("launch", "-p", "kubernetes", "--dry-run", "-f", str(job),
                         env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip
        assert result.returncode == 2 and f"kubernetes.{field}" in result.stderr, result.stderr
        assert result.stdout == "" and "Traceback" not in result.stderr


def test_two_claims_are_never_given_one_volume(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard behind the hash: should two claims ever derive one name, the job is refused, not mounted wrong."""
    from cloudddp.providers.kubernetes import manifest

    monkeypatch.setattr(manifest, "volume_name", lambda claim: "pvc-same")
    with pytest.raises(CloudDDPError, match="the claims 'first' and 'second' would get the same pod volume name"):
        render({"a": "pvc://first/d", "b": "pvc://second/d"})
