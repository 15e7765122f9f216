"""Fixtures shared by the tests/test_sagemaker_*.py files (imported, not a conftest).

`aws` runs a test inside `moto.mock_aws()` with fake credentials, and hands the
SageMaker provider one boto3 session whose `CreateTrainingJob` requests are captured
(moto drops fields like Environment, so tests assert on what was sent).
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import io
import json
import os
import tarfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID  # where moto defines it: moto.core does not re-export it

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import JobSpec, build_spec
from cloudddp.providers.sagemaker.provider import SageMakerProvider
from helpers.services import AWS_VARIABLES, REGION, ROLE

REPO = Path(__file__).resolve().parents[2]
ACCOUNT = DEFAULT_ACCOUNT_ID
BYO_IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/my-trainer:1"  # not a DLC: the entrypoint mode
BUCKET = f"cloudddp-{ACCOUNT}-{REGION}"
# The SDK's own virtual env, built by `make .venv-sdk/.installed-stamp` (or named by CLOUDDDP_SMSDK_PYTHON).
SDK_PYTHON = Path(os.environ.get("CLOUDDDP_SMSDK_PYTHON") or REPO / ".venv-sdk" / "bin" / "python").absolute()


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

        def environment_as_described(parsed: dict[str, Any], **_: Any) -> None:
            # The service returns the job's Environment in DescribeTrainingJob (botocore 1.44.5's model,
            # DescribeTrainingJobResponse.Environment); moto 5.2.5 keeps it nowhere, so add what was sent.
            sent = [c for c in fake.created if c["TrainingJobName"] == parsed.get("TrainingJobName")]
            if sent and sent[-1].get("Environment"):
                parsed.setdefault("Environment", sent[-1]["Environment"])

        session.events.register("provide-client-params.sagemaker.CreateTrainingJob", capture)
        session.events.register("after-call.sagemaker.DescribeTrainingJob", environment_as_described)
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


def register_stop_training_job(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Teach moto (5.2 has no StopTrainingJob) the operation, as botocore's SageMaker model documents it.

    The documented behaviour (StopTrainingJob's documentation in botocore's service model
    for sagemaker, API 2017-07-24): the job's status becomes `Stopping` (then `Stopped`
    once the algorithm has exited); the only documented error is `ResourceNotFound`. A
    job that already finished cannot be stopped: refused with a ValidationException (the
    message is ours; the service's wording is not documented). Returns the names stopped.
    Works for `mock_aws()` and for a ThreadedMotoServer alike (same process, same class).
    """
    from moto.sagemaker.exceptions import SagemakerClientError, ValidationError
    from moto.sagemaker.models import sagemaker_backends
    from moto.sagemaker.responses import SageMakerResponse

    class ResourceNotFound(SagemakerClientError):
        code = "ResourceNotFound"

    stopped: list[str] = []

    def stop_training_job(self: Any) -> Any:
        from moto.core.responses import EmptyResult

        name = self._get_param("TrainingJobName")
        job = sagemaker_backends[self.current_account][self.region].training_jobs.get(name)
        if job is None:
            raise ResourceNotFound(f"Training job {name} does not exist.")
        if job.training_job_status != "InProgress":
            raise ValidationError(
                message=f"The training job {name} is {job.training_job_status}: it cannot be stopped."
            )
        job.training_job_status, job.secondary_status = "Stopping", "Stopping"
        stopped.append(name)
        return EmptyResult()

    monkeypatch.setattr(SageMakerResponse, "stop_training_job", stop_training_job, raising=False)
    return stopped


def set_job_status(name: str, status: str, secondary: str) -> None:
    """moto completes a job at once; a real one runs for a while (what cancel needs)."""
    from moto.sagemaker.models import sagemaker_backends

    job = sagemaker_backends[ACCOUNT][REGION].training_jobs[name]
    job.training_job_status, job.secondary_status = status, secondary


# -- endpoints that fail the way AWS (or something that is not AWS) fails ---------------------
EXPIRED_MESSAGE = "The security token included in the request is expired"
# STS speaks the query protocol (XML errors), SageMaker and CloudWatch Logs JSON 1.1 (botocore's
# service models: metadata.protocol). These are the error shapes botocore's parsers read.
EXPIRED_XML = (
    '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
    f"<Code>ExpiredToken</Code><Message>{EXPIRED_MESSAGE}</Message></Error>"
    "<RequestId>4a4e9bf8-0000-0000-0000-000000000000</RequestId></ErrorResponse>"
)
EXPIRED_JSON = json.dumps({"__type": "com.amazon.coral.service#ExpiredTokenException", "message": EXPIRED_MESSAGE})
HTML_404 = (
    "<!DOCTYPE html><html><head><title>404 Not Found</title></head><body><h1>Not Found</h1>"
    "<p>The requested URL was not found on this server.</p><hr><address>Apache/2.4 Server</address></body></html>"
)


@contextlib.contextmanager
def canned_endpoint(kind: str) -> Iterator[str]:
    """http://127.0.0.1:PORT answering every request with one failure: `expired` or `html`."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if kind == "html":
                status, body, content_type = 404, HTML_404, "text/html"
            elif self.headers.get("X-Amz-Target"):  # JSON protocol
                status, body, content_type = 400, EXPIRED_JSON, "application/x-amz-json-1.1"
            else:
                status, body, content_type = 403, EXPIRED_XML, "text/xml"
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_HEAD = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def refused(fake: FakeAWS, spec: JobSpec) -> str:
    """The paragraph `submit` refuses `spec` with: exit 2, before anything was created or uploaded."""
    with pytest.raises(CloudDDPError) as info:
        fake.provider.submit(fake.provider.render(spec))
    assert fake.created == [] and fake.buckets() == []
    assert info.value.exit_code == 2
    return str(info.value)
