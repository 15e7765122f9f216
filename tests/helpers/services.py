"""The real local services the tests share, one fixture each, started once per session (per xdist worker)
and isolated per test. Registered by tests/conftest.py; tests/tiers.py maps each fixture to its component.
Heavy imports stay inside the fixtures: unit tests import this module too."""

from __future__ import annotations

import contextlib
import os
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's DEFAULT_ACCOUNT_ID (moto.core), without importing moto here
ROLE = f"arn:aws:iam::{ACCOUNT}:role/cloudddp-test"
AWS_VARIABLES = (
    "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_DEFAULT_REGION", "AWS_REGION", "CLOUDDDP_SAGEMAKER_ROLE",
)  # fmt: skip


@pytest.fixture(scope="session")
def moto_service() -> Iterator[str]:
    """One ThreadedMotoServer on 127.0.0.1 for the session (per xdist worker): its URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def moto_server(moto_service: str, tmp_path: Path) -> dict[str, str]:
    """The session's moto server, emptied for this test, and the environment a subprocess needs to use it."""
    # moto's backends live in this process and outlive a test: each test starts from nothing.
    urllib.request.urlopen(urllib.request.Request(f"{moto_service}/moto-api/reset", method="POST")).close()
    env = {k: v for k, v in os.environ.items() if k not in AWS_VARIABLES}
    env.update(
        AWS_ENDPOINT_URL=moto_service, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION, AWS_REGION=REGION, CLOUDDDP_SAGEMAKER_ROLE=ROLE,
        AWS_CONFIG_FILE=str(tmp_path / "no-aws-config"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-creds"),
        AWS_EC2_METADATA_DISABLED="true",
    )  # fmt: skip
    return env


@pytest.fixture
def kube_api(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """The Kubernetes API fake (helpers/kubernetes_apiserver.py) on 127.0.0.1 and a kubeconfig for it; the claim
    `datasets` exists in the namespaces `training` and `other-team`. Per test: starting it is a thread, ~ms."""
    from helpers.kubernetes_apiserver import FakeAPIServer, write_kubeconfig

    fake = FakeAPIServer()
    fake.add_claim("training", "datasets", ["ReadOnlyMany"])  # the input every job of these tests mounts
    fake.add_claim("other-team", "datasets", ["ReadOnlyMany"])
    url = fake.start()
    try:
        yield fake, write_kubeconfig(tmp_path / "kubeconfig", url, fake.token)
    finally:
        fake.stop()


@pytest.fixture
def oci_service(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Starts the OCI loopback service (helpers/oci_loopback_server.py) for this test: `oci_service(key, **options)`
    with FakeOCI's options (or `kind=` a subclass, such as the staging tests' FakeOCIWithBuckets); each one started
    is stopped, its node processes killed, at the end of the test."""
    from helpers.oci_loopback_server import FakeOCI

    with contextlib.ExitStack() as started:

        def start(key: Any, *, kind: type[Any] = FakeOCI, **options: Any) -> Any:
            options.setdefault("run_root", tmp_path / "service")
            return started.enter_context(kind(key, **options))

        yield start
