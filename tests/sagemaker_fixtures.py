"""Fixtures shared by the tests/test_sagemaker_*.py files (imported, not a conftest).

`aws` runs a test inside `moto.mock_aws()` with fake credentials, and hands the
SageMaker provider one boto3 session whose `CreateTrainingJob` requests are captured
(moto drops fields like Environment, so tests assert on what was sent).
"""

from __future__ import annotations

import copy
import io
import os
import subprocess
import tarfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID

from cloudddp.providers.sagemaker.provider import SageMakerProvider
from cloudddp.spec import JobSpec, build_spec

REPO = Path(__file__).resolve().parent.parent
REGION = "us-east-1"
ACCOUNT = DEFAULT_ACCOUNT_ID
ROLE = f"arn:aws:iam::{ACCOUNT}:role/cloudddp-test"
BUCKET = f"cloudddp-{ACCOUNT}-{REGION}"
SDK_PYTHON = Path(os.environ.get("CLOUDDDP_SMSDK_PYTHON", "/tmp/smsdk-venv/bin/python"))
AWS_VARIABLES = (
    "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_DEFAULT_REGION", "AWS_REGION", "CLOUDDDP_SAGEMAKER_ROLE",
)  # fmt: skip


@dataclass
class FakeAWS:
    """What a test needs: the hooked session, the captured requests, the provider, the moto backends."""

    session: Any
    provider: SageMakerProvider
    created: list[dict[str, Any]] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    on_create: list[Callable[[dict[str, Any]], None]] = field(default_factory=list)

    def client(self, service: str) -> Any:
        return self.session.client(service, region_name=REGION)

    def object_keys(self, bucket: str = BUCKET) -> list[str]:
        s3 = self.client("s3")
        names = [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
        if bucket not in names:
            return []
        return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]

    def buckets(self) -> list[str]:
        return [b["Name"] for b in self.client("s3").list_buckets().get("Buckets", [])]

    def read(self, uri: str) -> bytes:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        return bytes(self.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())

    def training_job(self, name: str) -> Any:
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[ACCOUNT][REGION].training_jobs[name]


def clean_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_aws_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("CLOUDDDP_SAGEMAKER_ROLE", ROLE)


@pytest.fixture
def aws(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAWS]:
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        fake = FakeAWS(session=session, provider=SageMakerProvider())
        fake.provider.say = fake.said.append
        monkeypatch.setattr(SageMakerProvider, "poll_interval", 0.0)
        monkeypatch.setattr(SageMakerProvider, "final_grace", 0.0)

        def capture(params: dict[str, Any], **_: Any) -> None:
            fake.created.append(copy.deepcopy(params))
            for hook in fake.on_create:
                hook(params)

        session.events.register("provide-client-params.sagemaker.CreateTrainingJob", capture)
        # Every SageMakerProvider (CLI, Estimator, get_provider) uses this one hooked session.
        monkeypatch.setattr(SageMakerProvider, "session", lambda self, region: session)
        yield fake


def spec_for(source_dir: Path, **overrides: Any) -> JobSpec:
    data: dict[str, Any] = {"name": "t", "entry_point": "train.py", "source_dir": str(source_dir), "nodes": 2}
    sagemaker = overrides.pop("sagemaker", {})
    data.update(overrides)
    data["sagemaker"] = {"region": REGION, **sagemaker}
    return build_spec(data)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small source folder with things that must not be shipped."""
    source = tmp_path / "project"
    (source / "pkg").mkdir(parents=True)
    (source / "train.py").write_text("print('training')\n")
    (source / "pkg" / "__init__.py").write_text("")
    (source / "pkg" / "model.py").write_text("LAYERS = 3\n")
    (source / "notes.tmp").write_text("scratch")
    (source / "big").mkdir()
    (source / "big" / "weights.bin").write_bytes(b"\0" * 10)
    (source / ".cloudddpignore").write_text("# comments are fine\n*.tmp\nbig/\n")
    for junk in (".git/HEAD", "__pycache__/x.pyc", ".venv/pyvenv.cfg", "env/pyvenv.cfg"):
        (source / junk).parent.mkdir(parents=True, exist_ok=True)
        (source / junk).write_text("junk")
    return source


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    (data / "train" / "a").mkdir(parents=True)
    (data / "train" / "a" / "1.bin").write_bytes(os.urandom(2048))
    (data / "train" / "a" / "2.bin").write_bytes(os.urandom(100))
    (data / "labels.csv").write_text("x,y\n1,2\n")
    return data


def archive_members(blob: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


@pytest.fixture
def moto_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A ThreadedMotoServer on 127.0.0.1 and the environment a subprocess needs to use it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    # moto's backends live in this process and outlive a server: start from nothing.
    urllib.request.urlopen(urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST")).close()
    env = {k: v for k, v in os.environ.items() if k not in AWS_VARIABLES}
    env.update(
        AWS_ENDPOINT_URL=f"http://{host}:{port}", AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION, AWS_REGION=REGION, CLOUDDDP_SAGEMAKER_ROLE=ROLE,
        AWS_CONFIG_FILE=str(tmp_path / "no-aws-config"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-creds"),
        AWS_EC2_METADATA_DISABLED="true",
    )  # fmt: skip
    try:
        yield env
    finally:
        server.stop()


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    result = subprocess.run(
        [str(REPO / ".venv" / "bin" / "cloudddp"), *args], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    result.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return result
