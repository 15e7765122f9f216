"""A dataset that fits one shard is sent while it is built (engine.stream_shard), against a real S3 server
(SeaweedFS on 127.0.0.1) through the counting proxy (s3_gate.py): what lands, what a later stage finds
published, what a refused or interrupted stream leaves, and that the server checks the trailing CRC-32."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tarfile
import zlib
from pathlib import Path
from typing import Any

import boto3
import pytest
from helpers import run_cli
from helpers.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3
from s3_gate import Refusal, S3Gate

from cloudddp.errors import CloudDDPError
from cloudddp.staging import local_files, shards
from cloudddp.staging.engine import StageOptions, StageResult, stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import MANIFEST_NAME, SHARDS, FileEntry, scan_version, version_of
from cloudddp.staging.s3_direct import DirectS3Store, plain_configuration
from cloudddp.staging.s3_http import ChunkedBody


def client(server: SeaweedS3) -> Any:
    return boto3.client("s3", endpoint_url=server.url, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1")  # fmt: skip


def direct(seaweed: SeaweedS3, gate: S3Gate, prefix: str, tmp_path: Path) -> DirectS3Store:
    plain = plain_configuration({**seaweed.env(), "AWS_ENDPOINT_URL": gate.url}, tmp_path)
    assert plain is not None
    return DirectS3Store(parse_location(f"s3://direct/{prefix}"), plain)


def make_data(root: Path, files: int = 40) -> Path:
    for i in range(files):
        path = root / f"class{i % 3}" / f"{i:04d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(3000 + 97 * i))  # ~0.2 MB in all: one shard, sent as one short chunk
    return root


def options(tmp_path: Path) -> StageOptions:
    (tmp_path / "work").mkdir(exist_ok=True)
    return StageOptions(layout=SHARDS, hash_cache=tmp_path / "hash-cache", shard_dir=tmp_path / "work")


def objects(seaweed: SeaweedS3, prefix: str) -> dict[str, bytes]:
    s3 = client(seaweed)
    listed = s3.list_objects_v2(Bucket="direct", Prefix=f"{prefix}/").get("Contents", [])
    return {o["Key"][len(prefix) + 1 :]: s3.get_object(Bucket="direct", Key=o["Key"])["Body"].read() for o in listed}


def members(shard: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(shard)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def local(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def built_locally(data: Path, folder: Path) -> bytes:
    """The shard the usual path builds on disk from the same files."""
    folder.mkdir()
    (shard,), _ = shards.build_shards(local_files.list_files(data), folder, shards.DEFAULT_SHARD_SIZE)
    return shard.path.read_bytes()


def first_stage(seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path, prefix: str) -> tuple[Path, StageResult]:
    data = make_data(tmp_path / "data")
    result = stage(data, direct(seaweed, gate, prefix, tmp_path), options(tmp_path))
    return data, result


def test_a_first_stage_sends_its_one_shard_while_building_it(seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path) -> None:
    data, result = first_stage(seaweed, gate, tmp_path, "first")
    assert result.streamed and result.uploaded == ["shard-000000.tar", shards.INDEX_NAME]
    # Named before any file was read: from the scan. The manifest also records the content's own name.
    assert result.version == scan_version(SHARDS, local_files.list_files(data), shards.DEFAULT_SHARD_SIZE)
    stored = objects(seaweed, "first")
    shard = stored[f"{result.version}/shard-000000.tar"]
    assert shard == built_locally(data, tmp_path / "usual")  # byte for byte what the usual path uploads
    assert members(shard) == local(data)
    index = json.loads(stored[f"{result.version}/{shards.INDEX_NAME}"])
    for member in index["shards"][0]["members"]:  # every offset in the index reads its file from the shard
        assert shard[member["offset"] : member["offset"] + member["size"]] == (data / member["path"]).read_bytes()
    manifest = json.loads(stored[MANIFEST_NAME])
    entries = [FileEntry(p, len(b), hashlib.sha256(b).hexdigest()) for p, b in sorted(local(data).items())]
    assert manifest["version"] == result.version
    assert manifest["content"] == version_of(SHARDS, entries, shards.DEFAULT_SHARD_SIZE) != result.version
    assert {f["shard"] for f in manifest["files"]} == {"shard-000000.tar"}
    assert gate.count("PUT") == 3  # shard, index, manifest: nothing built and sent twice


def test_cloudddp_stage_says_the_shard_went_up_as_it_was_built(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = make_data(tmp_path / "data")
    env = {**seaweed.env(), "AWS_ENDPOINT_URL": gate.url, "HOME": str(tmp_path), "CLOUDDDP_CACHE_DIR": str(tmp_path)}
    done = run_cli("stage", str(data), "s3://direct/cli", "--shards", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    said, uri = done.stdout.strip().splitlines()[-2:]
    assert "2 objects uploaded" in said and "(the shard sent as it was built)" in said
    version = uri.removeprefix("s3://direct/cli/").rstrip("/")
    assert members(objects(seaweed, "cli")[f"{version}/shard-000000.tar"]) == local(data)


def test_unchanged_data_after_a_streamed_stage_is_found_published_with_or_without_the_hash_cache(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data, first = first_stage(seaweed, gate, tmp_path, "again")
    gate.reset()
    warm = stage(data, direct(seaweed, gate, "again", tmp_path), options(tmp_path))
    cold = stage(data, direct(seaweed, gate, "again", tmp_path), StageOptions(layout=SHARDS))  # no hash cache
    assert warm.unchanged and cold.unchanged and warm.version == cold.version == first.version
    assert gate.count("PUT") == 0


def test_changed_data_after_a_streamed_stage_gets_a_new_version_and_delete_clears_the_first(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, first = first_stage(seaweed, gate, tmp_path, "changed")
    (data / "class0" / "0000.bin").write_bytes(b"new content")
    for name, value in {**seaweed.env(), "AWS_ENDPOINT_URL": gate.url, "HOME": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)  # deletes go through botocore, which reads these
    second = stage(data, direct(seaweed, gate, "changed", tmp_path), StageOptions(layout=SHARDS, delete=True))
    assert not second.unchanged and second.version not in (first.version, "")
    assert second.deleted and all(key.startswith(f"changed/{first.version}/") for key in second.deleted)
    stored = objects(seaweed, "changed")
    assert members(stored[f"{second.version}/shard-000000.tar"]) == local(data)
    assert not any(name.startswith(first.version) for name in stored)


def test_a_file_that_changes_while_it_is_streamed_fails_naming_it_and_nothing_is_stored(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_data(tmp_path / "data")
    victim = data / "class1" / "0001.bin"
    recall = local_files.recall

    def recall_then_truncate(*args: Any) -> Any:  # after the scan, before the shard is built and sent
        answer = recall(*args)
        victim.write_bytes(b"short")
        return answer

    monkeypatch.setattr(local_files, "recall", recall_then_truncate)
    with pytest.raises(CloudDDPError, match=r"0001\.bin' changed while it was being staged"):
        stage(data, direct(seaweed, gate, "truncated", tmp_path), options(tmp_path))
    assert objects(seaweed, "truncated") == {}  # the PUT was dropped before its last chunk: no object


def test_a_streamed_put_the_server_refuses_falls_back_to_building_the_shard(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    gate.refuse("PUT", Refusal(501, "NotImplemented"))  # a server that does not take aws-chunked bodies
    data, result = first_stage(seaweed, gate, tmp_path, "refused")
    assert not result.streamed and gate.state.refused[0][1].endswith("/shard-000000.tar")
    entries = [FileEntry(p, len(b), hashlib.sha256(b).hexdigest()) for p, b in sorted(local(data).items())]
    assert result.version == version_of(SHARDS, entries, shards.DEFAULT_SHARD_SIZE)  # the usual content name
    assert members(objects(seaweed, "refused")[f"{result.version}/shard-000000.tar"]) == local(data)


def test_a_shard_that_landed_before_the_stage_was_stopped_is_kept_and_its_version_finished(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_data(tmp_path / "data")

    def stopped(*_: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C between the shard's PUT and the publication

    with monkeypatch.context() as patch:
        patch.setattr(DirectS3Store, "write", stopped)
        with pytest.raises(KeyboardInterrupt):
            stage(data, direct(seaweed, gate, "stopped", tmp_path), options(tmp_path))
    interrupted = set(objects(seaweed, "stopped"))
    assert len(interrupted) == 2 and MANIFEST_NAME not in interrupted  # shard and index, unpublished
    gate.reset()
    result = stage(data, direct(seaweed, gate, "stopped", tmp_path), options(tmp_path))
    assert sorted(result.resumed) == sorted(["shard-000000.tar", shards.INDEX_NAME]) and not result.streamed
    assert {f"{result.version}/{name}" for name in ("shard-000000.tar", shards.INDEX_NAME)} == interrupted
    assert [path for method, path in gate.state.targets if method == "PUT"] == [f"/direct/stopped/{MANIFEST_NAME}"]
    assert members(objects(seaweed, "stopped")[f"{result.version}/shard-000000.tar"]) == local(data)


@pytest.mark.parametrize("size", [0, 1, 2 * 1024 * 1024 + 5])  # no chunk, a short one, two whole and a short one
def test_the_server_takes_a_streamed_body_and_checks_its_trailing_crc32(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path, size: int
) -> None:
    store = direct(seaweed, gate, f"crc{size}", tmp_path)
    body = os.urandom(size)

    def fill(crc32: int) -> Any:
        def write(into: ChunkedBody) -> int:
            into.write(body[: size // 3])
            into.write(body[size // 3 :])
            return crc32

        return write

    key = f"crc{size}/{size}.bin"
    wrong = store.requests.stream_put("direct", f"{key}.wrong", size, fill(zlib.crc32(body) ^ 1))
    # S3 answers BadDigest; SeaweedFS 4.48 InvalidDigest, or IncompleteBody for bodies it keeps inline (< ~64 KiB).
    # The same bytes and framing with the right CRC-32 land (below): the trailer is what was refused.
    assert wrong.status == 400 and any(code in wrong.body for code in (b"Digest<", b"IncompleteBody<")), wrong.body
    right = store.requests.stream_put("direct", key, size, fill(zlib.crc32(body)))
    assert right.status == 200, right.body
    stored = objects(seaweed, f"crc{size}")
    assert stored == {f"{size}.bin": body}  # the refused one left nothing


def test_the_chunked_body_is_laid_out_as_aws_chunked_says_and_its_length_known_before() -> None:
    sent: list[bytes] = []
    body = ChunkedBody(sent.append)
    data = bytes(range(256)) * (4096 * 4 + 3)  # 4 MiB and 768 bytes
    for start in range(0, len(data), 300_000):
        body.write(data[start : start + 300_000])
    body.finish(zlib.crc32(data))
    wire = b"".join(sent)
    assert len(wire) == ChunkedBody.length(len(data))
    decoded, rest = b"", wire
    while True:
        head, rest = rest.split(b"\r\n", 1)
        size = int(head, 16)
        if size == 0:
            break
        assert rest[size : size + 2] == b"\r\n" and size in (1024 * 1024, len(data) % (1024 * 1024))
        decoded, rest = decoded + rest[:size], rest[size + 2 :]
    assert decoded == data
    checksum = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    assert rest == f"x-amz-checksum-crc32:{checksum}\r\n\r\n".encode()


@pytest.mark.parametrize(
    ("endpoint", "streams"),
    [("http://127.0.0.1:8333", True), ("http://localhost:8333", True), ("http://[::1]:8333", True),
     ("https://10.0.0.5:9000", True), ("http://10.0.0.5:9000", False), (None, True)],  # None: AWS S3 itself (https)
)  # fmt: skip
def test_an_unsigned_streamed_body_goes_only_over_tls_or_to_this_machine(
    endpoint: str | None, streams: bool, tmp_path: Path
) -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_DEFAULT_REGION": "eu-west-1"}
    plain = plain_configuration({**env, **({"AWS_ENDPOINT_URL": endpoint} if endpoint else {})}, tmp_path)
    assert plain is not None
    assert DirectS3Store(parse_location("s3://bucket/data"), plain).can_stream is streams
