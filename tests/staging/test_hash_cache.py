"""The hash cache: an unchanged folder is re-staged without reading its files, a changed one never; and how
often a shard stage reads each file (once, where nothing is published: its version is named from the scan).

Runs the real engine against moto's in-process S3; file reads are counted by wrapping the real
`local_files.hash_file` (and `shards.read_blocks`, where a shard stage reads files to pack them), writes
through botocore's events (test_stage_engine.Calls).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shard_members import unpacked
from test_stage_engine import Calls, local, objects, store

from cloudddp.errors import CloudDDPError
from cloudddp.staging import hash_cache, local_files, shards
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.manifest import MANIFEST_NAME, SHARDS, FileEntry, Manifest, version_of
from cloudddp.staging.shards import INDEX_NAME


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for i in range(6):
        path = root / f"class{i % 2}" / f"img{i}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(500 + i))
    return root


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Relative paths of the files the engine read to hash them."""
    seen: list[str] = []
    real = local_files.hash_file

    def counting(file: local_files.LocalFile, md5_part_size: int | None = None) -> local_files.Hashed:
        seen.append(file.relative)
        return real(file, md5_part_size)

    monkeypatch.setattr(local_files, "hash_file", counting)
    return seen


@pytest.fixture
def not_racy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test a moment ago count as settled (the racy-write guard has its own test)."""
    monkeypatch.setattr(hash_cache, "RACY_NS", -(10**18))


def test_an_unchanged_folder_is_restaged_without_reading_a_file(
    s3: Any, data: Path, tmp_path: Path, reads: list[str], not_racy: None
) -> None:
    options = StageOptions(hash_cache=tmp_path / "cache")
    first = stage(data, store(s3), options)
    assert len(reads) == 6
    reads.clear()
    calls = Calls(s3)
    again = stage(data, store(s3), options)
    assert reads == [] and again.unchanged and again.uri == first.uri
    assert calls.writes() == {}


def test_a_replaced_file_with_the_same_size_and_mtime_is_hashed_again(
    s3: Any, data: Path, tmp_path: Path, reads: list[str], not_racy: None
) -> None:
    options = StageOptions(hash_cache=tmp_path / "cache")
    first = stage(data, store(s3), options)
    target = data / "class0" / "img0.png"
    before = target.stat()
    replacement = data / "class0" / "img0.png.new"
    replacement.write_bytes(os.urandom(before.st_size))
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, target)  # same size and mtime, another inode: what `cp`/editors often do
    reads.clear()
    second = stage(data, store(s3), options)
    assert reads == ["class0/img0.png"]
    assert second.version != first.version and second.uploaded == ["class0/img0.png"]
    assert objects(s3, second.uri.removeprefix("s3://bkt/"))["class0/img0.png"] == target.read_bytes()


def test_files_written_just_now_are_not_remembered(s3: Any, data: Path, tmp_path: Path, reads: list[str]) -> None:
    # A write in the same timestamp tick as the hashing could leave the stat unchanged: such files are
    # hashed again next time (git's "racy clean" rule), so an in-place rewrite is never missed.
    options = StageOptions(hash_cache=tmp_path / "cache")
    stage(data, store(s3), options)
    reads.clear()
    stage(data, store(s3), options)
    assert sorted(reads) == sorted(f.relative for f in local_files.list_files(data))


def test_a_folder_whose_own_path_is_not_utf8_is_restaged_from_the_cache(
    s3: Any, data: Path, tmp_path: Path, reads: list[str], not_racy: None
) -> None:
    """Only the names below the staged folder become keys: the folder's own path may hold any bytes, and the
    cache file is named after it. Before: a UnicodeEncodeError traceback from the cache."""
    moved = data.rename(tmp_path / os.fsdecode(b"d\xfcnn"))  # Latin-1 bytes: 'd\udcfcnn' to Python
    options = StageOptions(hash_cache=tmp_path / "cache")
    first = stage(moved, store(s3), options)
    assert objects(s3, first.uri.removeprefix("s3://bkt/")) == local(moved)
    reads.clear()
    again = stage(moved, store(s3), options)
    assert reads == [] and again.unchanged and again.uri == first.uri


def test_a_damaged_cache_file_is_ignored(s3: Any, data: Path, tmp_path: Path, reads: list[str], not_racy: None) -> None:
    options = StageOptions(hash_cache=tmp_path / "cache")
    first = stage(data, store(s3), options)
    (cache_file,) = (tmp_path / "cache").iterdir()
    cache_file.write_text("{not json")
    reads.clear()
    again = stage(data, store(s3), options)
    assert len(reads) == 6 and again.unchanged and again.uri == first.uri


def test_the_cache_lives_where_the_variable_says(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLOUDDDP_CACHE_DIR", str(tmp_path / "c"))
    assert hash_cache.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("CLOUDDDP_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert hash_cache.cache_dir() == tmp_path / "x" / "cloudddp"


def test_a_cache_of_the_previous_format_is_hashed_again_and_its_crc32_is_remembered(
    s3: Any, data: Path, tmp_path: Path, reads: list[str], not_racy: None
) -> None:
    """Format 1 had no CRC-32 (what uploads and shard members are now checked against): trusting it
    would leave every file unchecked by CRC, so it is read once more and rewritten in format 2."""
    options = StageOptions(hash_cache=tmp_path / "cache")
    first = stage(data, store(s3), options)
    (cache_file,) = (tmp_path / "cache").iterdir()
    body = json.loads(cache_file.read_text())
    assert body["format"] == hash_cache.FORMAT == 2
    crcs = {name: entry[4] for name, entry in body["files"].items()}
    assert crcs == {f.relative: zlib.crc32(Path(f.path).read_bytes()) for f in local_files.list_files(data)}
    body["format"] = 1
    body["files"] = {name: entry[:4] for name, entry in body["files"].items()}  # as format 1 wrote them
    cache_file.write_text(json.dumps(body))
    reads.clear()
    again = stage(data, store(s3), options)
    assert len(reads) == 6 and again.unchanged and again.uri == first.uri
    assert json.loads(cache_file.read_text())["format"] == 2


@pytest.fixture
def packed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Relative paths of the files the engine read to pack them into a shard."""
    seen: list[str] = []
    real = shards.read_blocks

    def counting(file: local_files.LocalFile) -> Iterator[bytes]:
        seen.append(file.relative)
        return real(file)

    monkeypatch.setattr(shards, "read_blocks", counting)
    return seen


def test_a_first_shard_stage_reads_each_file_once_and_a_warm_re_stage_reads_and_builds_nothing(
    s3: Any, data: Path, tmp_path: Path, reads: list[str], packed: list[str], not_racy: None
) -> None:
    options = StageOptions(layout=SHARDS, hash_cache=tmp_path / "cache")
    first = stage(data, store(s3), options)
    names = sorted(f.relative for f in local_files.list_files(data))
    assert sorted(packed) == names and [r for r in reads if r in names] == []  # hashed while packed, not before
    (cache_file,) = (tmp_path / "cache").iterdir()
    remembered = {name: (entry[1], entry[4]) for name, entry in json.loads(cache_file.read_text())["files"].items()}
    assert remembered == {
        f.relative: (hashlib.sha256(Path(f.path).read_bytes()).hexdigest(), zlib.crc32(Path(f.path).read_bytes()))
        for f in local_files.list_files(data)
    }
    reads.clear()
    packed.clear()
    calls = Calls(s3)
    again = stage(data, store(s3), options)
    assert (reads, packed) == ([], []) and again.unchanged and again.uri == first.uri
    assert calls.writes() == {}


def test_a_shard_stage_with_every_hash_remembered_builds_once_the_version_is_new(
    s3: Any, data: Path, tmp_path: Path, reads: list[str], packed: list[str], not_racy: None
) -> None:
    """Hashes from the cache, a prefix where nothing is published: each file is read once, to be packed
    and checked against its remembered CRC-32, and the shard holds the files."""
    options = StageOptions(layout=SHARDS, hash_cache=tmp_path / "cache")
    stage(data, store(s3), options)
    reads.clear()
    packed.clear()
    other = stage(data, store(s3, "s3://bkt/elsewhere"), options)
    names = sorted(f.relative for f in local_files.list_files(data))
    assert sorted(packed) == names and [r for r in reads if r in names] == [] and not other.unchanged
    with tarfile.open(fileobj=io.BytesIO(objects(s3, "elsewhere/")[f"{other.version}/shard-000000.tar"])) as tar:
        assert {m.name: tar.extractfile(m).read() for m in tar.getmembers()} == {  # type: ignore[union-attr]
            name: (data / name).read_bytes() for name in names
        }


def content_name(data: Path, shard_size: int) -> str:
    """The version a stage that hashes first gives these files (manifest.version_of)."""
    entries = [
        FileEntry(h.file.relative, h.file.size, h.sha256) for h in local_files.hash_files(local_files.list_files(data))
    ]
    return version_of(SHARDS, entries, shard_size)


def test_a_first_stage_of_several_shards_reads_each_file_once_and_later_stages_find_its_content(
    s3: Any, data: Path, tmp_path: Path, reads: list[str], packed: list[str], not_racy: None
) -> None:
    """Nothing published and nothing hashed: no hashing pass before the shards (each file read once, to be
    packed and hashed), the version named from the scan, the content's name in the manifest beside it. A
    re-stage, with the hash cache or with every file touched and hashed again, finds it published."""
    options = StageOptions(layout=SHARDS, shard_size=2000, hash_cache=tmp_path / "cache")
    first = stage(data, store(s3), options)
    names = sorted(f.relative for f in local_files.list_files(data))
    assert sorted(packed) == names and [r for r in reads if r in names] == []  # read to be packed, never alone
    staged = objects(s3, f"datasets/cats/{first.version}/")
    assert sum(n.endswith(".tar") for n in staged) == 3 and unpacked(staged) == local(data)
    manifest = json.loads(objects(s3, "datasets/cats/")[MANIFEST_NAME])
    assert manifest["version"] == first.version != manifest["content"] == content_name(data, 2000)
    index = json.loads(staged[INDEX_NAME])
    assert {m["path"] for s in index["shards"] for m in s["members"]} == set(names)
    calls = Calls(s3)
    warm = stage(data, store(s3), options)
    for path in data.rglob("*.png"):
        os.utime(path)  # touched, not changed: the cache no longer vouches for them, their content does
    cold = stage(data, store(s3), options)
    assert warm.unchanged and cold.unchanged and warm.uri == cold.uri == first.uri and calls.writes() == {}


def test_a_changed_dataset_is_re_staged_in_one_pass_and_its_unchanged_shards_are_copied(
    s3: Any, data: Path, reads: list[str], packed: list[str], not_racy: None
) -> None:
    """A file added since the published version, no hash cache (another machine, or --no-hash-cache): the scan
    shows the content is not the published one (another path list), so each file is read once, to be packed and
    hashed, with no hashing pass first. The shards before the new file are byte-identical to the published ones:
    copied server-side, not sent again."""
    options = StageOptions(layout=SHARDS, shard_size=2000)  # two files a shard: 3 shards, then 4
    first = stage(data, store(s3), options)
    (data / "class1" / "img9.png").write_bytes(os.urandom(700))  # sorts last
    names = sorted(f.relative for f in local_files.list_files(data))
    reads.clear()
    calls = Calls(s3)
    second = stage(data, store(s3), options)
    assert sorted(packed[6:]) == names and [r for r in reads if r in names] == []  # after the first stage's 6
    assert sorted(second.copied) == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    assert sorted(second.uploaded) == [INDEX_NAME, "shard-000003.tar"] and calls.writes()["CopyObject"] == 3
    assert unpacked(objects(s3, f"datasets/cats/{second.version}/")) == local(data)
    manifest = json.loads(objects(s3, "datasets/cats/")[MANIFEST_NAME])
    assert manifest["version"] == second.version not in (first.version, content_name(data, 2000))
    assert manifest["content"] == content_name(data, 2000)


def test_a_file_rewritten_at_its_size_is_found_by_hashing_before_the_shards_are_built(
    s3: Any, data: Path, reads: list[str], packed: list[str], not_racy: None
) -> None:
    """Same paths and sizes as the published version: only the content can tell whether it is published, so the
    files are hashed first (an unchanged dataset is then found published with nothing built); here one changed."""
    options = StageOptions(layout=SHARDS, shard_size=2000)
    first = stage(data, store(s3), options)
    target = data / "class0" / "img0.png"
    target.write_bytes(os.urandom(target.stat().st_size))
    names = sorted(f.relative for f in local_files.list_files(data))
    reads.clear()
    second = stage(data, store(s3), options)
    assert sorted(r for r in reads if r in names) == names  # the hashing pass
    assert second.version == content_name(data, 2000) != first.version and not second.unchanged
    assert unpacked(objects(s3, f"datasets/cats/{second.version}/")) == local(data)


def test_an_interrupted_first_stage_of_several_shards_resumes_under_its_name_sending_only_the_rest(
    s3: Any, data: Path, tmp_path: Path, not_racy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = StageOptions(layout=SHARDS, shard_size=2000)
    interrupted = store(s3)
    real_upload = interrupted.upload
    sends = itertools.count()

    def crash_on_the_third(uploads: list[Any], on_done: Any) -> None:
        if next(sends) == 2:
            raise KeyboardInterrupt  # Ctrl-C once two shards are sent
        real_upload(uploads, on_done)

    monkeypatch.setattr(interrupted, "upload", crash_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        stage(data, interrupted, options)
    assert MANIFEST_NAME not in objects(s3, "datasets/cats/")  # nothing published
    calls = Calls(s3)
    resumed = stage(data, store(s3), options)
    assert sorted(resumed.resumed) == ["shard-000000.tar", "shard-000001.tar"]
    assert sorted(resumed.uploaded) == [INDEX_NAME, "shard-000002.tar"] and calls.writes()["PutObject"] == 3
    assert unpacked(objects(s3, f"datasets/cats/{resumed.version}/")) == local(data)
    touched = next(data.rglob("*.png"))
    os.utime(touched)  # a file written since: another name, not the shards of the interrupted run
    assert stage(data, store(s3, "s3://bkt/other"), options).version != resumed.version


def test_a_file_written_after_the_scan_fails_a_stage_that_hashes_it_while_packing(
    s3: Any, data: Path, tmp_path: Path, not_racy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same size, other bytes, after the first shard is sent: its stat gives it away when it is packed."""
    target = store(s3)
    real_upload = target.upload
    last = sorted(data.rglob("*.png"))[-1]

    def rewrite_the_last_file(uploads: list[Any], on_done: Any) -> None:
        last.write_bytes(os.urandom(last.stat().st_size))
        os.utime(last, ns=(last.stat().st_atime_ns, last.stat().st_mtime_ns + 10**9))  # even on a coarse clock
        real_upload(uploads, on_done)

    monkeypatch.setattr(target, "upload", rewrite_the_last_file)
    with pytest.raises(CloudDDPError, match=rf"{last.name}' changed while it was being staged"):
        stage(data, target, StageOptions(layout=SHARDS, shard_size=2000, shard_dir=tmp_path))
    assert MANIFEST_NAME not in objects(s3, "datasets/cats/")


def test_files_written_just_now_are_hashed_before_their_shards_and_name_the_version_by_content(
    s3: Any, data: Path, reads: list[str]
) -> None:
    """Within RACY_NS of a write a stat may not show the next one: the scan cannot name the version then."""
    result = stage(data, store(s3), StageOptions(layout=SHARDS, shard_size=2000))
    assert result.version == content_name(data, 2000) and len(reads) >= 6


def test_a_manifest_without_a_content_name_is_its_version() -> None:
    """Manifests written before the content name was recorded: their version is their content's name."""
    body = {"format": "cloudddp-manifest/1", "version": "v-0123456789abcdef", "layout": SHARDS, "files": [],
            "objects": []}  # fmt: skip
    old = Manifest.from_json(json.dumps(body).encode(), "s3://bkt/x/_cloudddp_manifest.json")
    assert old.content_name == "v-0123456789abcdef"
    assert json.loads(old.to_json())["content"] == "v-0123456789abcdef"


def test_a_cache_that_cannot_be_saved_costs_nothing_and_leaves_no_temp_file(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, not_racy: None
) -> None:
    cache = hash_cache.HashCache(tmp_path / "cache", data)
    hashed = local_files.hash_files(local_files.list_files(data))

    def refused(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied", dst)

    monkeypatch.setattr(hash_cache.os, "replace", refused)  # the temp file is written, its rename refused
    cache.save(hashed, None)
    assert list((tmp_path / "cache").iterdir()) == []
