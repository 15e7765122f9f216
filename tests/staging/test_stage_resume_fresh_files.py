"""Ctrl-C on a shard stage of files just written, then a rerun once they are older than the racy window: the
first run named its version from the content (files too fresh for the scan's name), the rerun must still find
that version and keep its finished shards, not name another from the scan and send everything again."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from cloudddp.staging import hash_cache
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import SHARDS
from cloudddp.staging.s3_store import S3Store

PREFIX = "datasets/cats"


def write_files(root: Path, count: int = 20) -> Path:
    """`count` files of 3000 bytes: with --shard-size 3000, one shard each."""
    for i in range(count):
        (root / f"part{i // 10}").mkdir(parents=True, exist_ok=True)
        (root / f"part{i // 10}" / f"{i:02d}.bin").write_bytes(os.urandom(3000))
    return root


def store(client: Any) -> S3Store:
    return S3Store(client, parse_location(f"s3://bkt/{PREFIX}"))


def options(tmp_path: Path) -> StageOptions:
    return StageOptions(layout=SHARDS, shard_size=3000, hash_cache=tmp_path / "cache")


def interrupted_after(client: Any, finished: int) -> S3Store:
    """A store whose uploads stop with Ctrl-C once `finished` shards are sent (they are sent one at a time)."""
    target = store(client)
    real_upload_one = target.upload_one
    started = itertools.count()

    def crash(upload: Any) -> None:
        if next(started) >= finished:
            raise KeyboardInterrupt
        real_upload_one(upload)

    target.upload_one = crash  # type: ignore[method-assign]
    return target


def folders(client: Any) -> set[str]:
    listed = client.list_objects_v2(Bucket="bkt", Prefix=f"{PREFIX}/v-").get("Contents", [])
    return {o["Key"][len(PREFIX) + 1 :].split("/")[0] for o in listed}


def test_a_rerun_once_the_files_settled_resumes_the_version_the_fresh_run_named_from_the_content(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = write_files(tmp_path / "data")  # just written: the first run hashes first and names from the content
    with pytest.raises(KeyboardInterrupt):
        stage(data, interrupted_after(s3, 5), options(tmp_path))
    (interrupted,) = folders(s3)
    monkeypatch.setattr(hash_cache, "RACY_NS", 0)  # time passes: every file is settled now
    again = stage(data, store(s3), options(tmp_path))
    assert again.version == interrupted and folders(s3) == {interrupted}  # no orphaned version
    assert len(again.resumed) == 5 and not set(again.uploaded) & set(again.resumed)
    assert len(again.uploaded) == 20 - 5 + 1  # the rest and the index


def test_a_rerun_of_a_scan_named_interrupted_stage_still_resumes_in_one_pass(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = write_files(tmp_path / "data")
    monkeypatch.setattr(hash_cache, "RACY_NS", 0)  # settled from the start: the first run names from the scan
    with pytest.raises(KeyboardInterrupt):
        stage(data, interrupted_after(s3, 5), options(tmp_path))
    (interrupted,) = folders(s3)
    again = stage(data, store(s3), options(tmp_path))
    assert again.version == interrupted and len(again.resumed) == 5


def test_a_clean_first_stage_and_a_changed_dataset_still_take_the_one_pass_path(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named from the scan: the manifest's content name differs from the version. A version published before
    (and not deleted) is no interrupted stage, so it does not send the next stage down the hash-first path."""
    monkeypatch.setattr(hash_cache, "RACY_NS", 0)
    data = write_files(tmp_path / "data")
    first = stage(data, store(s3), StageOptions(layout=SHARDS, shard_size=3000))
    (data / "part0" / "extra.bin").write_bytes(os.urandom(3000))
    second = stage(data, store(s3), StageOptions(layout=SHARDS, shard_size=3000))
    assert folders(s3) == {first.version, second.version}
    for result in (first, second):
        assert len(result.uploaded) + len(result.copied) >= 2
    from cloudddp.staging.engine import read_manifest

    manifest = read_manifest(store(s3))
    assert manifest is not None and manifest.version == second.version and manifest.content != second.version
