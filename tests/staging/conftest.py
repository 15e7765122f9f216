"""Fixtures of the staging tests: moto in process (`s3`), or a real S3 server (SeaweedFS on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from helpers.seaweedfs import SeaweedS3, seaweed_for_tests
from moto import mock_aws
from s3_gate import S3Gate

BUCKETS = ("data", "http", "direct")  # the buckets the modules write to, one prefix per test


@pytest.fixture
def s3() -> Iterator[Any]:
    """moto's S3 in process, with the bucket `bkt`: the engine's logic without a server."""
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        yield client


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    """One server per test module, started only by the modules that ask for it."""
    with seaweed_for_tests(tmp_path_factory.mktemp("seaweedfs")) as server:
        client = server.client()
        for bucket in BUCKETS:
            client.create_bucket(Bucket=bucket)
        yield server


@pytest.fixture
def gate(seaweed: SeaweedS3) -> Iterator[S3Gate]:
    """The counting, holding, refusing proxy (s3_gate.py) in front of the module's server."""
    proxy = S3Gate(seaweed.port)
    yield proxy
    proxy.close()
