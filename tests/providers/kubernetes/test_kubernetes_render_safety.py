"""What the pod gets is what the user wrote, and nothing secret is in the manifest: $(VAR) and $$ escaped against
the kubelet's expansion, URL passwords refused, variable names checked, a broken kubeconfig named.

`kubelet_expand` is Kubernetes' own expansion of container command, args and env values, ported line for line
from kubernetes/kubernetes third_party/forked/golang/expansion/expand.go (commit
fde22c3f9aacfd260225a9741de123a41157b7c0): `$$` is `$`, `$(NAME)` a variable (left as written when unknown),
any other `$` stays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SOURCES, run_cli
from helpers.kubernetes_apiserver import crd_validator, trainjob_webhook_errors

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider
from cloudddp.providers.kubernetes.settings import KubernetesSettings

IMAGE = "registry.example.com/train:1"
TRICKY = ["$(FOO)", "a$$b", "$$(X)", "$", "cost: $5", "$(unclosed", "$$$"]


def kubelet_expand(text: str, variables: dict[str, str]) -> str:
    out, checkpoint, cursor = "", 0, 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out += text[checkpoint:cursor]
            rest = text[cursor + 1 :]
            if rest[0] == "$":
                read, advance = "$", 1
            elif rest[0] == "(" and ")" in rest:
                name = rest[1 : rest.index(")")]
                read, advance = variables.get(name, f"$({name})"), len(name) + 2
            elif rest[0] == "(":
                read, advance = "$(", 1
            else:
                read, advance = "$" + rest[0], 1
            out += read
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return out + text[checkpoint:]


def as_the_pod_gets_it(container: dict[str, Any]) -> dict[str, Any]:
    """The container's command, args and env after the kubelet's expansion (env in order, as it does)."""
    seen: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            seen[item["name"]] = kubelet_expand(item["value"], seen)
    words = {key: [kubelet_expand(w, seen) for w in container.get(key, [])] for key in ("command", "args")}
    return {**words, "env": seen}


def test_the_port_expands_as_kubernetes_documents() -> None:
    # expand_test.go's cases at the same commit.
    assert kubelet_expand("$(VAR_A)", {"VAR_A": "A"}) == "A"
    assert kubelet_expand("$$(VAR_A)", {"VAR_A": "A"}) == "$(VAR_A)"
    assert kubelet_expand("$$$$$$(VAR_A)", {"VAR_A": "A"}) == "$$$(VAR_A)"
    assert kubelet_expand("$(VAR_A", {}) == "$(VAR_A" and kubelet_expand("f$", {}) == "f$"


def render_cli(tmp_path: Path, *flags: str, args: tuple[str, ...] = ()) -> Any:
    return run_cli("render", "-p", "kubernetes", "--image", IMAGE, *flags, str(SOURCES / "train_ddp.py"), "--", *args,
                   env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip


@pytest.mark.process
def test_a_pytorchjob_hands_the_pod_exactly_what_was_written(tmp_path: Path) -> None:
    result = render_cli(tmp_path, "-e", "FOO=$(BAR)", "-e", "BAR=b", "-H", "price=$$9", args=tuple(TRICKY))
    assert result.returncode == 0, result.stderr
    manifest = yaml.safe_load(result.stdout)
    crd_validator("pytorchjobs").validate(manifest)
    pod = as_the_pod_gets_it(manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0])
    assert pod["args"] == [*TRICKY, "--price", "$$9"]
    assert (pod["env"]["FOO"], pod["env"]["BAR"]) == ("$(BAR)", "b")


@pytest.mark.process
def test_a_trainjob_and_its_s3_pull_hand_over_exactly_what_was_written(tmp_path: Path) -> None:
    result = render_cli(tmp_path, "--kubeflow-api", "trainer-v2", "-e", "FOO=$(BAR)", "-i", "train=s3://bkt/a$$b",
                        "--s3-endpoint", "http://minio:9000/$(x)", args=("$(FOO)",))  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = yaml.safe_load(result.stdout)
    crd_validator("trainjobs").validate(manifest)
    assert trainjob_webhook_errors(manifest) == []
    pod = as_the_pod_gets_it(manifest["spec"]["trainer"])
    assert pod["args"] == ["$(FOO)"] and pod["env"]["FOO"] == "$(BAR)"
    assert pod["env"]["CLOUDDDP_PULL_AWS_ENDPOINT_URL"] == "http://minio:9000/$(x)"
    assert "'train=s3://bkt/a$$b'" in pod["command"][2]  # sh -c's script: the pull's channel, as written


@pytest.mark.process
def test_a_pytorchjobs_s3_pull_container_gets_the_prefix_as_written(tmp_path: Path) -> None:
    # The pull container has AWS_ENDPOINT_URL: unescaped, the kubelet would put its value in the prefix.
    result = render_cli(tmp_path, "-i", "train=s3://bkt/$(AWS_ENDPOINT_URL)", "--s3-endpoint", "http://minio:9000")
    assert result.returncode == 0, result.stderr
    pull = yaml.safe_load(result.stdout)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["initContainers"]
    assert as_the_pod_gets_it(pull[0])["command"][-1] == "train=s3://bkt/$(AWS_ENDPOINT_URL)"


@pytest.mark.process
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["-e", "A B=1"], "environment variable name 'A B' is not a valid shell variable name."),
        (["-e", "1BAD=1"], "environment variable name '1BAD' is not a valid shell variable name."),
    ],
)
def test_variable_names_a_shell_cannot_read_are_refused(tmp_path: Path, flags: list[str], message: str) -> None:
    result = render_cli(tmp_path, *flags)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_secret_env_name_a_shell_cannot_read_is_refused() -> None:
    spec = build_spec({"entry_point": "train_ddp.py", "source_dir": str(SOURCES),
                       "kubernetes": {"image": IMAGE, "namespace": "a", "secret_env": {"A-B": "s/k"}}})  # fmt: skip
    with pytest.raises(CloudDDPError, match="environment variable name 'A-B' is not a valid shell variable name"):
        KubernetesProvider().render(spec)


@pytest.mark.process
@pytest.mark.parametrize(
    ("flags", "args", "message"),
    [
        (["-e", "URL=https://user:pw@host/x"], (), "environment.URL='https://user:***@host/x' holds a password in a URL"),
        (["-H", "db=postgres://u:pw@db/x"], (), "hyperparameters.db='postgres://u:***@db/x' holds a password"),
        ([], ("https://pw@github.com/x",), "args[0]='https://***@github.com/x' holds a password"),
        (["--s3-endpoint", "http://minio:pw@minio:9000", "-i", "train=s3://bkt/d"], (),
         "kubernetes.s3_endpoint: Value error, 'http://minio:***@minio:9000' holds credentials"),
    ],
)  # fmt: skip
def test_a_password_in_a_url_is_refused_and_never_printed(
    tmp_path: Path, flags: list[str], args: tuple[str, ...], message: str
) -> None:
    result = render_cli(tmp_path, *flags, args=args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "pw@" not in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_a_password_in_any_other_field_is_refused_by_its_place_in_the_manifest() -> None:
    spec = build_spec({"entry_point": "train_ddp.py", "source_dir": str(SOURCES),
                       "kubernetes": {"image": IMAGE, "namespace": "a",
                                      "launcher": ["cloudddp-launch", "--x=https://u:pw@h/"]}})  # fmt: skip
    with pytest.raises(CloudDDPError) as caught:
        KubernetesProvider().render(spec)
    assert "containers[0].command[1] would hold a password in a URL" in str(caught.value)
    assert "pw@" not in str(caught.value)


@pytest.mark.process
@pytest.mark.parametrize("content", ["garbage: [", "[1]", "just a string"])
def test_a_broken_kubeconfig_is_named_not_a_traceback(tmp_path: Path, content: str) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(content)
    result = run_cli("render", "-p", "kubernetes", "--image", IMAGE, str(SOURCES / "train_ddp.py"),
                     env={"KUBECONFIG": str(kubeconfig)})  # fmt: skip
    assert result.returncode == 2 and f"the kubeconfig '{kubeconfig}' is not a valid kubeconfig" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    with pytest.raises(CloudDDPError, match="is not a valid kubeconfig"):  # status, logs, cancel, launch
        KubernetesProvider(KubernetesSettings(kubeconfig=str(kubeconfig))).api()
