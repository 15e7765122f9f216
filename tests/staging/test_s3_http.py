"""S3 over cloudddp's own HTTP client (staging/s3_http.py), against a real S3 server (SeaweedFS on
127.0.0.1) behind the test gate (s3_gate.py), which can answer a request with an S3-shaped error
instead of forwarding it: what is retried, what is not, and that every object lands byte for byte."""

from __future__ import annotations

import base64
import os
import zlib
from pathlib import Path

import pytest
from helpers.seaweedfs import SeaweedS3
from s3_gate import Refusal, S3Gate

from cloudddp.errors import CloudDDPError
from cloudddp.staging import s3_http
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.local_files import describe, hash_file
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import MANIFEST_NAME, PLAIN, SHARDS
from cloudddp.staging.s3_direct import DirectS3Store, plain_configuration
from cloudddp.staging.store import Upload


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3_http, "backoff", lambda attempt: 0.0)  # the retries, not the back-off, are tested


def store_for(seaweed: SeaweedS3, gate: S3Gate, uri: str, tmp_path: Path) -> DirectS3Store:
    plain = plain_configuration({**seaweed.env(), "AWS_ENDPOINT_URL": gate.url}, tmp_path)
    assert plain is not None
    return DirectS3Store(parse_location(uri), plain)


def make_files(root: Path, sizes: list[int]) -> Path:
    for i, size in enumerate(sizes):
        path = root / f"d{i % 2}" / f"{i:03d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
    return root


def held_by_server(seaweed: SeaweedS3, uri: str) -> dict[str, bytes]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    client = seaweed.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]
    return {k[len(prefix) :]: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def local(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_throttling_and_server_errors_are_retried_until_every_object_lands(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    # Small bodies (one write) and bodies above s3_http.INLINE (sendfile), 300 KiB to 1 MiB.
    data = make_files(tmp_path / "data", [2000 + i for i in range(12)] + [300_000, 1_048_576])
    gate.refuse("PUT", Refusal(503, "SlowDown"), Refusal(503, "SlowDown", chunked=True),
                Refusal(500, "InternalError", close=True), Refusal(400, "RequestTimeout"))  # fmt: skip
    gate.refuse("GET", Refusal(503, "SlowDown"))  # the manifest's GET, retried too
    result = stage(data, store_for(seaweed, gate, "s3://http/retried", tmp_path))
    assert held_by_server(seaweed, result.uri) == local(data)
    assert len(gate.state.refused) == 5 and gate.count("PUT") == 14 + 1  # every file, then the manifest
    retried = {path for method, path in gate.state.refused if method == "PUT"}
    assert retried <= {path for method, path in gate.state.targets if method == "PUT"}


def test_access_denied_is_final_after_one_attempt_and_nothing_is_published(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = make_files(tmp_path / "data", [100])
    gate.refuse("PUT", Refusal(403, "AccessDenied"))
    with pytest.raises(CloudDDPError, match=r"s3://http/denied/v-\w+/d0/000\.bin: access denied \(AccessDenied\)"):
        stage(data, store_for(seaweed, gate, "s3://http/denied", tmp_path))
    assert gate.state.refused == [("PUT", gate.state.refused[0][1])] and gate.count("PUT") == 0
    assert not held_by_server(seaweed, "s3://http/denied/")  # no object, no manifest


def test_a_server_error_that_persists_ends_after_the_last_attempt_naming_the_file(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = make_files(tmp_path / "data", [100])
    gate.refuse("PUT", *[Refusal(500, "InternalError")] * s3_http.MAX_ATTEMPTS)
    with pytest.raises(CloudDDPError, match=r"cannot upload '.*000\.bin' to s3://http/failing/.*: InternalError"):
        stage(data, store_for(seaweed, gate, "s3://http/failing", tmp_path))
    assert len(gate.state.refused) == s3_http.MAX_ATTEMPTS and gate.count("PUT") == 0
    assert MANIFEST_NAME not in held_by_server(seaweed, "s3://http/failing/")


@pytest.mark.parametrize(
    ("size", "change", "checksum"),
    [(1000, "grown", "crc32"), (400_000, "cut short", "crc32"), (1000, "same size, other bytes", "crc32"),
     (400_000, "same size, other bytes", "crc32"), (400_000, "same size, other bytes", "sha256")],
)  # fmt: skip
def test_a_file_that_changes_after_the_scan_is_named_and_not_published(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path, size: int, change: str, checksum: str
) -> None:
    """Inline bodies (one write) and sendfile bodies. A changed size is caught before or while sending;
    other bytes of the same size only by S3, which checks them against the scan's CRC-32 (its SHA-256
    where an upload has no CRC-32)."""
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(size))
    scanned = hash_file(describe(path, "f.bin"))
    path.write_bytes({"grown": path.read_bytes() + b"more", "cut short": path.read_bytes()[: size // 2],
                      "same size, other bytes": os.urandom(size)}[change])  # fmt: skip
    crc32 = scanned.crc32 if checksum == "crc32" else None
    upload = Upload("changed/f.bin", path, size, scanned.sha256, None, scanned.file, crc32)
    store = store_for(seaweed, gate, "s3://http/changed", tmp_path)
    with pytest.raises(CloudDDPError, match=r"f\.bin' changed while it was being uploaded"):
        store.upload([upload], lambda _: None)
    assert not held_by_server(seaweed, "s3://http/changed/")
    if change == "same size, other bytes":
        assert len(gate.state.targets) == 1  # sent, answered (refused by the server), not retried


@pytest.mark.network
def test_an_unreachable_endpoint_is_one_paragraph_naming_it(tmp_path: Path) -> None:
    from helpers.endpoints import refused_endpoint

    with refused_endpoint() as url:
        plain = plain_configuration({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": url},
                                    tmp_path)  # fmt: skip
        assert plain is not None
        store = DirectS3Store(parse_location("s3://http/x"), plain)
        with pytest.raises(CloudDDPError, match=rf"cannot reach S3 at {url} for s3://http \(HeadBucket\)"):
            store.check_bucket(False)


def test_uploads_work_from_inside_a_running_event_loop_as_in_a_notebook_cell(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    import asyncio

    data = make_files(tmp_path / "data", [500, 600])
    store = store_for(seaweed, gate, "s3://http/notebook", tmp_path)

    async def cell() -> str:  # a Jupyter cell runs inside the kernel's loop: asyncio.run is refused there
        return stage(data, store).uri

    uri = asyncio.run(cell())
    assert held_by_server(seaweed, uri) == local(data)


@pytest.mark.parametrize("layout", [PLAIN, SHARDS])
def test_each_object_is_stored_with_the_crc32_of_the_local_bytes(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path, layout: str
) -> None:
    """The server checked each PUT against the CRC-32 sent and keeps it: HeadObject with ChecksumMode
    returns it (botocore's s3 service model, ChecksumCRC32 <- x-amz-checksum-crc32), equal to the CRC-32
    of the bytes the test reads back, which equal the local files."""
    data = make_files(tmp_path / "data", [100, 300_000, 5000])
    uri = stage(data, store_for(seaweed, gate, f"s3://http/crc-{layout}", tmp_path), StageOptions(layout=layout)).uri
    held = held_by_server(seaweed, uri)
    if layout == PLAIN:
        assert held == local(data)
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    client = seaweed.client()
    for name, body in held.items():
        head = client.head_object(Bucket=bucket, Key=prefix + name, ChecksumMode="ENABLED")
        assert head["ChecksumCRC32"] == base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode(), name


def test_the_default_ca_bundle_is_botocores(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's own answers (botocore/httpsession.py, imported here): certifi's bundle, else its cacert.pem."""
    import sys

    from botocore.httpsession import DEFAULT_CA_BUNDLE, get_cert_path

    assert s3_http.default_ca_bundle() == get_cert_path(True)
    monkeypatch.setitem(sys.modules, "certifi", None)  # `import certifi` now raises ImportError
    assert s3_http.default_ca_bundle() == DEFAULT_CA_BUNDLE and Path(DEFAULT_CA_BUNDLE).is_file()
