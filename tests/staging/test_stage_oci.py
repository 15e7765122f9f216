"""Staging to OCI Object Storage through the real `oci` SDK (UploadManager, MultipartObjectAssembler) against the
loopback OCI service, which checks request signatures and Content-MD5 like the service."""

from __future__ import annotations

import itertools
import json
import os
import pty
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import oci
import pytest
from helpers.oci_loopback_server import FakeOCI, ThrowawayKey
from oci_buckets import FakeOCIWithBuckets
from shard_members import unpacked

from cloudddp.errors import CloudDDPError
from cloudddp.staging import hash_cache
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import MANIFEST_NAME, SHARDS
from cloudddp.staging.oci_object_store import OCIObjectStore

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def key() -> ThrowawayKey:
    return ThrowawayKey.generate()


@pytest.fixture
def server(key: ThrowawayKey, oci_service: Callable[..., FakeOCIWithBuckets]) -> FakeOCIWithBuckets:
    return oci_service(key, kind=FakeOCIWithBuckets)


@pytest.fixture
def client(server: FakeOCI, key: ThrowawayKey, tmp_path: Path) -> Any:
    config = oci.config.from_file(str(key.write_config(tmp_path / ".oci")))
    return oci.object_storage.ObjectStorageClient(config, service_endpoint=server.url)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for i in range(6):
        path = root / f"part{i % 2}" / f"{i}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(3000 + i))
    (root / "big.bin").write_bytes(os.urandom(3 * MIB + 7))
    return root


def store(client: Any, dest: str = "oci://bkt@ns/datasets/x", **options: Any) -> OCIObjectStore:
    options.setdefault("part_size", MIB)
    return OCIObjectStore(client, parse_location(dest), **options)


def local(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def staged(server: FakeOCI, prefix: str) -> dict[str, bytes]:
    return {
        n[len(prefix) :]: server.objects[("ns", "bkt", n)].data for n in server.object_names() if n.startswith(prefix)
    }


def test_stage_uploads_verified_objects_and_publishes_the_manifest_last(
    server: FakeOCI, client: Any, data: Path
) -> None:
    result = stage(data, store(client))
    assert result.uri == f"oci://bkt@ns/datasets/x/{result.version}/"
    assert staged(server, f"datasets/x/{result.version}/") == local(data)
    assert not server.signature_failures
    single = [c for c in server.calls("PUT", r"/o/datasets/x/v-") if "content-md5" in c.headers]
    assert len(single) == 6  # every single-part upload carried its MD5 for the service to check
    assert len(server.calls("PUT", r"/u/datasets/x/v-.*/big.bin$")) == 4  # 3 MiB + 7 bytes in 1 MiB parts
    last_write = server.writes()[-1]
    assert last_write.path.endswith(f"/o/datasets/x/{MANIFEST_NAME}")


def test_restaging_unchanged_data_writes_nothing(server: FakeOCI, client: Any, data: Path) -> None:
    stage(data, store(client))
    writes = len(server.writes())
    os.utime(data / "big.bin", (5, 5))
    assert stage(data, store(client)).unchanged
    assert len(server.writes()) == writes


def test_an_interrupted_stage_resumes_without_resending(server: FakeOCI, client: Any, data: Path) -> None:
    interrupted = store(client)
    real = interrupted.upload_one
    started = itertools.count()

    def stop_after_three(upload: Any) -> None:  # uploads run in parallel: count starts, not completions
        if next(started) >= 3:
            raise KeyboardInterrupt
        real(upload)

    interrupted.upload_one = stop_after_three  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        stage(data, interrupted)
    assert f"datasets/x/{MANIFEST_NAME}" not in server.object_names()
    calls_before = len(server.calls())
    result = stage(data, store(client))
    assert len(result.resumed) == 3 and len(result.uploaded) == 4
    second_run_puts = [c.path for c in server.calls()[calls_before:] if c.method == "PUT"]
    assert second_run_puts and not [p for p in second_run_puts if p.endswith(tuple(result.resumed))]
    assert staged(server, f"datasets/x/{result.version}/") == local(data)


def test_a_content_md5_mismatch_is_an_error_naming_the_file(server: FakeOCI, client: Any, data: Path) -> None:
    target = store(client)
    real = target.upload_one

    def corrupt_then_upload(upload: Any) -> None:
        if Path(upload.path).name == "3.bin":
            Path(upload.path).write_bytes(b"X" * upload.size)  # same size, other bytes: only the MD5 can tell
        real(upload)

    target.upload_one = corrupt_then_upload  # type: ignore[method-assign]
    with pytest.raises(CloudDDPError, match=r"3\.bin.*MD5 mismatch"):
        stage(data, target)
    assert [c.status for c in server.calls("PUT", r"3\.bin$")] == [400]  # the service refused it
    assert f"datasets/x/{MANIFEST_NAME}" not in server.object_names()


def test_a_big_file_changed_during_its_multipart_upload_fails_on_the_multipart_md5(
    server: FakeOCI, client: Any, data: Path
) -> None:
    target = store(client)
    real = target.upload_one

    def rewrite_then_upload(upload: Any) -> None:
        if Path(upload.path).name == "big.bin":  # same size, same mtime: only the content can tell
            stat = os.stat(upload.path)
            Path(upload.path).write_bytes(b"Y" * upload.size)
            os.utime(upload.path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        real(upload)

    target.upload_one = rewrite_then_upload  # type: ignore[method-assign]
    with pytest.raises(CloudDDPError, match=r"big\.bin.*MD5 mismatch"):
        stage(data, target)
    assert f"datasets/x/{MANIFEST_NAME}" not in server.object_names()


def test_shards_on_oci(server: FakeOCI, client: Any, data: Path) -> None:
    result = stage(data, store(client), StageOptions(layout=SHARDS, shard_size=MIB))
    names = sorted(staged(server, f"datasets/x/{result.version}/"))
    assert names == ["_cloudddp_index.json", "shard-000000.tar", "shard-000001.tar"]


def test_a_first_stage_of_several_shards_is_named_from_the_scan_and_verified_by_md5(
    server: FakeOCI, client: Any, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-pass first stage (engine.stage_shards_in_one_pass) on OCI: MD5s computed from the packed bytes,
    checked by the service on every PUT; a re-stage hashes first and finds the content published."""
    monkeypatch.setattr(hash_cache, "RACY_NS", -(10**18))  # the files count as settled
    result = stage(data, store(client), StageOptions(layout=SHARDS, shard_size=MIB))
    objects = staged(server, f"datasets/x/{result.version}/")
    assert unpacked(objects) == local(data)
    manifest = json.loads(server.objects[("ns", "bkt", f"datasets/x/{MANIFEST_NAME}")].data)
    assert manifest["version"] == result.version != manifest["content"]
    (small_shard,) = server.calls("PUT", r"/shard-000001\.tar$")  # big.bin sorts first: shard 0 is in parts
    assert small_shard.status == 200 and small_shard.headers.get("content-md5")  # which the service checked
    again = stage(data, store(client), StageOptions(layout=SHARDS, shard_size=MIB))
    assert again.unchanged and again.uri == result.uri


def test_missing_bucket_is_named_and_create_bucket_creates_it_private(
    server: FakeOCIWithBuckets, client: Any, data: Path
) -> None:
    with pytest.raises(CloudDDPError, match=r"oci://other@ns does not exist.*--create-bucket"):
        stage(data, store(client, "oci://other@ns/x"))
    assert not server.writes()
    stage(
        data,
        store(client, "oci://other@ns/x", compartment_id="ocid1.compartment.oc1..c"),
        StageOptions(create_bucket=True),
    )
    (created,) = server.created_buckets
    assert created["compartmentId"] == "ocid1.compartment.oc1..c" and created["publicAccessType"] == "NoPublicAccess"
    assert ("ns", "other") in server.buckets


def test_stage_command_prints_the_version_uri_last(
    server: FakeOCI, key: ThrowawayKey, data: Path, tmp_path: Path
) -> None:
    from helpers import cli

    env = {"CLOUDDDP_OCI_SERVICE_ENDPOINT": server.url, "OCI_CONFIG_FILE": str(key.write_config(tmp_path / "cfg")),
           "CLOUDDDP_CACHE_DIR": str(tmp_path / "hash-cache")}  # fmt: skip
    done = cli("stage", str(data), "oci://bkt@ns/cli", env=env)
    assert done.returncode == 0, done.stderr
    uri = done.stdout.strip().splitlines()[-1]
    assert uri.startswith("oci://bkt@ns/cli/v-") and uri.endswith("/")
    assert staged(server, uri.removeprefix("oci://bkt@ns/")) == local(data)
    assert "\x1b[" not in done.stderr  # no progress bar when stderr is not a terminal
    missing = cli("stage", str(data), "oci://nobucket@ns/cli", env=env)
    assert missing.returncode == 2 and "oci://nobucket@ns does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_stage_builds_no_client_but_object_storage(
    server: FakeOCI, key: ThrowawayKey, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each SDK client costs ~40 ms to build: `cloudddp stage oci://` builds the one it uses, and still names
    its endpoint when the network fails."""
    from cloudddp.stage_cli import open_oci_store

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("staging built a client it does not use")

    monkeypatch.setattr(oci.data_science, "DataScienceClient", refuse)
    monkeypatch.setattr(oci.loggingsearch, "LogSearchClient", refuse)
    monkeypatch.setenv("OCI_CONFIG_FILE", str(key.write_config(tmp_path / "cfg")))
    monkeypatch.setenv("CLOUDDDP_OCI_SERVICE_ENDPOINT", server.url)
    result = stage(data, open_oci_store(parse_location("oci://bkt@ns/lazy")))
    assert staged(server, f"lazy/{result.version}/") == local(data)
    monkeypatch.setenv("CLOUDDDP_OCI_TIMEOUT", "1")
    monkeypatch.delenv("CLOUDDDP_OCI_SERVICE_ENDPOINT")  # the profile's region: a name that cannot resolve here
    unreachable = open_oci_store(parse_location("oci://bkt@ns/lazy"))
    assert unreachable.reaching is not None
    named = pytest.raises(CloudDDPError, match=r"cannot reach OCI for stage: https://objectstorage\.")
    with named, unreachable.reaching("stage"):
        raise oci.exceptions.RequestException("connection refused")


def test_a_terminal_gets_a_progress_bar_with_files_bytes_and_rate(
    server: FakeOCI, key: ThrowawayKey, data: Path, tmp_path: Path
) -> None:
    from helpers import PYTHON, clean_env

    env = {"CLOUDDDP_OCI_SERVICE_ENDPOINT": server.url, "OCI_CONFIG_FILE": str(key.write_config(tmp_path / "cfg")),
           "COLUMNS": "160", "CLOUDDDP_CACHE_DIR": str(tmp_path / "hash-cache")}  # fmt: skip
    leader, follower = pty.openpty()  # stderr is a terminal, stdout a pipe (as in `URI=$(cloudddp stage ...)`)
    screen: list[bytes] = []

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the other side is closed
                return
            if not chunk:
                return
            screen.append(chunk)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    argv = [PYTHON, "-c", "from cloudddp.console import main; main()", "stage", str(data), "oci://bkt@ns/tty"]
    done = subprocess.run(argv, env=clean_env(env), stdout=subprocess.PIPE, stderr=follower, text=True, timeout=120)
    os.close(follower)
    reader.join(timeout=10)
    os.close(leader)
    shown = b"".join(screen).decode(errors="replace")
    assert done.returncode == 0, shown
    assert "7/7 objects" in shown and "MB" in shown and "\x1b[" in shown  # objects, bytes, drawn as a bar
    assert done.stdout.strip().splitlines()[-1].startswith("oci://bkt@ns/tty/v-")
    assert "\x1b[" not in done.stdout  # stdout stays plain for scripts


def test_download_keeps_the_paths_and_refuses_names_that_leave_the_folder(
    server: FakeOCI, client: Any, tmp_path: Path
) -> None:
    server.put_object("runs/1/output/model.pt", b"weights")
    server.put_object("runs/1/output/logs/node-0.log", b"log")
    written = store(client, "oci://bkt@ns/runs/1/output").download(tmp_path / "model")
    assert sorted(p.relative_to(tmp_path / "model").as_posix() for p in written) == ["logs/node-0.log", "model.pt"]
    assert (tmp_path / "model" / "model.pt").read_bytes() == b"weights"
    server.put_object("runs/2/output/../../escape.txt", b"x")
    with pytest.raises(CloudDDPError, match=r"refusing to write oci://bkt@ns/runs/2/output/\.\./\.\./escape\.txt"):
        store(client, "oci://bkt@ns/runs/2/output").download(tmp_path / "other")
    assert not (tmp_path / "escape.txt").exists()


def test_credentials_the_service_refuses_are_named_without_uploading(
    server: FakeOCI, data: Path, tmp_path: Path
) -> None:
    stranger = ThrowawayKey.generate()  # a key the service does not know: every request is refused (401)
    config = oci.config.from_file(str(stranger.write_config(tmp_path / "stranger")))
    client = oci.object_storage.ObjectStorageClient(config, service_endpoint=server.url)
    with pytest.raises(CloudDDPError, match=r"oci://bkt@ns.*401 NotAuthenticated.*credentials are not accepted"):
        stage(data, store(client))
    assert server.signature_failures and not server.writes()


@pytest.mark.network
def test_stage_to_an_endpoint_that_refuses_connections_is_one_paragraph(
    key: ThrowawayKey, data: Path, tmp_path: Path
) -> None:
    from helpers import cli
    from helpers.endpoints import refused_endpoint

    with refused_endpoint() as endpoint:
        env = {"CLOUDDDP_OCI_SERVICE_ENDPOINT": endpoint, "CLOUDDDP_OCI_TIMEOUT": "2",
               "OCI_CONFIG_FILE": str(key.write_config(tmp_path / "cfg")), "CLOUDDDP_CACHE_DIR": str(tmp_path / "c")}  # fmt: skip
        done = cli("stage", str(data), "oci://bkt@ns/x", env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"cannot reach OCI for stage: {endpoint}" in done.stderr
    assert "connection was refused" in done.stderr


def test_a_missing_config_or_profile_names_the_variables_stage_reads(
    key: ThrowawayKey, data: Path, tmp_path: Path
) -> None:
    """`cloudddp stage` has no --config-file or --profile: its errors name the OCI CLI variables it reads."""
    from helpers import cli

    config = key.write_config(tmp_path / "cfg")
    for env, named in (({"OCI_CLI_CONFIG_FILE": str(tmp_path / "none")}, "OCI_CLI_CONFIG_FILE"),
                       ({"OCI_CONFIG_FILE": str(config), "OCI_CLI_PROFILE": "NOPE"}, "OCI_CLI_PROFILE")):  # fmt: skip
        done = cli("stage", str(data), "oci://bkt@ns/x", env={**env, "CLOUDDDP_CACHE_DIR": str(tmp_path / "c")})
        assert done.returncode == 2 and named in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert done.stdout == ""


# -- multipart integrity, aborts and object names (tester findings on `cloudddp stage` to OCI) ---------------------
def damage_part_one(client: Any) -> None:
    """One byte of part 1 of every multipart upload flipped on its way to the service: damage in transit."""
    real = client.upload_part

    def damaged(namespace: str, bucket: str, name: str, upload_id: str, part_num: int, body: Any, **kw: Any) -> Any:
        if part_num == 1:
            data = bytearray(body.read(body.size))
            data[100] ^= 0xFF
            body = bytes(data)
        return real(namespace, bucket, name, upload_id, part_num, body, **kw)

    client.upload_part = damaged


def test_a_part_damaged_in_transit_is_refused_and_the_rerun_sends_it_again(
    server: FakeOCI, client: Any, data: Path
) -> None:
    # Before: the SDK sent parts without Content-MD5, the damaged object was committed and left under the version,
    # and the rerun the error asks for counted it "already there" and published it.
    damage_part_one(client)
    with pytest.raises(CloudDDPError, match=r"big\.bin.*MD5 mismatch"):
        stage(data, store(client))
    parts = server.calls("PUT", r"/u/datasets/x/v-.*/big\.bin$")
    assert parts and all(p.headers.get("content-md5") for p in parts)  # every part carried its MD5
    assert 400 in [p.status for p in parts]  # which the service checked: the damaged one refused
    assert not [n for n in server.object_names() if n.endswith("big.bin")] and not server.uploads  # aborted
    del client.upload_part  # the link is sound again
    result = stage(data, store(client))
    assert "big.bin" in result.uploaded and "big.bin" not in result.resumed
    assert staged(server, f"datasets/x/{result.version}/") == local(data)


def rewrite_before_upload(target: OCIObjectStore, name: str) -> None:
    """`name` gets other bytes of the same size and mtime just before its upload: only the content can tell."""
    real = target.upload_one

    def rewrite_then_upload(upload: Any) -> None:
        if Path(upload.path).name == name:
            stat = os.stat(upload.path)
            Path(upload.path).write_bytes(b"Y" * upload.size)
            os.utime(upload.path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        real(upload)

    target.upload_one = rewrite_then_upload  # type: ignore[method-assign]


def test_a_committed_object_failing_the_multipart_md5_is_deleted_before_the_error(
    server: FakeOCI, client: Any, data: Path
) -> None:
    # Before: the object stayed under the version; a rerun with the file's first content back resumed it.
    target = store(client)
    rewrite_before_upload(target, "big.bin")
    with pytest.raises(CloudDDPError, match=r"big\.bin.*MD5 mismatch"):
        stage(data, target)
    (commit,) = server.calls("POST", r"/u/datasets/x/v-.*/big\.bin$")
    (delete,) = server.calls("DELETE", r"/o/datasets/x/v-.*/big\.bin$")
    assert delete.status == 204 and delete.headers.get("if-match")  # the commit's ETag: only the object it wrote
    assert commit.status == 200 and not [n for n in server.object_names() if n.endswith("big.bin")]


def test_an_object_another_writer_replaced_since_the_commit_is_left_alone(
    server: FakeOCI, client: Any, data: Path
) -> None:
    """The delete of an unverified object carries the commit's ETag: what another stage wrote since stays."""
    target = store(client)
    rewrite_before_upload(target, "big.bin")
    real = client.commit_multipart_upload

    def commit_then_overwritten(namespace: str, bucket: str, name: str, *args: Any, **kwargs: Any) -> Any:
        response = real(namespace, bucket, name, *args, **kwargs)
        server.put_object(name, b"the other stage's bytes")
        return response

    client.commit_multipart_upload = commit_then_overwritten
    with pytest.raises(CloudDDPError, match=r"big\.bin.*MD5 mismatch"):
        stage(data, target)
    (delete,) = server.calls("DELETE", r"/o/datasets/x/v-.*/big\.bin$")
    assert delete.status == 412
    (name,) = [n for n in server.object_names() if n.endswith("big.bin")]
    assert server.objects[("ns", "bkt", name)].data == b"the other stage's bytes"


def test_delete_object_honours_if_match_with_one_etag_per_object(server: FakeOCI, client: Any) -> None:
    put = client.put_object("ns", "bkt", "a.txt", b"a")
    assert client.head_object("ns", "bkt", "a.txt").headers["etag"] == put.headers["etag"]
    with pytest.raises(oci.exceptions.ServiceError) as refused:
        client.delete_object("ns", "bkt", "a.txt", if_match="another-etag")
    assert (refused.value.status, refused.value.code) == (412, "NoEtagMatch")
    assert server.object_names() == ["a.txt"]
    client.delete_object("ns", "bkt", "a.txt", if_match=put.headers["etag"])
    assert server.object_names() == []


@pytest.mark.parametrize("abort_fails", [False, True])
def test_a_failed_multipart_upload_is_aborted(server: FakeOCI, client: Any, data: Path, abort_fails: bool) -> None:
    # Before: its parts stayed in the bucket as an uncommitted upload, on every failure.
    real = client.upload_part

    def part_three_fails(namespace: str, bucket: str, name: str, upload_id: str, part_num: int, *args: Any,
                         **kwargs: Any) -> Any:  # fmt: skip
        if part_num == 3:
            raise oci.exceptions.ServiceError(503, "ServiceUnavailable", {}, "Service unavailable")
        return real(namespace, bucket, name, upload_id, part_num, *args, **kwargs)

    client.upload_part = part_three_fails
    if abort_fails:  # best effort: the error raised is still the upload's own
        client.abort_multipart_upload = lambda *_, **__: (_ for _ in ()).throw(ConnectionError("abort failed"))
    with pytest.raises(CloudDDPError, match=r"cannot upload .*big\.bin: Object Storage said 503 ServiceUnavailable"):
        stage(data, store(client))
    assert bool(server.uploads) == abort_fails
    if not abort_fails:
        (aborted,) = server.calls("DELETE", r"/u/datasets/x/v-.*/big\.bin$")
        assert aborted.status == 204


def test_an_interrupt_aborts_the_multipart_uploads_in_flight_without_waiting_for_them(
    server: FakeOCI, client: Any, data: Path
) -> None:
    # Before: the interrupt waited for every upload in flight to finish (and so committed it), aborting nothing.
    from cloudddp.staging.engine import upload_of
    from cloudddp.staging.local_files import describe, hash_file

    target = store(client)
    big, small = (hash_file(describe(data / name, name), MIB) for name in ("big.bin", "part0/0.bin"))
    sending, release = threading.Event(), threading.Event()
    real = client.upload_part

    def held(*args: Any, **kwargs: Any) -> Any:
        sending.set()
        release.wait(60)  # only a stage that waits for the uploads in flight (the old code) waits this out
        return real(*args, **kwargs)

    def interrupted(_: Any) -> None:  # as Ctrl-C in the main thread once the big file's parts are on their way
        assert sending.wait(60)
        raise KeyboardInterrupt

    client.upload_part = held
    try:
        with pytest.raises(KeyboardInterrupt):
            target.upload([upload_of(big, "x/big.bin"), upload_of(small, "x/0.bin")], interrupted)
        assert not server.uploads and "x/big.bin" not in server.object_names()
        assert [c.status for c in server.calls("DELETE", r"/u/x/big\.bin$")] == [204]
    finally:
        release.set()


ODD_NAMES = {"a line feed": "new\nline.txt", "a carriage return": "cr\rname.txt"}


def odd_names(root: Path, names: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ok.txt").write_text("one")
    for name in names:
        (root / name).write_text("x")


@pytest.mark.parametrize("what", ["a line feed", "a carriage return"])
def test_a_name_object_storage_refuses_is_refused_before_anything_is_uploaded(
    server: FakeOCI, key: ThrowawayKey, tmp_path: Path, what: str
) -> None:
    # Before: uploaded (the service refuses such names halfway through the upload, with a 400 per object).
    from helpers import cli

    root, path = tmp_path / "odd", tmp_path / "odd" / ODD_NAMES[what]
    odd_names(root, [ODD_NAMES[what]])
    env = {"CLOUDDDP_OCI_SERVICE_ENDPOINT": server.url, "OCI_CONFIG_FILE": str(key.write_config(tmp_path / "cfg")),
           "CLOUDDDP_CACHE_DIR": str(tmp_path / "hash-cache")}  # fmt: skip
    done = cli("stage", str(root), "oci://bkt@ns/odd", env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == ""
    assert f"{str(path)!r} under {str(root)!r} has {what} in its name" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1  # one paragraph: the name's own line break is escaped
    assert not server.writes()


def test_an_object_name_over_1024_bytes_is_refused_before_anything_is_uploaded(
    server: FakeOCI, client: Any, tmp_path: Path
) -> None:
    # Before: a 1182-byte name was uploaded (OCI and S3 refuse names over 1024). The limit counts the whole key.
    root = tmp_path / "deep"
    fixed = len("datasets/x/v-0123456789abcdef/")
    fits = root / ("f" * 200) / ("g" * 200) / ("h" * 200) / ("i" * 200)
    fits.mkdir(parents=True)
    room = 1024 - fixed - len(fits.relative_to(root).as_posix()) - 1  # bytes left for the file's own name
    (fits / ("j" * room)).write_text("fits")
    result = stage(root, store(client))  # a key of exactly 1024 bytes: stored
    assert max(len(n.encode()) for n in server.object_names()) == 1024
    (fits / ("k" * (room - 1) + "é")).write_text("over by a byte: é is two bytes in UTF-8")
    writes = len(server.writes())
    with pytest.raises(CloudDDPError, match=r"é' under .* would be the object .*, 1025 bytes long.* 1024 bytes"):
        stage(root, store(client))
    assert len(server.writes()) == writes
    assert result.uri  # the first stage published


def test_names_inside_shards_are_not_object_names(server: FakeOCI, client: Any, tmp_path: Path) -> None:
    root = tmp_path / "odd"
    odd_names(root, list(ODD_NAMES.values()))
    result = stage(root, store(client), StageOptions(layout=SHARDS, shard_size=MIB))
    assert sorted(unpacked(staged(server, f"datasets/x/{result.version}/"))) == sorted(local(root))


def test_the_fake_service_refuses_the_object_names_oci_refuses(client: Any) -> None:
    for name in ("new\nline", "cr\rname", "nul\0name", "x" * 1025):
        with pytest.raises(oci.exceptions.ServiceError) as refused:
            client.put_object("ns", "bkt", name, b"x")
        assert (refused.value.status, refused.value.code) == (400, "InvalidObjectName")
    details = oci.object_storage.models.CreateMultipartUploadDetails(object="new\nline")
    with pytest.raises(oci.exceptions.ServiceError, match="InvalidObjectName"):
        client.create_multipart_upload("ns", "bkt", details)
    assert client.put_object("ns", "bkt", "x" * 1024, b"x").status == 200
