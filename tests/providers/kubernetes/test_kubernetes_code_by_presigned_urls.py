"""`kubernetes.code`: a stock image fetches the job's code and s3:// inputs by presigned URL, then trains.

The PyTorchJob is rendered, and what submit does before creating it is done for real against SeaweedFS (127.0.0.1,
checking signatures): the source packed with the launcher and staged under `code`, every object presigned, the plan
kept in the Secret body (presigned.publish). Each pod's init container then runs exactly as rendered, its command
and env, its Secret volume a folder holding the Secret's data as kubelet mounts it, under a Python made with
`python -m venv` and nothing installed: no cloudddp, no boto3, no AWS variable. Its training container then runs
the bundled launcher from the unpacked code with a Python that has torch but no cloudddp, and both pods all-reduce
over gloo what each read.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import PYTHON
from helpers.kubernetes_apiserver import FakeAPIServer, crd_validator
from helpers.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3
from test_kubernetes_s3_inputs import (  # the same data, bucket and training stand-in as the boto3 pull's test
    DATA,
    POD_SCRIPTS,
    assert_each_node_trained_on_its_own_copy,
    files_under,
    kubelet_env,
    pods_of,
    seaweed,  # noqa: F401 - the module's SeaweedFS, with s3://datasets/demo/ filled
)

from cloudddp.cluster.environment import EmulatedCluster
from cloudddp.cluster.kubeflow import emulate
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.launcher import presigned_pull
from cloudddp.providers.kubernetes.presigned import MASKED, PLAN_KEY, publish
from cloudddp.providers.kubernetes.provider import KubernetesProvider
from cloudddp.providers.local.provider import free_port
from cloudddp.staging.archive import job_side_files

IMAGE_ENV = {"PATH": "/usr/bin:/bin"}  # as a container starts: none of this machine's PYTHONPATH or AWS variables


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stock image's Python: the standard library and nothing else (a venv without site packages or pip)."""
    folder = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    probe = subprocess.run([python, "-c", "import boto3"], capture_output=True, cwd=folder, env=IMAGE_ENV)
    assert probe.returncode != 0 and b"No module named 'boto3'" in probe.stderr
    probe = subprocess.run([python, "-c", "import cloudddp"], capture_output=True, cwd=folder, env=IMAGE_ENV)
    assert probe.returncode != 0 and b"No module named 'cloudddp'" in probe.stderr
    return python


@pytest.fixture
def user_keys(monkeypatch: pytest.MonkeyPatch, seaweed: SeaweedS3) -> SeaweedS3:  # noqa: F811
    """The user's own credentials, on the submitting machine only."""
    for name, value in {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    client = seaweed.client()
    if "code" not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket="code")
    return seaweed


def render(endpoint: str, out_dir: Path, **kubernetes: Any) -> Any:
    spec = build_spec({
        "name": "resnet", "entry_point": "channel_digest.py", "source_dir": str(POD_SCRIPTS), "nodes": 2,
        "nproc_per_node": 1, "args": ["--out-dir", str(out_dir)],
        "inputs": {"train": "s3://datasets/demo/train", "single": "s3://datasets/demo/single.bin"},
        "kubernetes": {"image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "namespace": "team-a",
                       "s3_endpoint": endpoint, "code": "s3://code/team/resnet", **kubernetes},
    })  # fmt: skip
    return KubernetesProvider().render(spec)


def pod_paths(pod: dict[str, Any], container: dict[str, Any], pod_dir: Path, words: list[str]) -> list[str]:
    """Paths as the pod sees them: each of the container's volumes (emptyDir or Secret) is pod_dir/<volume>."""
    for mount in sorted(container.get("volumeMounts", []), key=lambda m: -len(m["mountPath"])):
        words = [word.replace(mount["mountPath"], str(pod_dir / mount["name"])) for word in words]
    return words


def mount_secret(pod: dict[str, Any], pod_dir: Path, secret: dict[str, Any]) -> None:
    """The Secret volume as kubelet mounts it: one file per key."""
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    folder = pod_dir / volume["name"]
    folder.mkdir(parents=True)
    for key, value in secret["stringData"].items():
        (folder / key).write_text(value)


def run_init(pod: dict[str, Any], pod_dir: Path, python: Path) -> subprocess.CompletedProcess[str]:
    (init,) = pod["initContainers"]
    assert "env" not in init  # nothing of S3 reaches the pod but the URLs in the Secret
    assert init["command"][0] == "python"
    env = {"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": str(pod_dir / "home")}
    return subprocess.run(pod_paths(pod, init, pod_dir, init["command"]), env=env, cwd=pod_dir, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.mark.process  # a bare venv's Python runs the init container
def test_a_stock_python_fetches_the_code_and_inputs_byte_for_byte(user_keys: SeaweedS3, bare_python: Path,
                                                                  tmp_path: Path) -> None:  # fmt: skip
    request = render(user_keys.url, tmp_path / "out")
    body = request.request.body
    crd_validator("pytorchjobs").validate(body)
    said: list[str] = []
    secret = publish(request.request.pull, said.append)
    plan = json.loads(secret["stringData"][PLAN_KEY])
    urls = [plan["code"]["url"], *(f["url"] for c in plan["inputs"].values() for f in c["files"])]
    assert len(urls) == 1 + len(DATA) + 1 and all("X-Amz-Signature=" in url for url in urls)
    printed = request.to_yaml() + yaml.safe_dump(body) + "\n".join(said)
    assert not any(url in printed or url.split("?")[1] in printed for url in urls)  # never shown, never in the job
    assert MASKED in request.to_yaml() and SECRET_KEY not in printed
    shown = json.loads(request.request.pull.masked()["stringData"][PLAN_KEY])  # the dry run's Secret: the same shape
    assert shown.keys() == plan.keys() and shown["code"].keys() == plan["code"].keys()
    assert shown["inputs"]["train"]["files"][0].keys() == plan["inputs"]["train"]["files"][0].keys()
    for index, pod in enumerate(pods_of(body)):
        pod_dir = tmp_path / f"pod-{index}"
        mount_secret(pod, pod_dir, secret)
        pulled = run_init(pod, pod_dir, bare_python)
        assert pulled.returncode == 0, pulled.stderr
        assert files_under(pod_dir / "cloudddp-data" / "train") == DATA
        assert files_under(pod_dir / "cloudddp-data" / "single") == {"single.bin": b"one object"}
        code = files_under(pod_dir / "cloudddp-code")
        assert code["channel_digest.py"] == (POD_SCRIPTS / "channel_digest.py").read_bytes()
        for path, name in job_side_files():  # the bundled launcher, byte for byte
            assert code[name] == path.read_bytes(), name


@pytest.mark.slow
def test_both_pods_train_on_what_they_fetched_with_the_bundled_launcher(user_keys: SeaweedS3, bare_python: Path,
                                                                        tmp_path: Path) -> None:  # fmt: skip
    request = render(user_keys.url, tmp_path / "out")
    secret = publish(request.request.pull, lambda line: None)
    pods = pods_of(request.request.body)
    torch_python = python_with_torch_without_cloudddp(tmp_path / "image-venv")
    operator = emulate(EmulatedCluster(nodes=2, job_name="resnet", run_dir=tmp_path / "emulated", nproc_per_node=1))
    port = str(free_port())
    running = []
    for index, (pod, node) in enumerate(zip(pods, operator, strict=True)):
        pod_dir = tmp_path / f"pod-{index}"
        mount_secret(pod, pod_dir, secret)
        assert run_init(pod, pod_dir, bare_python).returncode == 0
        (container,) = pod["containers"]
        assert container["command"][:3] == ["python", "-m", "cloudddp.launcher"]
        env = {"PATH": f"{torch_python.parent}:/usr/bin:/bin", "HOME": str(pod_dir / "home"), "PYTHONUNBUFFERED": "1",
               **kubelet_env(container, {}), **node.env, "MASTER_PORT": port, "PET_MASTER_PORT": port,
               "CLOUDDDP_HOST_MAP": "resnet-master-0=127.0.0.1"}  # fmt: skip
        env = {key: pod_paths(pod, container, pod_dir, [value])[0] for key, value in env.items()}
        words = pod_paths(pod, container, pod_dir, container["command"] + container["args"])
        running.append(subprocess.Popen(words, cwd=pod_paths(pod, container, pod_dir, [container["workingDir"]])[0],
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))  # fmt: skip
    for process in running:
        output = process.communicate(timeout=240)[0]
        assert process.returncode == 0, output[-3000:]
    assert_each_node_trained_on_its_own_copy(tmp_path)  # and no S3 variable reached training


def python_with_torch_without_cloudddp(folder: Path) -> Path:
    """An image's Python with torch installed but not cloudddp: a bare venv that reads this one's site packages as
    a plain path (`.pth` line), so their own `.pth` files, cloudddp's editable install among them, are not run."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    site = subprocess.run([PYTHON, "-c", "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (own,) = folder.glob("lib/python*/site-packages")
    (own / "image.pth").write_text(site + "\n")
    python = folder / "bin" / "python"
    probe = subprocess.run([python, "-c", "import cloudddp"], capture_output=True, cwd=folder, env=IMAGE_ENV)
    assert b"No module named 'cloudddp'" in probe.stderr
    return python


@pytest.mark.process
def test_an_expired_url_fails_the_pod_with_one_line(
    user_keys: SeaweedS3, bare_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = render(user_keys.url, tmp_path / "out", url_lifetime=1)
    secret = publish(request.request.pull, lambda line: None)
    time.sleep(2.1)  # X-Amz-Date has whole seconds
    pod = pods_of(request.request.body)[0]
    mount_secret(pod, tmp_path, secret)
    pulled = run_init(pod, tmp_path, bare_python)
    assert pulled.returncode == 2
    (line,) = pulled.stderr.splitlines()
    assert line.startswith("cloudddp pull: error: the presigned URL for s3://code/team/resnet/v-") and (
        "expired at" in line and "kubernetes.url_lifetime" in line
    ), line
    assert not (tmp_path / "cloudddp-code" / "channel_digest.py").exists()
    # A pod whose clock is behind the submitter's sends the request: the server's refusal is one line too.
    monkeypatch.setattr(presigned_pull, "check_fresh", lambda uri, url: None)
    code = json.loads(secret["stringData"][PLAN_KEY])["code"]
    with pytest.raises(presigned_pull.PullError) as refused:
        presigned_pull.download(code["uri"], code["url"], code["size"], str(tmp_path / "archive"))
    assert "was refused: HTTP 403" in str(refused.value) and "kubernetes.url_lifetime" in str(refused.value)


def test_a_url_lifetime_beyond_s3s_seven_days_is_refused() -> None:
    with pytest.raises(CloudDDPError) as refused:
        build_spec({"entry_point": "channel_digest.py", "source_dir": str(POD_SCRIPTS),
                    "kubernetes": {"code": "s3://code/p", "url_lifetime": 604801}})  # fmt: skip
    message = str(refused.value)
    assert "kubernetes.url_lifetime=604801" in message and "604800" in message and "\n" not in message.strip()


def test_code_needs_a_pytorchjob_and_no_launcher_of_its_own() -> None:
    for extra, says in (({"kubeflow_api": "trainer-v2"}, "needs kubeflow_api v1"),
                        ({"launcher": ["cloudddp-launch"]}, "kubernetes.launcher both given"),
                        ({"s3_secret": "keys"}, "kubernetes.s3_secret both given")):  # fmt: skip
        with pytest.raises(CloudDDPError, match=says):
            render("http://127.0.0.1:9", Path("/tmp/out"), **extra)


def test_an_elastic_job_with_code_validates_and_every_worker_fetches() -> None:
    spec = build_spec({
        "name": "resnet", "entry_point": "channel_digest.py", "source_dir": str(POD_SCRIPTS), "nodes": 3,
        "min_nodes": 2, "inputs": {"train": "s3://datasets/demo/train"},
        "kubernetes": {"image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "namespace": "team-a",
                       "code": "s3://code/team/resnet"},
    })  # fmt: skip
    body = KubernetesProvider().render(spec).request.body
    crd_validator("pytorchjobs").validate(body)
    pod = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["pull-inputs"] and "Master" not in body["spec"]


def test_without_code_the_pods_run_the_image_as_before() -> None:
    spec = build_spec({"entry_point": "channel_digest.py", "source_dir": str(POD_SCRIPTS),
                       "kubernetes": {"image": "registry.example.com/train:1"}})  # fmt: skip
    body = KubernetesProvider().render(spec).request.body
    (container,) = body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert container["command"] == ["cloudddp-launch", "/workspace/channel_digest.py"]


def code_job(kubeconfig: Path, endpoint: str) -> Any:
    spec = build_spec({
        "name": "resnet", "entry_point": "channel_digest.py", "source_dir": str(POD_SCRIPTS), "nodes": 2,
        "inputs": {"train": "s3://datasets/demo/train"},
        "kubernetes": {"image": "python:3.12-slim", "kubeconfig": str(kubeconfig), "s3_endpoint": endpoint,
                       "code": "s3://code/team/resnet"},
    })  # fmt: skip
    return KubernetesProvider().render(spec)


def test_submit_keeps_the_urls_in_a_secret_the_job_owns(
    kube_api: tuple[FakeAPIServer, Path], user_keys: SeaweedS3, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, kubeconfig = kube_api
    request = code_job(kubeconfig, user_keys.url)
    assert KubernetesProvider().submit(request).job_id == "pytorchjobs/training/resnet"
    secret = fake.secrets[("training", "resnet-cloudddp-pull")]
    job = fake.objects[("pytorchjobs", "training", "resnet")]
    plan = json.loads(secret["stringData"][PLAN_KEY])
    assert len(plan["inputs"]["train"]["files"]) == len(DATA) and "X-Amz-Signature=" in plan["code"]["url"]
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "resnet", "uid": job["metadata"]["uid"]}
    ]  # deleting the job deletes its URLs
    creates = [path for verb, path in fake.requests if verb == "POST"]
    assert creates == ["/api/v1/namespaces/training/secrets", "/apis/kubeflow.org/v1/namespaces/training/pytorchjobs"]
    (volume,) = [
        v for v in job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"] if "secret" in v
    ]
    assert volume["secret"]["secretName"] == "resnet-cloudddp-pull"
    said = capsys.readouterr()
    assert "X-Amz-Signature" not in json.dumps(job) + said.out + said.err
    assert (
        "cloudddp: presigned 4 GET URL(s), valid 86400 s, kept in the Secret training/resnet-cloudddp-pull" in said.out
    )


def test_a_refused_job_leaves_no_secret_behind(kube_api: tuple[FakeAPIServer, Path], user_keys: SeaweedS3) -> None:
    fake, kubeconfig = kube_api
    fake.objects[("pytorchjobs", "training", "resnet")] = {"metadata": {"name": "resnet"}}  # the name is taken
    with pytest.raises(CloudDDPError, match="already exists"):
        KubernetesProvider().submit(code_job(kubeconfig, user_keys.url))
    assert fake.secrets == {}
    assert ("DELETE", "/api/v1/namespaces/training/secrets/resnet-cloudddp-pull") in fake.requests
