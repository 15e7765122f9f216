"""The staging algorithm against moto's in-process S3 (boto3 transport): what is sent, and when.

Writes are counted through botocore's `before-call` events, i.e. the requests the real
code made, not what a fake says it received.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import os
import tarfile
import threading
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from shard_members import unpacked

from cloudddp.errors import CloudDDPError
from cloudddp.staging import shards as shards_module
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.local_files import HASH_BATCH_BYTES, hash_batches, hash_files, list_files
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import MANIFEST_NAME, SHARDS
from cloudddp.staging.s3_store import S3Store
from cloudddp.staging.shards import INDEX_NAME, build_shards

WRITES = {"PutObject", "CopyObject", "DeleteObjects", "DeleteObject", "CreateMultipartUpload", "UploadPart",
          "CompleteMultipartUpload", "UploadPartCopy"}  # fmt: skip


class Calls:
    """Every S3 operation the client made, by name."""

    def __init__(self, client: Any) -> None:
        self.seen: Counter[str] = Counter()
        client.meta.events.register("before-call.s3", self.record)

    def record(self, model: Any, **_: Any) -> None:
        self.seen[model.name] += 1

    def writes(self) -> Counter[str]:
        return Counter({k: v for k, v in self.seen.items() if k in WRITES})

    def reset(self) -> None:
        self.seen.clear()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for i in range(12):
        path = root / ("train" if i % 3 else "val") / f"class{i % 2}" / f"img{i:02d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(1000 + i))
    (root / "labels.json").write_text('{"a": 1}')
    return root


def store(client: Any, dest: str = "s3://bkt/datasets/cats") -> S3Store:
    return S3Store(client, parse_location(dest))


def objects(client: Any, prefix: str, bucket: str = "bkt") -> dict[str, bytes]:
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]
    return {k[len(prefix) :]: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def local(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_stage_publishes_a_versioned_copy_and_then_the_manifest_naming_it(s3: Any, data: Path) -> None:
    calls = Calls(s3)
    result = stage(data, store(s3))
    assert result.uri == f"s3://bkt/datasets/cats/{result.version}/"
    assert objects(s3, f"datasets/cats/{result.version}/") == local(data)
    manifest = json.loads(s3.get_object(Bucket="bkt", Key=f"datasets/cats/{MANIFEST_NAME}")["Body"].read())
    assert manifest["version"] == result.version
    assert {f["path"]: f["size"] for f in manifest["files"]} == {k: len(v) for k, v in local(data).items()}
    # the manifest is the last write: a job that sees it sees a complete version
    puts = [c for c in calls.seen.elements() if c == "PutObject"]
    assert len(puts) == 14 and calls.writes() == Counter({"PutObject": 14})


def test_the_published_manifest_is_fetched_while_the_files_are_hashed(
    s3: Any, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest GET needs nothing local, so no stage waits for it after hashing: from a laptop that is a round
    trip to S3 off every stage, a no-op re-stage included."""
    from cloudddp.staging import engine

    target = store(s3)
    fetching = threading.Event()
    real_read, real_hash_known = target.read, engine.local_files.hash_known

    def reading(key: str) -> bytes | None:
        fetching.set()
        return real_read(key)

    def hashing(*args: Any, **kwargs: Any) -> Any:
        assert fetching.wait(timeout=20), "the manifest was not asked for until the hashing had ended"
        return real_hash_known(*args, **kwargs)

    monkeypatch.setattr(target, "read", reading)
    monkeypatch.setattr(engine.local_files, "hash_known", hashing)
    result = stage(data, target)
    assert objects(s3, f"datasets/cats/{result.version}/") == local(data)


def test_a_manifest_that_cannot_be_read_fails_the_stage_before_any_upload(s3: Any, data: Path) -> None:
    s3.put_object(Bucket="bkt", Key=f"datasets/cats/{MANIFEST_NAME}", Body=b"{not json")
    calls = Calls(s3)
    with pytest.raises(CloudDDPError, match=rf"s3://bkt/datasets/cats/{MANIFEST_NAME}"):
        stage(data, store(s3))
    assert calls.writes() == Counter()


def test_restaging_unchanged_data_writes_nothing_even_after_a_touch(s3: Any, data: Path) -> None:
    first = stage(data, store(s3))
    calls = Calls(s3)
    os.utime(data / "labels.json", (1, 1))  # a new mtime, the same content
    again = stage(data, store(s3))
    assert again.unchanged and again.uri == first.uri
    assert calls.writes() == Counter()
    assert sum(calls.seen.values()) <= 3  # HeadBucket, GetObject(manifest): no per-file HEAD


def test_a_changed_file_is_the_only_upload_the_rest_is_copied_server_side(s3: Any, data: Path) -> None:
    first = stage(data, store(s3))
    (data / "train/class1/img01.png").write_bytes(b"new pixels")
    calls = Calls(s3)
    second = stage(data, store(s3))
    assert second.version != first.version
    assert second.uploaded == ["train/class1/img01.png"] and len(second.copied) == 12
    assert calls.writes()["PutObject"] == 2  # the changed file and the manifest
    assert objects(s3, f"datasets/cats/{second.version}/") == local(data)
    # the old version stays for jobs still reading it: --delete is never the default
    assert objects(s3, f"datasets/cats/{first.version}/")["train/class1/img01.png"] != b"new pixels"


def test_delete_removes_older_versions_but_nothing_cloudddp_did_not_write(s3: Any, data: Path) -> None:
    first = stage(data, store(s3))
    s3.put_object(Bucket="bkt", Key="datasets/cats/notes.txt", Body=b"mine")
    (data / "labels.json").unlink()
    second = stage(data, store(s3), StageOptions(delete=True))
    assert second.deleted and all(k.startswith(f"datasets/cats/{first.version}/") for k in second.deleted)
    remaining = objects(s3, "datasets/cats/")
    assert not any(k.startswith(first.version) for k in remaining)
    assert "notes.txt" in remaining and "labels.json" not in objects(s3, f"datasets/cats/{second.version}/")


def test_an_interrupted_stage_publishes_nothing_and_the_next_run_sends_only_the_rest(s3: Any, data: Path) -> None:
    before = stage(data, store(s3))
    (data / "train/class0/img04.png").write_bytes(os.urandom(5000))
    for path in sorted(data.rglob("*.png"))[:6]:
        path.write_bytes(path.read_bytes() + b"!")  # seven files differ from the published version
    interrupted = store(s3)
    interrupted.can_copy = False  # every object is an upload, so the interruption lands mid-way
    real_upload_one = interrupted.upload_one
    started = itertools.count()

    def crash_after_four(upload: Any) -> None:  # uploads run in parallel: count starts, not completions
        if next(started) >= 4:
            raise KeyboardInterrupt  # Ctrl-C
        real_upload_one(upload)

    interrupted.upload_one = crash_after_four  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        stage(data, interrupted)
    published = json.loads(s3.get_object(Bucket="bkt", Key=f"datasets/cats/{MANIFEST_NAME}")["Body"].read())
    assert published["version"] == before.version  # jobs still see the old, complete version
    calls = Calls(s3)
    resumed = stage(data, store(s3))
    assert len(resumed.resumed) == 4
    assert not set(resumed.uploaded) & set(resumed.resumed)
    assert calls.writes()["PutObject"] + calls.writes()["CopyObject"] == 13 - len(resumed.resumed) + 1
    assert objects(s3, f"datasets/cats/{resumed.version}/") == local(data)


def test_shard_layout_packs_files_into_tars_with_an_index_and_membership(s3: Any, data: Path) -> None:
    result = stage(data, store(s3), StageOptions(layout=SHARDS, shard_size=8000))
    staged = objects(s3, f"datasets/cats/{result.version}/")
    shard_names = sorted(k for k in staged if k.endswith(".tar"))
    assert len(shard_names) >= 2 and INDEX_NAME in staged
    assert unpacked(staged) == local(data)
    index = json.loads(staged[INDEX_NAME])
    for shard in index["shards"]:
        blob = staged[shard["name"]]
        for member in shard["members"]:
            assert blob[member["offset"] : member["offset"] + member["size"]] == local(data)[member["path"]]
    manifest = json.loads(s3.get_object(Bucket="bkt", Key=f"datasets/cats/{MANIFEST_NAME}")["Body"].read())
    assert {f["shard"] for f in manifest["files"]} == set(shard_names)
    calls = Calls(s3)
    assert stage(data, store(s3), StageOptions(layout=SHARDS, shard_size=8000)).unchanged
    assert calls.writes() == Counter()


def test_shards_are_byte_identical_for_the_same_files(s3: Any, data: Path, tmp_path: Path) -> None:
    first = stage(data, store(s3), StageOptions(layout=SHARDS, shard_size=8000))
    (data / "labels.json").write_text('{"a": 2}')  # sorts first: changes shard 0 only
    second = stage(data, store(s3), StageOptions(layout=SHARDS, shard_size=8000))
    assert sorted(second.uploaded) == ["_cloudddp_index.json", "shard-000000.tar"]
    assert len(second.copied) >= 1 and first.version != second.version


@pytest.mark.process
def test_webdataset_reads_the_shards(s3: Any, data: Path, tmp_path: Path) -> None:
    webdataset = pytest.importorskip("webdataset")
    result = stage(data, store(s3), StageOptions(layout=SHARDS, shard_size=1 << 20))
    shard = tmp_path / "shard-000000.tar"
    shard.write_bytes(
        s3.get_object(Bucket="bkt", Key=f"datasets/cats/{result.version}/shard-000000.tar")["Body"].read()
    )
    samples = list(webdataset.WebDataset(str(shard), shardshuffle=False))
    assert {s["__key__"] for s in samples} == {p.rsplit(".", 1)[0] for p in local(data)}
    assert (
        next(s for s in samples if s["__key__"] == "train/class1/img01")["png"]
        == (data / "train/class1/img01.png").read_bytes()
    )


def test_missing_bucket_names_it_and_offers_create_bucket(s3: Any, data: Path) -> None:
    with pytest.raises(CloudDDPError, match=r"s3://other does not exist.*--create-bucket"):
        stage(data, store(s3, "s3://other/x"))
    created = stage(data, store(s3, "s3://other/x"), StageOptions(create_bucket=True))
    assert objects(s3, f"x/{created.version}/", "other") == local(data)
    assert s3.get_public_access_block(Bucket="other")["PublicAccessBlockConfiguration"]["BlockPublicAcls"]


def test_bad_local_paths_are_named(s3: Any, tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match="does not exist"):
        stage(tmp_path / "missing", store(s3))
    loop = tmp_path / "loop"
    (loop / "sub").mkdir(parents=True)
    (loop / "sub" / "up").symlink_to(loop)
    with pytest.raises(CloudDDPError, match=r"symlink loop.*sub/up"):
        stage(loop, store(s3))
    selfref = tmp_path / "self"
    selfref.mkdir()
    (selfref / "me").symlink_to(selfref / "me")
    with pytest.raises(CloudDDPError, match=r"self/me"):
        stage(selfref, store(s3))
    assert "Contents" not in s3.list_objects_v2(Bucket="bkt")  # nothing uploaded


@pytest.mark.parametrize("where", ["file", "folder", "the staged file itself"])
def test_a_name_that_is_not_utf8_is_named_and_nothing_is_uploaded(s3: Any, data: Path, where: str) -> None:
    """Object keys are UTF-8; a Latin-1 name (byte 0xE9) has no key. Before: a UnicodeEncodeError traceback."""
    latin1 = os.fsdecode(b"caf\xe9")  # what a Linux file system hands Python for those bytes: 'caf\udce9'
    bad = {"file": data / "train" / latin1, "folder": data / latin1 / "x.png"}.get(where, data.parent / latin1)
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(b"x")
    staged = bad if where == "the staged file itself" else data
    with pytest.raises(CloudDDPError, match=r"caf\\udce9' under .* is not valid UTF-8") as error:
        stage(staged, store(s3))
    assert "Rename it" in str(error.value)
    assert "Contents" not in s3.list_objects_v2(Bucket="bkt")


def test_a_folder_removed_while_the_scan_walks_is_named(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder listed by its parent but gone before the scan enters it (another process cleaning up)."""
    listed = os.scandir

    def list_then_remove(folder: str | Path) -> Any:
        entries = list(listed(folder))
        if os.fspath(folder) == str(data / "train"):
            for sub in ("class0", "class1"):
                for file in (data / "train" / sub).iterdir():
                    file.unlink()
                (data / "train" / sub).rmdir()
        return entries

    monkeypatch.setattr("cloudddp.staging.local_files.os.scandir", list_then_remove)
    with pytest.raises(CloudDDPError, match=r"cannot read the folder '.*/train/class0': No such file"):
        list_files(data)


def test_a_file_that_changes_during_the_upload_fails_the_stage_naming_it(s3: Any, data: Path) -> None:
    victim = data / "train/class1/img01.png"

    def grow(**_: Any) -> None:  # runs inside the real upload, before the request is sent
        if victim.stat().st_size < 5000:
            victim.write_bytes(os.urandom(6000))

    s3.meta.events.register("before-call.s3.PutObject", grow)
    with pytest.raises(CloudDDPError, match=r"img01.png' changed while it was being uploaded"):
        stage(data, store(s3))
    assert "Contents" not in s3.list_objects_v2(Bucket="bkt", Prefix=f"datasets/cats/{MANIFEST_NAME}")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full to make the disk full for real")
def test_disk_full_in_the_shard_builder_names_the_folder_and_leaves_no_partial_shard(
    data: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "shard-000000.tar").symlink_to("/dev/full")  # every write there fails with ENOSPC, from the kernel
    hashed = hash_files(list_files(data))
    with pytest.raises(CloudDDPError, match=r"shard folder '.*/shards' ran out of disk space.*--shard-dir"):
        build_shards(hashed, folder, 8000)
    assert list(folder.iterdir()) == []


@pytest.mark.timeout(60)  # a hang is the failure this test looks for
def test_a_write_error_on_the_shard_writer_thread_is_raised_in_the_caller_without_hanging() -> None:
    """The writer thread fails on its third block while the caller writes far more than BLOCKS_AHEAD blocks:
    the caller gets that very error (from a later write, or at the latest from close), and nothing waits on
    the bounded queue forever (the test would hang)."""

    class FailingFile(io.BytesIO):
        def write(self, data: Any) -> int:
            if len(self.getvalue()) >= 2 * shards_module.READ_BLOCK:
                raise OSError(28, "No space left on device")
            return super().write(data)

    raw = FailingFile()
    writer = shards_module.HashingWriter(raw)
    block = b"x" * shards_module.READ_BLOCK
    with pytest.raises(OSError, match="No space left") as raised:
        for _ in range(4 * shards_module.HashingWriter.BLOCKS_AHEAD):
            writer.write(block)
        writer.close()
    assert raised.value.errno == 28
    with pytest.raises(OSError) as again:  # closed once more, as write_shard's `finally` does
        writer.close()
    assert again.value is raised.value and not writer.thread.is_alive()
    assert len(raw.getvalue()) == 2 * shards_module.READ_BLOCK  # nothing written after the failure


def test_a_missing_shard_dir_is_named(s3: Any, data: Path, tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match=r"'.*/nowhere' \(--shard-dir\)"):
        stage(data, store(s3), StageOptions(layout=SHARDS, shard_dir=tmp_path / "nowhere"))
    assert "Contents" not in s3.list_objects_v2(Bucket="bkt")


def test_bad_destinations_and_options_exit_2_naming_the_value(data: Path) -> None:
    from helpers import cli

    for args, named in ((["gs://bucket/x"], "'gs://bucket/x'"), (["s3://B_ad/x"], "'B_ad'"),
                        (["oci://bucket/x"], "'oci://bucket/x'"), (["s3://bkt/x", "--shard-size", "0"], "--shard-size 0"),
                        (["s3://bkt/x", "--transport", "fast"], "--transport 'fast'")):  # fmt: skip
        done = cli("stage", str(data), *args, env={"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
        assert done.returncode == 2 and named in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("checked_by", ["crc32", "sha256"])
def test_a_file_changed_between_scan_and_shard_build_is_named(data: Path, tmp_path: Path, checked_by: str) -> None:
    """Same size, other bytes: only the member check can tell. The scan's CRC-32 is what it compares
    (a SHA-256 where the scan has no CRC-32, as from a hash cache of the previous format)."""
    hashed = hash_files(list_files(data))
    if checked_by == "sha256":
        hashed = [dataclasses.replace(h, crc32=None) for h in hashed]
    changed = data / "train/class1/img01.png"
    changed.write_bytes(os.urandom(changed.stat().st_size))
    with pytest.raises(CloudDDPError, match=r"img01\.png' changed while it was being staged"):
        build_shards(hashed, tmp_path, 1 << 20)


def test_a_shard_holds_exactly_the_scanned_bytes_and_its_recorded_checksums(data: Path, tmp_path: Path) -> None:
    hashed = hash_files(list_files(data))
    (shard,), _ = build_shards(hashed, tmp_path, 1 << 20)
    raw = shard.path.read_bytes()
    assert (shard.size, shard.sha256, shard.crc32) == (len(raw), hashlib.sha256(raw).hexdigest(), zlib.crc32(raw))
    with tarfile.open(shard.path) as tar:
        assert {m.name: tar.extractfile(m).read() for m in tar.getmembers()} == {  # type: ignore[union-attr]
            h.file.relative: Path(h.file.path).read_bytes() for h in hashed
        }


def test_stage_is_one_command_of_the_cli_with_its_help_style_and_options(data: Path) -> None:
    from helpers import cli
    from typer.testing import CliRunner

    from cloudddp.cli import app

    shown = cli("stage", "--help")
    assert shown.returncode == 0 and "Usage: cloudddp stage [OPTIONS]" in shown.stdout
    assert cli("stage", "-h").stdout == shown.stdout == CliRunner().invoke(app, ["stage", "--help"]).output
    for option in ("--shards", "--plain", "--shard-size", "--shard-dir", "--delete", "--create-bucket", "--transport",
                   "--no-progress", "--no-hash-cache"):  # fmt: skip
        assert option in shown.stdout, option
    assert "stage" in cli("--help").stdout
    forwarded = CliRunner().invoke(app, ["stage", str(data), "s3://bkt/x", "--shard-size", "0"])
    assert forwarded.exit_code == 2 and "--shard-size 0" in forwarded.output
    unknown = cli("stage", str(data), "s3://bkt/x", "--shard")
    assert unknown.returncode == 2 and "--shard" in unknown.stderr and "Traceback" not in unknown.stderr


def test_files_are_hashed_in_batches_and_each_hash_is_its_own_files(tmp_path: Path) -> None:
    """Batched hashing (local_files.hash_batches) keeps the order: every hash is that of its own bytes."""
    sizes = [0, 20_000, HASH_BATCH_BYTES + 1, *([30_000] * 300), 5, 2 * HASH_BATCH_BYTES]
    for index, size in enumerate(sizes):
        (tmp_path / f"{index:04d}.bin").write_bytes(os.urandom(size))
    files = list_files(tmp_path)
    batches = hash_batches(files)
    assert [f for batch in batches for f in batch] == files and all(batches)
    assert [len(b) for b in batches if any(f.size > HASH_BATCH_BYTES for f in b)] == [1, 1]  # a large file alone
    assert max(len(b) for b in batches) <= 256 and len(batches) > 3
    for hashed in hash_files(files):
        data = Path(hashed.file.path).read_bytes()
        assert (hashed.sha256, hashed.crc32) == (hashlib.sha256(data).hexdigest(), zlib.crc32(data))


def test_files_not_hashed_yet_are_hashed_from_the_bytes_packed_into_the_shard(data: Path, tmp_path: Path) -> None:
    """A first shard stage reads each file once (shards.copy_member): the hashes it returns are those a
    separate read computes (OCI's per-part MD5 included), and files hashed before come back as they were."""
    files = list_files(data)
    remembered = hash_files(files[::2], md5_part_size=512)  # as from the hash cache
    packable = [remembered[i // 2] if i % 2 == 0 else f for i, f in enumerate(files)]
    (shard,), hashed = build_shards(packable, tmp_path, 1 << 20, md5_part_size=512)
    assert hashed == hash_files(files, md5_part_size=512)
    assert hashed[::2] == remembered and any("-" in (h.md5 or "") for h in hashed)  # some in 2 parts
    with tarfile.open(shard.path) as tar:
        assert {m.name: tar.extractfile(m).read() for m in tar.getmembers()} == {  # type: ignore[union-attr]
            f.relative: Path(f.path).read_bytes() for f in files
        }


def test_a_file_gone_or_shortened_before_its_first_read_is_named(data: Path, tmp_path: Path) -> None:
    """Files not hashed yet are read once, while packed: a read error names the file (not the shard
    folder), and a file shorter than scanned is named as changed."""
    gone = data / "labels.json"
    files = list_files(data)
    gone.unlink()
    with pytest.raises(CloudDDPError, match=r"cannot read '.*/labels\.json': No such file"):
        build_shards(files, tmp_path, 1 << 20)
    gone.write_text('{"a": 1}')
    files = list_files(data)
    shortened = data / "train/class1/img01.png"
    shortened.write_bytes(shortened.read_bytes()[:-1])
    with pytest.raises(CloudDDPError, match=r"img01\.png' changed while it was being staged"):
        build_shards(files, tmp_path, 1 << 20)


@pytest.fixture
def many_shards(tmp_path: Path) -> Path:
    """20 files of 3000 bytes: with --shard-size 3000, one shard each."""
    root = tmp_path / "many"
    for i in range(20):
        (root / f"part{i // 10}").mkdir(parents=True, exist_ok=True)
        (root / f"part{i // 10}" / f"{i:02d}.bin").write_bytes(os.urandom(3000))
    return root


def shards_on_disk(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("shard-*.tar"))


def test_shards_are_sent_as_they_are_built_and_at_most_three_are_on_disk(
    s3: Any, many_shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Staging 50 GB as shards must not need 50 GB of temporary disk: each shard is deleted once sent, and the
    builder runs at most two ahead (one waiting, one being built)."""
    work = tmp_path / "shard-dir"
    work.mkdir()
    target = store(s3)
    on_disk: list[int] = []
    batches: list[list[str]] = []
    real_upload = target.upload

    def counting(uploads: list[Any], on_done: Any) -> None:
        on_disk.append(shards_on_disk(work))
        batches.append([u.key.rsplit("/", 1)[1] for u in uploads])
        real_upload(uploads, on_done)

    monkeypatch.setattr(target, "upload", counting)
    result = stage(many_shards, target, StageOptions(layout=SHARDS, shard_size=3000, shard_dir=work))
    staged = objects(s3, f"datasets/cats/{result.version}/")
    assert sum(name.endswith(".tar") for name in staged) == 20 and len(on_disk) == 20  # a shard a call
    assert batches[-1] == ["shard-000019.tar", "_cloudddp_index.json"]  # the index goes beside the last shard
    assert 1 <= max(on_disk) <= 3 and list(work.iterdir()) == []
    assert unpacked(staged) == local(many_shards)


def builder_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name == "cloudddp-shard-builder"]


def test_a_file_changed_before_its_shard_is_built_fails_the_stage_in_the_sending_thread(
    s3: Any, many_shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = store(s3)
    real_upload = target.upload
    last = many_shards / "part1" / "19.bin"

    def change_the_last_file_first(uploads: list[Any], on_done: Any) -> None:
        last.write_bytes(os.urandom(3000))  # same size, other bytes: its shard is at least 17 builds away
        real_upload(uploads, on_done)

    monkeypatch.setattr(target, "upload", change_the_last_file_first)
    with pytest.raises(CloudDDPError, match=r"19\.bin' changed while it was being staged"):
        stage(many_shards, target, StageOptions(layout=SHARDS, shard_size=3000, shard_dir=tmp_path))
    assert "Contents" not in s3.list_objects_v2(Bucket="bkt", Prefix=f"datasets/cats/{MANIFEST_NAME}")
    assert builder_threads() == [] and shards_on_disk(tmp_path) == 0


def test_a_failed_upload_stops_the_builder(
    s3: Any, many_shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = store(s3)
    real_upload = target.upload
    calls: list[int] = []
    builds: list[str] = []
    real_write = shards_module.write_shard

    def fail_the_second(uploads: list[Any], on_done: Any) -> None:
        calls.append(len(uploads))
        if len(calls) == 2:
            raise CloudDDPError("the store refused shard-000001.tar")
        real_upload(uploads, on_done)

    def counted(shard: Any, *args: Any) -> Any:
        builds.append(shard.name)
        return real_write(shard, *args)

    monkeypatch.setattr(target, "upload", fail_the_second)
    monkeypatch.setattr(shards_module, "write_shard", counted)
    with pytest.raises(CloudDDPError, match="refused shard-000001"):
        stage(many_shards, target, StageOptions(layout=SHARDS, shard_size=3000, shard_dir=tmp_path))
    assert builder_threads() == [] and shards_on_disk(tmp_path) == 0
    assert 2 <= len(builds) <= 4  # the one refused, at most two ahead of it: then the builder stopped
    assert "Contents" not in s3.list_objects_v2(Bucket="bkt", Prefix=f"datasets/cats/{MANIFEST_NAME}")
