"""Names and paths Kubernetes takes only in a given form are refused before anything is sent: the job's name (a
DNS-1035 label, short enough for the Services or JobSet pods named after it at this job's node count), a claim's
path with a '..' element (a volume mount's subPath) and node selector labels. Each limit is also checked against the
loopback API server's own port of the rules (tests/helpers/kubernetes_apiserver.py): at the limit the fake takes the
job, one character over it refuses it."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import SOURCES, run_cli
from helpers.kubernetes_apiserver import (
    crd_rule_errors,
    crd_schema,
    derived_object_errors,
    pytorchjob_webhook_errors,
    trainjob_webhook_errors,
)

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider

IMAGE = "registry.example.com/train:1"


def render(name: str = "resnet", nodes: int = 2, **fields: Any) -> dict[str, Any]:
    kubernetes = {"image": IMAGE, "namespace": "team-a", **fields.pop("kubernetes", {})}
    spec = build_spec({"name": name, "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": nodes,
                       "inputs": {"train": "pvc://datasets/demo"}, "kubernetes": kubernetes, **fields})  # fmt: skip
    return KubernetesProvider().render(spec).request.body  # type: ignore[no-any-return]


def fake_refusals(manifest: dict[str, Any]) -> list[str]:
    """Everything the loopback API server refuses in `manifest` beyond its CRD schema."""
    plural = "trainjobs" if manifest["kind"] == "TrainJob" else "pytorchjobs"
    webhook = trainjob_webhook_errors if plural == "trainjobs" else pytorchjob_webhook_errors
    return crd_rule_errors(crd_schema(plural), manifest) + webhook(manifest) + derived_object_errors(plural, manifest)


def render_cli(*flags: str) -> Any:
    return run_cli("render", "-p", "kubernetes", "--image", IMAGE, *flags, str(SOURCES / "train_ddp.py"),
                   env={"KUBECONFIG": "/nonexistent/kubeconfig"})  # fmt: skip


# (API, nodes, elastic, the longest name the cluster derives at the limit, the limit)
LIMITS = [
    ("v1", 1, None, "-master-0", 54),
    ("v1", 11, None, "-worker-9", 54),
    ("v1", 12, None, "-worker-10", 53),
    ("v1", 2, {"min_nodes": 1, "max_nodes": 12}, "-worker-11", 53),  # the HPA may grow the Workers to 12
    ("trainer-v2", 10, None, "-node-0-9-abcde", 48),
    ("trainer-v2", 11, None, "-node-0-10-abcde", 47),
]


WHY = {
    "PyTorchJob": "the training operator names a Service '<name>-<replica type>-<index>' after each replica, and a "
    "Service name must be a DNS-1035 label of at most 63 characters",
    "TrainJob": "JobSet names each pod '<name>-node-0-<index>-<5 random characters>' and refuses a job whose pod names "
    "would not be DNS-1035 labels of at most 63 characters",
}


@pytest.mark.parametrize(("api", "nodes", "elastic", "longest", "limit"), LIMITS)
def test_the_longest_name_a_job_can_have_depends_on_its_node_count(
    api: str, nodes: int, elastic: dict[str, int] | None, longest: str, limit: int
) -> None:
    settings = {"kubeflow_api": api, **({"elastic": elastic} if elastic else {})}
    manifest = render("a" * limit, nodes, kubernetes=settings)
    assert manifest["metadata"]["name"] == "a" * limit and fake_refusals(manifest) == []
    over = "a" * (limit + 1)
    manifest["metadata"]["name"] = over  # what the old check let through: the fake refuses it
    says = f'Service "{over}{longest}" is invalid' if api == "v1" else f'"{over}-node-0": JobSet name is too long, pod'
    assert says in "; ".join(fake_refusals(manifest))
    with pytest.raises(CloudDDPError) as refused:
        render(over, nodes, kubernetes=settings)
    kind = "TrainJob" if api == "trainer-v2" else "PyTorchJob"
    count = (elastic or {}).get("max_nodes", nodes)
    assert str(refused.value) == (
        f"name='{over}': a {kind}'s name must be a DNS-1035 label (lower-case letters, digits and '-', "
        f"starting with a letter and ending with a letter or digit) of at most {limit} characters for this job's "
        f"{count} node{'s' if count > 1 else ''}: {WHY[kind]}, and '<name>{longest}' is the longest here. This name "
        f"has {limit + 1} characters; give the job another one (name: / --name)."
    )


@pytest.mark.process
@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--name", "9start"], "name='9start': a PyTorchJob's name must be a DNS-1035 label (lower-case letters, digits "
      "and '-', starting with a letter and ending with a letter or digit) of at most 54 characters for this job's 1 "
      "node: the training operator"),
     (["--name", "9start", "--kubeflow-api", "trainer-v2"], "name='9start': a TrainJob's name must be a DNS-1035 "
      "label"),
     (["--name", "Resnet-", "--nodes", "12"], "name='Resnet-': a PyTorchJob's name must be a DNS-1035 label"),
     (["--name", "a" * 50, "--nodes", "3", "--kubeflow-api", "trainer-v2"], "of at most 48 characters for this "
      "job's 3 nodes: JobSet names each pod"),
     (["--name", "a" * 55, "--nodes", "3"], "of at most 54 characters for this job's 3 nodes")],
)  # fmt: skip
def test_a_name_kubernetes_refuses_is_exit_2_with_one_paragraph(flags: list[str], message: str) -> None:
    result = render_cli(*flags)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "is not such a label" in result.stderr or "This name has " in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr and "\n\n" not in result.stderr.strip()


@pytest.mark.parametrize(
    ("fields", "field", "uri", "path"),
    [({"inputs": {"train": "pvc://datasets/../x"}}, "inputs.train", "pvc://datasets/../x", "../x"),
     ({"output": "pvc://results/run/../../x"}, "output", "pvc://results/run/../../x", "run/../../x"),
     ({"checkpoint": "pvc://ckpt/a/.."}, "checkpoint", "pvc://ckpt/a/..", "a/.."),
     ({"inputs": {"train": "pvc://datasets//../x/"}}, "inputs.train", "pvc://datasets//../x/", "../x")],
)  # fmt: skip
def test_a_claim_path_with_a_dot_dot_element_is_refused(
    fields: dict[str, Any], field: str, uri: str, path: str
) -> None:
    for api in ("v1", "trainer-v2"):
        with pytest.raises(CloudDDPError) as refused:
            render(kubernetes={"kubeflow_api": api}, **fields)
        assert str(refused.value) == (
            f"{field}={uri!r}: the path inside the claim, {path!r}, has a '..' element; it is mounted as the "
            f"volume's subPath, which Kubernetes takes only below the claim's root (no '..', not absolute). Write "
            f"pvc://{uri.removeprefix('pvc://').partition('/')[0]}/PATH with PATH a folder of the claim."
        )


@pytest.mark.process
def test_a_dot_dot_claim_path_from_the_cli_is_exit_2() -> None:
    result = render_cli("-i", "train=pvc://datasets/../etc")
    assert result.returncode == 2 and "inputs.train='pvc://datasets/../etc': the path inside the claim" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


@pytest.mark.parametrize("api", ["v1", "trainer-v2"])
def test_only_a_dot_dot_element_is_refused_other_dots_are_mounted_as_written(api: str) -> None:
    with pytest.raises(CloudDDPError, match=r"the path inside the claim, 'a/\.\./b', has a '\.\.' element"):
        render(inputs={"train": "pvc://datasets/a/../b"}, kubernetes={"kubeflow_api": api})
    manifest = render(inputs={"train": "pvc://datasets/a..b/./..c"}, kubernetes={"kubeflow_api": api})
    assert fake_refusals(manifest) == []
    replica = manifest["spec"].get("pytorchReplicaSpecs", {}).get("Master", {}).get("template", {}).get("spec")
    pod = replica or manifest["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"][0]["template"]["spec"]["template"]["spec"]  # fmt: skip
    assert pod["containers"][0]["volumeMounts"][0]["subPath"] == "a..b/./..c"


LABEL_NAME = "is not 1-63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit"
LABEL_VALUE = "the value is not a Kubernetes label value: it is not empty or " + LABEL_NAME.removeprefix("is not ")


@pytest.mark.process
@pytest.mark.parametrize(
    ("pair", "message"),
    [("bad key=x", f"node selector key 'bad key' is not a Kubernetes label key: its name 'bad key' {LABEL_NAME}"),
     ("gpu-=x", f"node selector key 'gpu-' is not a Kubernetes label key: its name 'gpu-' {LABEL_NAME}"),
     (f"{'k' * 64}=x", f"node selector key '{'k' * 64}' is not a Kubernetes label key: its name '{'k' * 64}' "
      f"{LABEL_NAME}"),
     ("Example.com/gpu=x", "node selector key 'Example.com/gpu' is not a Kubernetes label key: its prefix "
      "'Example.com' is not a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253)"),
     ("/gpu=x", "node selector key '/gpu' is not a Kubernetes label key: its prefix '' is not a DNS subdomain"),
     ("a/b/c=x", "node selector key 'a/b/c' is not a Kubernetes label key: it has more than one '/'"),
     ("gpu=a b", f"node selector gpu='a b': {LABEL_VALUE}"),
     ("gpu=-a", f"node selector gpu='-a': {LABEL_VALUE}"),
     ("gpu=a=b", f"node selector gpu='a=b': {LABEL_VALUE}"),
     (f"gpu={'v' * 64}", f"node selector gpu='{'v' * 64}': {LABEL_VALUE}")],
)  # fmt: skip
def test_a_node_selector_kubernetes_refuses_is_exit_2_naming_it(pair: str, message: str) -> None:
    result = render_cli("--node-selector", "pool=gpu", "--node-selector", pair)
    assert result.returncode == 2 and f"kubernetes.node_selector: Value error, {message}" in result.stderr, (
        result.stderr
    )
    assert result.stdout == "" and "Traceback" not in result.stderr


GOOD_SELECTOR = {"kubernetes.io/hostname": "node-1", "node.kubernetes.io/instance-type": "p4d.24xlarge",
                 "gpu": "", "A_b.c": "X_y.Z", "pool": "v" * 63, f"{'p' * 253}/{'k' * 63}": "1"}  # fmt: skip


@pytest.mark.parametrize("api", ["v1", "trainer-v2"])
def test_node_selectors_kubernetes_takes_reach_the_pods_and_no_others(api: str) -> None:
    with pytest.raises(CloudDDPError, match=r"kubernetes.node_selector: Value error, node selector gpu='a b'"):
        render(kubernetes={"kubeflow_api": api, "node_selector": {**GOOD_SELECTOR, "gpu": "a b"}})
    manifest = render(kubernetes={"kubeflow_api": api, "node_selector": GOOD_SELECTOR})
    assert fake_refusals(manifest) == []
    spec = manifest["spec"]
    pod = spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"] if api == "v1" else spec["runtimePatches"][0][
        "trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]  # fmt: skip
    assert pod["nodeSelector"] == GOOD_SELECTOR
