"""Staging to OCI Object Storage through the real `oci` SDK (UploadManager) against the
loopback OCI service, which checks request signatures and Content-MD5 like the service."""

from __future__ import annotations

import itertools
import json
import os
import pty
import subprocess
import threading
from collections.abc import Iterator
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
def server(key: ThrowawayKey, tmp_path: Path) -> Iterator[FakeOCIWithBuckets]:
    with FakeOCIWithBuckets(key, run_root=tmp_path / "service") as fake:
        yield fake


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
    from helpers import run_cli

    env = {"CLOUDDDP_OCI_SERVICE_ENDPOINT": server.url, "OCI_CONFIG_FILE": str(key.write_config(tmp_path / "cfg")),
           "CLOUDDDP_CACHE_DIR": str(tmp_path / "hash-cache")}  # fmt: skip
    done = run_cli("stage", str(data), "oci://bkt@ns/cli", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    uri = done.stdout.strip().splitlines()[-1]
    assert uri.startswith("oci://bkt@ns/cli/v-") and uri.endswith("/")
    assert staged(server, uri.removeprefix("oci://bkt@ns/")) == local(data)
    assert "\x1b[" not in done.stderr  # no progress bar when stderr is not a terminal
    missing = run_cli("stage", str(data), "oci://nobucket@ns/cli", env=env, timeout=120)
    assert missing.returncode == 2 and "oci://nobucket@ns does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_stage_builds_no_client_but_object_storage(
    server: FakeOCI, key: ThrowawayKey, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each SDK client costs ~40 ms to build: `cloudddp stage oci://` builds the one it uses, and still names
    its endpoint when the network fails."""
    from cloudddp.staging.oci_object_store import open_oci_store

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


def test_stage_to_an_endpoint_that_refuses_connections_is_one_paragraph(
    key: ThrowawayKey, data: Path, tmp_path: Path
) -> None:
    from helpers import run_cli
    from helpers.endpoints import refused_endpoint

    with refused_endpoint() as endpoint:
        env = {"CLOUDDDP_OCI_SERVICE_ENDPOINT": endpoint, "CLOUDDDP_OCI_TIMEOUT": "2",
               "OCI_CONFIG_FILE": str(key.write_config(tmp_path / "cfg")), "CLOUDDDP_CACHE_DIR": str(tmp_path / "c")}  # fmt: skip
        done = run_cli("stage", str(data), "oci://bkt@ns/x", env=env, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"cannot reach OCI for stage: {endpoint}" in done.stderr
    assert "connection was refused" in done.stderr


def test_a_missing_config_or_profile_names_the_variables_stage_reads(
    key: ThrowawayKey, data: Path, tmp_path: Path
) -> None:
    """`cloudddp stage` has no --config-file or --profile: its errors name the OCI CLI variables it reads."""
    from helpers import run_cli

    config = key.write_config(tmp_path / "cfg")
    for env, named in (({"OCI_CLI_CONFIG_FILE": str(tmp_path / "none")}, "OCI_CLI_CONFIG_FILE"),
                       ({"OCI_CONFIG_FILE": str(config), "OCI_CLI_PROFILE": "NOPE"}, "OCI_CLI_PROFILE")):  # fmt: skip
        done = run_cli("stage", str(data), "oci://bkt@ns/x", env={**env, "CLOUDDDP_CACHE_DIR": str(tmp_path / "c")})
        assert done.returncode == 2 and named in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert done.stdout == ""
