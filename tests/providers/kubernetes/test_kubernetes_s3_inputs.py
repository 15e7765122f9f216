"""s3:// inputs on Kubernetes, pulled for real.

A rendered PyTorchJob's init container (`pull-inputs`, the job's image running
`python -m cloudddp.launcher.pull_inputs`) is run here exactly as the manifest says: its command, and
its env as kubelet builds it (values as written, `secretKeyRef`s looked up in a Secret), against a real
S3 server (SeaweedFS on 127.0.0.1, checking signatures: tests/helpers/seaweedfs.py). The emptyDir the
pod mounts at /cloudddp/data is a folder per pod here. Then both pods' training containers run under
the operator's variables (the local provider's Kubeflow emulation) and all-reduce over gloo what each
read from its own copy.

A Trainer v2 TrainJob's `node` container runs the same pull in its own command instead (the runtime
has no init container to amend); it is run here the same way, under the torch runtime's PET_* variables.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from helpers import PYTHON
from helpers.endpoints import refused_endpoint
from helpers.kubernetes_apiserver import crd_validator, trainjob_webhook_errors
from helpers.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3, seaweed_for_tests

from cloudddp.cluster.environment import EmulatedCluster
from cloudddp.cluster.kubeflow import emulate
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.launcher.pull_inputs import Channel, relative_path
from cloudddp.providers.kubernetes.provider import KubernetesProvider
from cloudddp.providers.local.provider import free_port

POD_SCRIPTS = Path(__file__).parent / "pod_scripts"  # stands for the code at /workspace in the image
WORKDIR = "/workspace"
SECRET = "minio-creds"
SECRETS = {SECRET: {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}}
DATA = {  # under s3://datasets/demo/train/
    "part-0.csv": b"1,2\n3,4\n",
    "images/cat/0001.png": bytes(range(256)) * 40,
    "images/dog/0001.png": os.urandom(70_000),
}


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    with seaweed_for_tests(tmp_path_factory.mktemp("seaweedfs")) as server:
        s3 = server.client()
        s3.create_bucket(Bucket="datasets")
        for name, body in DATA.items():
            s3.put_object(Bucket="datasets", Key=f"demo/train/{name}", Body=body)
        s3.put_object(Bucket="datasets", Key="demo/train/empty-folder/", Body=b"")  # a console's folder marker
        s3.put_object(Bucket="datasets", Key="demo/train-old/stale.csv", Body=b"not this")  # shares the prefix's text
        s3.put_object(Bucket="datasets", Key="demo/single.bin", Body=b"one object")
        yield server


def manifest(endpoint: str | None, inputs: dict[str, str], out_dir: Path, **kubernetes: Any) -> dict[str, Any]:
    """The PyTorchJob for these inputs: keys from the Secret SECRET unless `kubernetes` says otherwise."""
    s3 = {"s3_endpoint": endpoint, "s3_secret": SECRET} if endpoint else {}
    spec = build_spec({
        "name": "resnet", "entry_point": "channel_digest.py", "source_dir": str(POD_SCRIPTS), "nodes": 2,
        "nproc_per_node": 1, "args": ["--out-dir", str(out_dir)], "inputs": inputs,
        "kubernetes": {"image": "registry.example.com/train:1", "namespace": "team-a", **s3, **kubernetes},
    })  # fmt: skip
    return KubernetesProvider().render(spec).request.body  # type: ignore[no-any-return]


def pods_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    replicas = body["spec"]["pytorchReplicaSpecs"]
    return [replicas["Master"]["template"]["spec"], replicas["Worker"]["template"]["spec"]]


def kubelet_env(container: dict[str, Any], secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The container's variables as kubelet sets them. A secretKeyRef to a missing Secret or key keeps
    the container from starting (CreateContainerConfigError), so it is an error here too."""
    env = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
            continue
        ref = item["valueFrom"]["secretKeyRef"]
        if ref["key"] not in secrets.get(ref["name"], {}):
            raise LookupError(f"CreateContainerConfigError: couldn't find key {ref['key']} in Secret {ref['name']}")
        env[item["name"]] = secrets[ref["name"]][ref["key"]]
    return env


def in_pod(container: dict[str, Any], pod: dict[str, Any], pod_dir: Path, words: list[str]) -> list[str]:
    """Paths as this pod sees them: its emptyDir mount is pod_dir/<volume>, /workspace the scripts."""
    empty_dirs = {volume["name"] for volume in pod.get("volumes", []) if "emptyDir" in volume}
    mounts = {m["mountPath"]: str(pod_dir / m["name"]) for m in container.get("volumeMounts", [])
              if m["name"] in empty_dirs}  # fmt: skip
    for mount_path, here in mounts.items():
        words = [word.replace(mount_path, here) for word in words]
    return [word.replace(WORKDIR, str(POD_SCRIPTS)) for word in words]


def image_env(pod_dir: Path) -> dict[str, str]:
    """What the image itself provides: python and cloudddp-launch on PATH, nothing of this machine's AWS setup."""
    return {"PATH": f"{Path(PYTHON).parent}:/usr/bin:/bin", "HOME": str(pod_dir / "home"), "PYTHONUNBUFFERED": "1"}


def run_pull(pod: dict[str, Any], pod_dir: Path, secrets: dict[str, dict[str, str]] = SECRETS,
             injected: dict[str, str] | None = None) -> Any:  # fmt: skip
    """Run the pod's init container; `injected`: variables a mutating webhook adds (EKS's identity)."""
    (init,) = pod["initContainers"]
    env = {**image_env(pod_dir), **kubelet_env(init, secrets), **(injected or {})}
    for key, value in list(env.items()):
        env[key] = in_pod(init, pod, pod_dir, [value])[0]
    started = os.times().elapsed
    result = subprocess.run(in_pod(init, pod, pod_dir, init["command"]), env=env, cwd=pod_dir,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    result.elapsed = os.times().elapsed - started  # type: ignore[attr-defined]
    return result


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_every_pod_pulls_the_inputs_then_both_train_on_them(seaweed: SeaweedS3, tmp_path: Path) -> None:
    body = manifest(seaweed.url, {"train": "s3://datasets/demo/train"}, tmp_path / "out")
    crd_validator("pytorchjobs").validate(body)
    assert SECRET_KEY not in yaml.safe_dump(body)  # the manifest holds the Secret's name, never its keys
    pods = pods_of(body)
    for index, pod in enumerate(pods):
        pod_dir = tmp_path / f"pod-{index}"
        pod_dir.mkdir()
        pulled = run_pull(pod, pod_dir)
        assert pulled.returncode == 0, pulled.stderr
        assert files_under(pod_dir / "cloudddp-data" / "train") == DATA  # no marker, no sibling prefix's file
        assert SECRET_KEY not in pulled.stdout + pulled.stderr

    operator = emulate(EmulatedCluster(nodes=2, job_name="resnet", run_dir=tmp_path / "emulated", nproc_per_node=1))
    port = str(free_port())  # the operator's 23456, moved so parallel test runs don't collide
    running = []
    for index, (pod, node) in enumerate(zip(pods, operator, strict=True)):
        (container,) = pod["containers"]
        pod_dir = tmp_path / f"pod-{index}"
        env = {**image_env(pod_dir), **kubelet_env(container, SECRETS), **node.env, "MASTER_PORT": port,
               "PET_MASTER_PORT": port, "CLOUDDDP_HOST_MAP": "resnet-master-0=127.0.0.1"}  # fmt: skip
        assert not any(name.startswith("AWS_") for name in env)  # the keys reach the init container only
        env = {key: in_pod(container, pod, pod_dir, [value])[0] for key, value in env.items()}
        running.append(subprocess.Popen(in_pod(container, pod, pod_dir, container["command"] + container["args"]),
                                        cwd=POD_SCRIPTS, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True))  # fmt: skip
    for process in running:
        output = process.communicate(timeout=240)[0]
        assert process.returncode == 0, output[-3000:]

    assert_each_node_trained_on_its_own_copy(tmp_path)


def assert_each_node_trained_on_its_own_copy(tmp_path: Path) -> None:
    expected = hashlib.sha256()
    for name in sorted(DATA):
        expected.update(name.encode() + b"\0" + DATA[name])
    ranks = [json.loads((tmp_path / "out" / f"rank{r}.json").read_text()) for r in range(2)]
    size = sum(len(body) for body in DATA.values())
    for index, rank in enumerate(ranks):
        assert rank["channel"] == str(tmp_path / f"pod-{index}" / "cloudddp-data" / "train")  # its own copy
        assert (rank["world_size"], rank["sha256"], rank["all_reduced_bytes"]) == (2, expected.hexdigest(), 2 * size)
        assert rank["pull_variables"] == []  # no S3 endpoint or key reached training


def node_of(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A TrainJob's `node` container as the runtime patch leaves it (trainer + the patch's mounts), and its pod."""
    (patch,) = body["spec"]["runtimePatches"]
    (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = job["template"]["spec"]["template"]["spec"]
    (patched,) = pod["containers"]
    return {**body["spec"]["trainer"], "volumeMounts": patched["volumeMounts"]}, pod


def start_node(body: dict[str, Any], index: int, port: str, pod_dir: Path,
               secrets: dict[str, dict[str, str]] = SECRETS) -> subprocess.Popen[str]:  # fmt: skip
    """Node `index` of the TrainJob, its command run as written under the variables Trainer v2.3.0's torch
    plugin sets (pkg/runtime/framework/plugins/torch/torch.go at 658725bd: PET_*, the master
    <job>-node-0-0.<job>) and the ones kubelet builds from trainer.env."""
    container, pod = node_of(body)
    master = "resnet-node-0-0.resnet"
    pod_dir.mkdir(exist_ok=True)  # a container restarted in place finds its pod's emptyDir as it left it
    env = {**image_env(pod_dir), **kubelet_env(container, secrets), "PET_NNODES": str(container["numNodes"]),
           "PET_NPROC_PER_NODE": str(container["numProcPerNode"]), "PET_NODE_RANK": str(index),
           "PET_MASTER_ADDR": master, "PET_MASTER_PORT": port, "CLOUDDDP_HOST_MAP": f"{master}=127.0.0.1"}  # fmt: skip
    env = {key: in_pod(container, pod, pod_dir, [value])[0] for key, value in env.items()}
    return subprocess.Popen(in_pod(container, pod, pod_dir, container["command"] + container["args"]), cwd=pod_dir,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.slow
def test_trainjob_nodes_pull_then_train_without_the_pulls_variables(seaweed: SeaweedS3, tmp_path: Path) -> None:
    body = manifest(seaweed.url, {"train": "s3://datasets/demo/train"}, tmp_path / "out", kubeflow_api="trainer-v2")
    crd_validator("trainjobs").validate(body)
    assert trainjob_webhook_errors(body) == []
    assert SECRET_KEY not in yaml.safe_dump(body)
    port = str(free_port())
    nodes = [start_node(body, index, port, tmp_path / f"pod-{index}") for index in range(2)]
    for node in nodes:
        out, err = node.communicate(timeout=240)
        assert node.returncode == 0, (out + err)[-3000:]
        assert SECRET_KEY not in out + err
    for index in range(2):
        assert files_under(tmp_path / f"pod-{index}" / "cloudddp-data" / "train") == DATA
    assert_each_node_trained_on_its_own_copy(tmp_path)

    # Both `node` containers restarted in place (same pods, same emptyDirs). S3 is out of reach now, so a
    # node that called it would fail after its attempts: each keeps what it pulled and trains again.
    with refused_endpoint() as refused:
        again = manifest(refused, {"train": "s3://datasets/demo/train"}, tmp_path / "out", kubeflow_api="trainer-v2")
        shutil.rmtree(tmp_path / "out")
        port = str(free_port())
        nodes = [start_node(again, index, port, tmp_path / f"pod-{index}") for index in range(2)]
        size = sum(len(body) for body in DATA.values())
        for node in nodes:
            out, err = node.communicate(timeout=240)
            assert node.returncode == 0, (out + err)[-3000:]
            assert "cloudddp: kept s3://datasets/demo/train -> " in out and f": 3 file(s), {size} bytes" in out, out
    assert_each_node_trained_on_its_own_copy(tmp_path)


@pytest.mark.slow
def test_a_restarted_pull_keeps_a_complete_copy_and_pulls_again_what_is_not(seaweed: SeaweedS3, tmp_path: Path) -> None:
    pod = pods_of(manifest(seaweed.url, {"train": "s3://datasets/demo/train"}, tmp_path))[0]
    first = run_pull(pod, tmp_path)
    assert first.returncode == 0 and "cloudddp: pulled s3://datasets/demo/train" in first.stdout, first.stderr
    train = tmp_path / "cloudddp-data" / "train"
    with refused_endpoint() as refused:
        offline = pods_of(manifest(refused, {"train": "s3://datasets/demo/train"}, tmp_path))[0]
        kept = run_pull(offline, tmp_path)  # the init container again, in the same pod: no S3 call
        assert kept.returncode == 0 and "cloudddp: kept s3://datasets/demo/train" in kept.stdout, kept.stderr
        assert files_under(train) == DATA

        (train / "images" / "dog" / "0001.png").write_bytes(b"cut short")  # a copy no longer whole
        refused_pull = run_pull(offline, tmp_path)
        assert refused_pull.returncode == 2 and "the S3 endpoint did not answer" in refused_pull.stderr  # it tried
        assert not list(tmp_path.glob("cloudddp-data/.cloudddp-pulled-*"))  # and vouches for nothing meanwhile
    pulled_again = run_pull(pod, tmp_path)
    assert pulled_again.returncode == 0 and "cloudddp: pulled s3://" in pulled_again.stdout, pulled_again.stderr
    assert files_under(train) == DATA

    other = pods_of(manifest(seaweed.url, {"train": "s3://datasets/demo/single.bin"}, tmp_path))[0]
    changed = run_pull(other, tmp_path)  # the record names another URI: pulled, not kept
    assert changed.returncode == 0 and "cloudddp: pulled s3://datasets/demo/single.bin" in changed.stdout
    assert (train / "single.bin").read_bytes() == b"one object"


@pytest.mark.slow
def test_a_trainjob_node_whose_pull_fails_ends_with_its_paragraph_before_training(
    seaweed: SeaweedS3, tmp_path: Path
) -> None:
    body = manifest(seaweed.url, {"train": "s3://datasets/demo/train"}, tmp_path / "out", kubeflow_api="trainer-v2")
    wrong = {SECRET: {**SECRETS[SECRET], "AWS_SECRET_ACCESS_KEY": "wrong-secret"}}
    node = start_node(body, 0, str(free_port()), tmp_path / "pod-0", wrong)
    out, err = node.communicate(timeout=120)
    assert node.returncode == 2, out + err
    assert "the server refused the credentials (SignatureDoesNotMatch" in err and "Traceback" not in err
    assert "wrong-secret" not in out + err
    assert not (tmp_path / "out").exists() and not (tmp_path / "pod-0" / "cloudddp-data" / "train").exists()


@pytest.mark.slow
def test_a_uri_naming_one_object_pulls_that_file(seaweed: SeaweedS3, tmp_path: Path) -> None:
    pod = pods_of(manifest(seaweed.url, {"train": "s3://datasets/demo/single.bin"}, tmp_path))[0]
    pulled = run_pull(pod, tmp_path)
    assert pulled.returncode == 0, pulled.stderr
    assert files_under(tmp_path / "cloudddp-data" / "train") == {"single.bin": b"one object"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "uri", "message"),
    [
        ("missing bucket", "s3://no-such-bucket/demo", "the bucket 'no-such-bucket' does not exist there"),
        ("typo in the prefix", "s3://datasets/demo/trian", "there is no object under s3://datasets/demo/trian/"),
        ("wrong secret key", "s3://datasets/demo/train", "the server refused the credentials (SignatureDoesNotMatch"),
        ("unreachable endpoint", "s3://datasets/demo/train", "the S3 endpoint did not answer after 3 attempts"),
    ],
)
def test_a_failed_pull_fails_the_pod_with_one_clear_paragraph(
    seaweed: SeaweedS3, tmp_path: Path, case: str, uri: str, message: str
) -> None:
    with refused_endpoint() as refused:  # connections refused, and no one else gets the port meanwhile
        endpoint = refused if case == "unreachable endpoint" else seaweed.url
        secrets = (
            {SECRET: {**SECRETS[SECRET], "AWS_SECRET_ACCESS_KEY": "wrong-secret"}} if "secret" in case else SECRETS
        )
        pod = pods_of(manifest(endpoint, {"train": uri}, tmp_path))[0]
        pulled = run_pull(pod, tmp_path, secrets)
        assert pulled.returncode == 2, pulled.stdout + pulled.stderr
        assert message in pulled.stderr and f"channel 'train' ({uri}) at {endpoint}: " in pulled.stderr, pulled.stderr
        assert pulled.stderr.count("\n") == 1 and "Traceback" not in pulled.stderr
        assert "wrong-secret" not in pulled.stderr and SECRET_KEY not in pulled.stderr
        assert pulled.elapsed < 30  # type: ignore[attr-defined]
    assert not (tmp_path / "cloudddp-data" / "train").exists()  # nothing half-written for training to read


@pytest.mark.slow
def test_on_eks_the_pull_reads_s3_with_the_pods_own_role(tmp_path: Path) -> None:
    """No s3_endpoint, no s3_secret: boto3 in the pod takes the IRSA role EKS's webhook gives every container,
    init containers included (aws/amazon-eks-pod-identity-webhook pkg/handler/handler.go getPodSpecPatch and
    addEnvToContainer at 3bf80a348116483b2162190e43232e4d243f76c4: AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE,
    AWS_REGION). A moto server on 127.0.0.1 stands in for AWS's STS and S3; the manifest names neither."""
    from moto.server import ThreadedMotoServer
    from moto.sts.models import sts_backends

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        aws = "http://{}:{}".format(*server.get_host_and_port())
        urllib.request.urlopen(urllib.request.Request(f"{aws}/moto-api/reset", method="POST")).close()
        s3 = boto3.client("s3", endpoint_url=aws, region_name="us-east-1", aws_access_key_id="admin",
                          aws_secret_access_key="admin")  # fmt: skip
        s3.create_bucket(Bucket="datasets")
        for name, body in DATA.items():
            s3.put_object(Bucket="datasets", Key=f"demo/train/{name}", Body=body)
        body = manifest(None, {"train": "s3://datasets/demo/train"}, tmp_path / "out", service_account="s3-reader")
        crd_validator("pytorchjobs").validate(body)
        pod = pods_of(body)[0]
        assert pod["serviceAccountName"] == "s3-reader" and "env" not in pod["initContainers"][0]
        token = tmp_path / "token"
        token.write_text("eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl")  # the projected service account token
        role = "arn:aws:iam::123456789012:role/s3-reader"
        eks = {"AWS_ROLE_ARN": role, "AWS_WEB_IDENTITY_TOKEN_FILE": str(token), "AWS_REGION": "us-east-1",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_STS_REGIONAL_ENDPOINTS": "regional",
               "AWS_ENDPOINT_URL": aws}  # the last one only because AWS itself is out of reach here  # fmt: skip
        pulled = run_pull(pod, tmp_path, secrets={}, injected=eks)
        assert pulled.returncode == 0, pulled.stderr
        assert files_under(tmp_path / "cloudddp-data" / "train") == DATA
        assumed = sts_backends["123456789012"]["aws"].assumed_roles
        assert [r.role_arn for r in assumed] == [role]  # the pull's credentials came from the web identity
    finally:
        server.stop()


def test_the_kubelet_stand_in_refuses_a_missing_secret_key() -> None:
    container = {"env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "AWS_ACCESS_KEY_ID"}}}]}
    assert kubelet_env(container, SECRETS) == {"K": ACCESS_KEY}
    with pytest.raises(LookupError, match="couldn't find key AWS_ACCESS_KEY_ID in Secret minio-creds"):
        kubelet_env(container, {SECRET: {}})


# -- the pull's own rules, no server needed ------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "expected"),
    [("demo/train/a.csv", "a.csv"), ("demo/train/x/y.png", "x/y.png"), ("demo/train/x/", None)],
)
def test_objects_land_at_their_path_below_the_prefix(key: str, expected: str | None) -> None:
    place = relative_path(Channel("train", "datasets", "demo/train"), key)
    assert (str(place) if place else None) == expected


@pytest.mark.parametrize("key", ["demo/train/../../etc/passwd", "demo/train/a//b", "demo/train/./a"])
def test_a_key_that_would_leave_the_channel_folder_is_refused(key: str) -> None:
    with pytest.raises(CloudDDPError, match="would land outside the channel's folder"):
        relative_path(Channel("train", "datasets", "demo/train"), key)


@pytest.mark.process
def test_an_image_without_boto3_gets_a_clear_message(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['boto3'] = None; from cloudddp.launcher.pull_inputs import main; "
            "sys.exit(main(['--into', sys.argv[1], 'train=s3://datasets/demo']))")  # fmt: skip
    result = subprocess.run([PYTHON, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "has no boto3, which pulling s3:// inputs needs" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    ("argument", "message"),
    [("train", "write CHANNEL=s3://BUCKET/PREFIX"), ("train=/data", "is not an s3://BUCKET/PREFIX URI"),
     ("../x=s3://b/p", "write CHANNEL=s3://BUCKET/PREFIX")],
)  # fmt: skip
def test_bad_arguments_are_named(argument: str, message: str, tmp_path: Path) -> None:
    result = subprocess.run([PYTHON, "-m", "cloudddp.launcher.pull_inputs", "--into", str(tmp_path), argument],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.process
def test_the_launcher_package_stays_standard_library_only() -> None:
    code = "import sys, cloudddp.launcher.pull_inputs; print(sorted({'boto3', 'botocore'} & set(sys.modules)))"
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr
