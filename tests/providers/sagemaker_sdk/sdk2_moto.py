"""The moto server fixture of the SDK v2 drop-in tests, imported by each of them, and fixtures several of them share.

Not a conftest.py: test modules here and elsewhere do `from conftest import ...` and must get tests/conftest.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import botocore.client
import pytest

REGION = "us-east-1"
AWS_VARIABLES = (
    "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_DEFAULT_REGION",
    "AWS_REGION", "CLOUDDDP_SAGEMAKER_ROLE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
)  # fmt: skip


@dataclass
class MotoServer:
    """The server's endpoint, the API calls cloudddp made (operation, parameters), a client factory."""

    endpoint: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def client(self, service: str) -> Any:
        return boto3.Session(region_name=REGION).client(service, region_name=REGION)

    def created(self) -> list[dict[str, Any]]:
        """Every CreateTrainingJob request as sent (moto itself drops some fields, e.g. Environment)."""
        return [params for name, params in self.calls if name == "CreateTrainingJob"]

    def read(self, uri: str) -> bytes:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        return bytes(self.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())

    def keys(self, bucket: str) -> list[str]:
        pages = self.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


@pytest.fixture
def moto(moto_server: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> MotoServer:
    """The session's moto server (helpers/services.py, emptied for this test); AWS_ENDPOINT_URL points every boto3
    client at it; cwd = tmp_path."""
    endpoint = moto_server["AWS_ENDPOINT_URL"]
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-creds"),
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)  # local runs go to ./cloudddp-runs
    spy = MotoServer(endpoint=endpoint)
    real_call = botocore.client.BaseClient._make_api_call

    def recording(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        # Parameters of SageMaker calls only (S3 uploads carry open files).
        spy.calls.append(
            (operation_name, copy.deepcopy(api_params) if self.meta.service_model.service_name == "sagemaker" else {})
        )
        return real_call(self, operation_name, api_params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    return spy


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "train.py").write_text("print('training')\n")
    return folder


@pytest.fixture
def no_credentials(moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    """The moto server, with no AWS credentials anywhere (variables, files, instance metadata, containers)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    assert boto3.Session().get_credentials() is None
    return moto
