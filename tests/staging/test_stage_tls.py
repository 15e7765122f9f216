"""Staging over HTTPS: SeaweedFS serving TLS on 127.0.0.1 with a certificate from a test CA (trustme).

Every path that sends bytes is checked against the trust it should use: botocore's (its CA bundle:
AWS_CA_BUNDLE, a profile's ca_bundle, REQUESTS_CA_BUNDLE) for a stage configured through botocore,
whose files go through cloudddp's PUT client and s3transfer; for the direct path, botocore's default
bundle (certifi's), side by side with a boto3 client given the same trust.
Where botocore's value comes from: boto/botocore botocore/session.py create_client (`ca_bundle`),
botocore/endpoint.py EndpointCreator._get_verify_value (REQUESTS_CA_BUNDLE) and, with neither,
botocore/httpsession.py get_cert_path (certifi's `where`, else its own cacert.pem) at
0e6e2404b85dc336dd2889814e089bde7d1a4c55.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import trustme
from helpers.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3, seaweed_for_tests

from cloudddp.errors import CloudDDPError
from cloudddp.staging import s3_http
from cloudddp.staging.engine import stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.s3_direct import DirectS3Store, open_direct_store, plain_configuration
from cloudddp.staging.s3_store import S3Store, open_s3_store
from cloudddp.staging.sigv4 import Signer
from cloudddp.staging.store import Upload

pytestmark = pytest.mark.slow
# What decides trust here, taken out of each test's environment (this machine sets several of them).
TRUST_VARIABLES = ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")


class TlsServer:
    def __init__(self, server: SeaweedS3, ca: Path, other_ca: Path) -> None:
        self.server, self.ca, self.other_ca = server, ca, other_ca

    def client(self) -> object:
        return boto3.client("s3", endpoint_url=self.server.https_url, verify=str(self.ca), region_name="us-east-1",
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)  # fmt: skip


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    folder = tmp_path_factory.mktemp("tls")
    ca, other = trustme.CA(), trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    issued.private_key_pem.write_to_path(str(folder / "key.pem"))
    issued.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    other.cert_pem.write_to_path(str(folder / "other-ca.pem"))
    with seaweed_for_tests(folder / "seaweedfs", tls=(folder / "cert.pem", folder / "key.pem")) as server:
        server.client().create_bucket(Bucket="tls")
        yield TlsServer(server, folder / "ca.pem", folder / "other-ca.pem")


def environment(monkeypatch: pytest.MonkeyPatch, tls: TlsServer, home: Path, **trust: str) -> None:
    for name in [*TRUST_VARIABLES, *(n for n in os.environ if n.startswith("AWS_"))]:
        monkeypatch.delenv(name, raising=False)
    env = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": tls.server.https_url, "HOME": str(home), **trust}  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def dataset(folder: Path, big: bool) -> Path:
    for i in range(3):
        (folder / f"d{i}").mkdir(parents=True)
        (folder / f"d{i}" / f"{i}.bin").write_bytes(os.urandom(5000 + i * 200_000))
    if big:  # above the single-PUT limit: s3transfer's multipart upload
        (folder / "big.bin").write_bytes(os.urandom(s3_http.SINGLE_PUT_MAX + 4096))
    return folder


def held(tls: TlsServer, uri: str) -> dict[str, bytes]:
    location = parse_location(uri)
    client = tls.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="tls", Prefix=location.prefix).get("Contents", [])]  # type: ignore[attr-defined]
    return {k[len(location.prefix) :].lstrip("/"): client.get_object(Bucket="tls", Key=k)["Body"].read() for k in keys}  # type: ignore[attr-defined]


def local(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_stage_through_botocore_trusts_its_ca_bundle_for_every_file(
    tls: TlsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS_CA_BUNDLE sends the stage through botocore; its files go through cloudddp's PUT client (and s3transfer
    above 64 MiB), which must trust that bundle as botocore does (before: certificate verify failed on the first PUT)."""
    environment(monkeypatch, tls, tmp_path, AWS_CA_BUNDLE=str(tls.ca))
    data = dataset(tmp_path / "data", big=True)
    store = open_s3_store(parse_location("s3://tls/botocore"), "auto")
    assert isinstance(store, S3Store)
    assert store.puts is not None and store.puts.tls is not None  # aimed at the https endpoint
    result = stage(data, store)
    assert held(tls, result.uri) == local(data)


def certifi_bundle_is(monkeypatch: pytest.MonkeyPatch, bundle: Path) -> None:
    """Make certifi's bundle `bundle`, for cloudddp and for botocore (which bound certifi's `where` when
    botocore/httpsession.py was imported)."""
    import botocore.httpsession
    import certifi

    monkeypatch.setattr(certifi, "where", lambda: str(bundle))
    monkeypatch.setattr(botocore.httpsession, "where", lambda: str(bundle))


def botocore_reaches(tls: TlsServer) -> bool:
    """Whether a boto3 client with botocore's default trust (no `verify`, no CA bundle variable) gets an answer."""
    from botocore.exceptions import SSLError

    client = boto3.client("s3", endpoint_url=tls.server.https_url, region_name="us-east-1",
                          aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)  # fmt: skip
    try:
        client.head_bucket(Bucket="tls")
    except SSLError:
        return False
    return True


def test_the_direct_path_stages_over_https_trusting_what_botocore_trusts_by_default(
    tls: TlsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No botocore: cloudddp's own client (TLS over asyncio, http.client's HTTPSConnection), as for AWS S3
    itself. It trusts certifi's bundle, as botocore does by default, not the system's store: here certifi
    vouches for the server and the system store (SSL_CERT_FILE, read by OpenSSL) holds another CA."""
    environment(monkeypatch, tls, tmp_path, SSL_CERT_FILE=str(tls.other_ca))
    certifi_bundle_is(monkeypatch, tls.ca)
    assert botocore_reaches(tls)
    data = dataset(tmp_path / "data", big=False)
    store = open_direct_store(parse_location("s3://tls/direct"))
    assert isinstance(store, DirectS3Store) and store.single_puts.tls is not None
    result = stage(data, store)
    assert held(tls, result.uri) == local(data)
    assert result.uri == stage(data, store).uri  # the re-stage (GET manifest, LIST) over TLS too


def test_the_direct_path_refuses_a_server_only_the_system_store_vouches_for_as_botocore_does(
    tls: TlsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment(monkeypatch, tls, tmp_path, SSL_CERT_FILE=str(tls.ca))
    certifi_bundle_is(monkeypatch, tls.other_ca)
    assert not botocore_reaches(tls)
    data = dataset(tmp_path / "data", big=False)
    with pytest.raises(CloudDDPError, match="CERTIFICATE_VERIFY_FAILED"):
        store = open_direct_store(parse_location("s3://tls/refused-direct"))
        assert store is not None  # the direct path, not botocore's
        stage(data, store)
    assert held(tls, "s3://tls/refused-direct/") == {}


def test_the_put_client_refuses_a_server_its_ca_bundle_does_not_vouch_for_at_once(
    tls: TlsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused certificate is final (s3_http.FINAL_ERRORS): no back-off, refused again on every retry."""
    environment(monkeypatch, tls, tmp_path)
    plain = plain_configuration(dict(os.environ), tmp_path)
    assert plain is not None
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(1000))
    upload = Upload("refused/f.bin", path, path.stat().st_size, "00" * 32)
    puts = s3_http.SinglePuts(tls.server.https_url, Signer(plain, "us-east-1"), True, verify=str(tls.other_ca))
    monkeypatch.setattr(
        s3_http, "backoff", lambda attempt: pytest.fail(f"retry {attempt + 1} of a refused certificate")
    )
    with pytest.raises(CloudDDPError) as refused:
        puts.upload("tls", [upload], lambda _: None)
    assert "f.bin" in str(refused.value) and "CERTIFICATE_VERIFY_FAILED" in str(refused.value), refused.value
    assert held(tls, "s3://tls/refused/") == {}
