"""Staging through botocore's configuration (staging/s3_store.py, as the SageMaker provider does): files
go through cloudddp's own PUT client, aimed by `aimed_puts` at exactly where botocore would send them,
and never around something that intercepts botocore's sends (moto's in-process mock)."""

from __future__ import annotations

import hashlib
import os
import re
import zlib
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore_urls import request_botocore_sends, url_botocore_sends
from helpers.seaweedfs import SeaweedS3
from moto import mock_aws
from s3_gate import S3Gate

from cloudddp.staging.engine import stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.s3_store import S3Store, aimed_puts, open_s3_store
from cloudddp.staging.store import Upload

KEY = "datasets/cats/v-1/a b+c/é.jpg"


@pytest.mark.parametrize(
    ("bucket", "settings"),
    [
        ("plain-bucket", {}),
        ("dotted.bucket", {}),
        ("plain-bucket", {"config": Config(s3={"addressing_style": "path"})}),
        ("plain-bucket", {"config": Config(use_fips_endpoint=True)}),
        ("plain-bucket", {"config": Config(use_dualstack_endpoint=True)}),
        ("plain-bucket", {"endpoint_url": "http://127.0.0.1:9000"}),
    ],
)
def test_each_put_goes_where_botocores_put_object_goes(bucket: str, settings: dict[str, Any]) -> None:
    client = boto3.client("s3", region_name="eu-west-3", aws_access_key_id="k", aws_secret_access_key="s", **settings)
    puts = aimed_puts(client, bucket, "eu-west-3", Credentials("k", "s"), {})
    assert puts is not None
    head = puts.request_head(bucket, Upload(KEY, Path("/unused"), 1, "00" * 32)).decode()
    method, target, _ = head.split("\r\n", 1)[0].split(" ")
    host = re.search(r"^host: (\S+)\r$", head, re.M).group(1)  # type: ignore[union-attr]
    scheme = "https" if puts.tls else "http"
    sent_by_botocore = url_botocore_sends(client, "put_object", Bucket=bucket, Key=KEY, Body=b"x")
    assert (method, f"{scheme}://{host}{target}") == ("PUT", sent_by_botocore)


def test_the_checksum_header_and_payload_hash_are_what_botocores_put_object_sends_over_plain_http() -> None:
    """botocore's default request checksum for PutObject is CRC32 (boto/botocore, botocore/httpchecksum.py,
    DEFAULT_CHECKSUM_ALGORITHM, commit 50465e9ce106984cda6e8d0beec8af27378aa969; the installed 1.44.5 the same):
    over plain HTTP it goes as the `x-amz-checksum-crc32` header beside a signed payload. cloudddp's PUT
    sends the same header, the same value and the same payload hash for the same bytes."""
    body = os.urandom(3000)
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s",
                          endpoint_url="http://127.0.0.1:9000")  # fmt: skip
    headers = request_botocore_sends(client, "put_object", Bucket="plain-bucket", Key="f", Body=body).headers
    sent = {name.lower(): value.decode() if isinstance(value, bytes) else value for name, value in headers.items()}
    upload = Upload("f", Path("/unused"), len(body), hashlib.sha256(body).hexdigest(), crc32=zlib.crc32(body))
    puts = aimed_puts(client, "plain-bucket", "us-east-1", Credentials("k", "s"), {})
    assert puts is not None
    head = puts.request_head("plain-bucket", upload).decode()
    assert f"x-amz-checksum-crc32: {sent['x-amz-checksum-crc32']}\r\n" in head
    assert f"x-amz-content-sha256: {sent['x-amz-content-sha256']}\r\n" in head


def test_nothing_goes_around_motos_in_process_mock() -> None:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="mocked")
        assert aimed_puts(client, "mocked", "us-east-1", Credentials("k", "s"), {}) is None
        assert "Contents" not in client.list_objects_v2(Bucket="mocked")  # the probe wrote nothing


def test_sse_kms_headers_are_sent_and_signed_with_every_put() -> None:
    client = boto3.client("s3", region_name="eu-west-3", aws_access_key_id="k", aws_secret_access_key="s")
    store = S3Store(client, parse_location("s3://plain-bucket/x"), "eu-west-3", kms_key="arn:aws:kms:key/1",
                    credentials=Credentials("k", "s"))  # fmt: skip
    assert store.puts is not None
    head = store.puts.request_head("plain-bucket", Upload("x/f", Path("/unused"), 1, "00" * 32)).decode()
    assert "x-amz-server-side-encryption: aws:kms\r\n" in head
    assert "x-amz-server-side-encryption-aws-kms-key-id: arn:aws:kms:key/1\r\n" in head
    signed = head.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"x-amz-server-side-encryption", "x-amz-server-side-encryption-aws-kms-key-id"} <= set(signed)


def test_a_stage_through_botocores_configuration_puts_files_with_cloudddps_client(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**seaweed.env(), "AWS_ENDPOINT_URL": gate.url, "HOME": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    data = tmp_path / "data"
    for i in range(6):
        (data / f"d{i % 2}").mkdir(parents=True, exist_ok=True)
        (data / f"d{i % 2}" / f"{i}.bin").write_bytes(os.urandom(3000 + i * 100_000))  # inline and sendfile
    store = open_s3_store(parse_location("s3://data/aimed"), "auto")
    assert store.puts is not None
    result = stage(data, store)
    puts = [(path, agent) for (method, path), agent in zip(gate.state.targets, gate.state.agents, strict=True)
            if method == "PUT"]  # fmt: skip
    assert len(puts) == 7 and puts[-1][0].endswith("_cloudddp_manifest.json") and "Boto3" in puts[-1][1]
    assert {agent for _, agent in puts[:-1]} == {"cloudddp-stage"}  # s3_http.py's, not botocore's or the CRT's
    client = seaweed.client()
    for path in data.rglob("*.bin"):
        key = f"aimed/{result.version}/{path.relative_to(data).as_posix()}"
        assert client.get_object(Bucket="data", Key=key)["Body"].read() == path.read_bytes()


def test_an_endpoint_behind_a_proxy_is_left_to_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    client = boto3.client("s3", region_name="eu-west-3", aws_access_key_id="k", aws_secret_access_key="s")
    assert aimed_puts(client, "plain-bucket", "eu-west-3", Credentials("k", "s"), {}) is None
    monkeypatch.setenv("no_proxy", "s3.eu-west-3.amazonaws.com")  # lower case wins, as in urllib
    assert aimed_puts(client, "plain-bucket", "eu-west-3", Credentials("k", "s"), {}) is not None
