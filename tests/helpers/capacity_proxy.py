"""A thin HTTP proxy in front of the moto server that answers like SageMaker without capacity (tests/failover).

Every request is forwarded to moto as it came and its answer returned as it was, except SageMaker's
CreateTrainingJob (the JSON 1.1 protocol's `X-Amz-Target: SageMaker.CreateTrainingJob`):

- for an instance type in `refused`, the service's refusal: HTTP 400, `Content-Type: application/x-amz-json-1.1`
  and the body `{"__type": "ResourceLimitExceeded", "Message": ...}`. That is the ResourceLimitExceeded shape of
  botocore's SageMaker model (botocore/data/sagemaker/2017-07-24/service-2.json: a structure whose one member is
  Message, `exception: true`, listed in CreateTrainingJob's errors) in the JSON 1.1 protocol's error form, the code in
  `__type` as botocore's JSON parser reads it (botocore/parsers.py, BaseJSONParser._do_error_parse);
- for an instance type in `no_capacity`, the job is created in moto, then ends Failed with the FailureReason
  `CapacityError: Unable to provision requested ML compute capacity. ...` as SageMaker reports a job it could not
  find instances for (moto completes every job at once; its backend is this process's).

`on_create(job_name)` runs once moto created a job and before its answer is sent (a test kills the client there).
`requests` records (operation, instance type, job name) for every SageMaker call, in order; `refused_at` and
`created_at` when each refusal was sent and each job created (time.monotonic(), for benchmarks/failover.py).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from helpers.capacity_errors import SAGEMAKER_CAPACITY

CREATE = "SageMaker.CreateTrainingJob"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class CapacityProxy:
    def __init__(self, moto_url: str, refused: set[str], no_capacity: set[str] = frozenset(),  # type: ignore[assignment]
                 on_create: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self.moto_url, self.refused, self.no_capacity = moto_url.rstrip("/"), refused, no_capacity
        self.on_create = on_create  # called with each created job's name before the answer is sent
        self.requests: list[tuple[str, str, str]] = []
        self.refused_at: list[float] = []  # time.monotonic() of each refusal sent, and of each job moto created
        self.created_at: list[float] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                proxy.forward(self, b"")

            def do_HEAD(self) -> None:
                proxy.forward(self, b"")

            def do_DELETE(self) -> None:
                proxy.forward(self, b"")

            def do_PUT(self) -> None:
                proxy.forward(self, read_body(self))

            def do_POST(self) -> None:
                proxy.forward(self, read_body(self))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="capacity-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CapacityProxy:
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        target = handler.headers.get("X-Amz-Target", "")
        instance_type = job = ""
        if target.startswith("SageMaker."):
            payload = json.loads(body or b"{}")
            instance_type = (payload.get("ResourceConfig") or {}).get("InstanceType", "")
            job = payload.get("TrainingJobName", "")
            self.requests.append((target.removeprefix("SageMaker."), instance_type, job))
        if target == CREATE and instance_type in self.refused:
            message = (f"The account-level service limit '{instance_type} for training job usage' is 0 Instances, "
                       f"with current utilization of 0 Instances and a request delta of 1 Instances.")  # fmt: skip
            self.answer(handler, 400, {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": "proxy-1"},
                        json.dumps({"__type": "ResourceLimitExceeded", "Message": message}).encode())  # fmt: skip
            self.refused_at.append(time.monotonic())
            return
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP}
        # http.client sends the headers as given (urllib would add a form Content-Type to a body that has none).
        connection = http.client.HTTPConnection(urllib.parse.urlsplit(self.moto_url).netloc, timeout=30)
        try:
            connection.request(handler.command, handler.path, body=body, headers=headers)
            response = connection.getresponse()
            status, answer_headers, answer = response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()
        if target == CREATE and status == 200:
            self.created_at.append(time.monotonic())
            if instance_type in self.no_capacity:
                fail_for_capacity(job)
            if self.on_create:
                self.on_create(job)
        self.answer(handler, status, answer_headers, answer)

    @staticmethod
    def answer(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            if key.lower() not in HOP_BY_HOP:
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request's body: Content-Length bytes, or HTTP/1.1 chunks (botocore sends some S3 bodies so)."""
    if "chunked" not in handler.headers.get("Transfer-Encoding", "").lower():
        return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
    body = b""
    while size := int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16):
        body += handler.rfile.read(size)
        handler.rfile.readline()
    while handler.rfile.readline().strip():  # trailers, up to the blank line
        pass
    return body


def fail_for_capacity(job: str) -> None:
    from moto.sagemaker.models import sagemaker_backends

    from helpers.sagemaker_fixtures import ACCOUNT, REGION

    training_job = sagemaker_backends[ACCOUNT][REGION].training_jobs[job]
    training_job.training_job_status, training_job.secondary_status = "Failed", "Failed"
    # moto's FakeTrainingJob has no failure_reason of its own; its describe serialises every attribute it holds.
    training_job.failure_reason = SAGEMAKER_CAPACITY  # pyright: ignore[reportAttributeAccessIssue]
