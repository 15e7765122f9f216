"""A concurrent `cloudddp stage --delete` to the same prefix removes the objects of another stage's version
before that one is published: the other stage must fail, publish nothing, and resume on the next run.

The concurrent delete is made deterministic: it runs between the last upload and the publication
(engine.check_accounted), where the real race lands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cloudddp.errors import CloudDDPError
from cloudddp.staging import engine
from cloudddp.staging.engine import StageOptions, delete_others, stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import MANIFEST_NAME, PLAIN, SHARDS
from cloudddp.staging.s3_store import S3Store

PREFIX = "datasets/cats"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for i in range(12):
        path = root / f"class{i % 2}" / f"img{i:02d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(3000))
    return root


def store(client: Any) -> S3Store:
    return S3Store(client, parse_location(f"s3://bkt/{PREFIX}"))


def keys(client: Any, prefix: str) -> dict[str, int]:
    listed = client.list_objects_v2(Bucket="bkt", Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix) :]: o["Size"] for o in listed}


def settle(root: Path) -> None:
    """Files older than hash_cache's racy window: a shard stage of several shards then takes the one-pass path."""
    for path in root.rglob("*"):
        os.utime(path, (1_700_000_000, 1_700_000_000))


@pytest.mark.parametrize("layout", [PLAIN, SHARDS])
def test_a_version_emptied_by_a_concurrent_delete_is_not_published_and_the_rerun_resends_only_that(
    s3: Any, data: Path, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settle(data)
    options = StageOptions(layout=layout, shard_size=8000)  # 12 x 3000 bytes: several shards
    real_check = engine.check_accounted
    removed: list[str] = []

    def another_stage_deletes(target: Any, manifest: Any, result: Any) -> None:
        real_check(target, manifest, result)
        # what `cloudddp stage other --delete` does once it has published its own version
        removed.extend(delete_others(store(s3), "v-0000000000000000"))

    monkeypatch.setattr(engine, "check_accounted", another_stage_deletes)
    with pytest.raises(CloudDDPError) as failed:
        stage(data, store(s3), options)
    assert removed, "the simulated --delete removed nothing: the test would prove nothing"
    version = removed[0][len(PREFIX) + 1 :].split("/")[0]
    message = str(failed.value)
    assert failed.value.exit_code == 2
    assert version in message and "concurrent `cloudddp stage --delete`" in message
    assert f"{len(removed)} of the " in message and "Nothing was published" in message
    assert "resends only what is missing" in message
    assert MANIFEST_NAME not in keys(s3, f"{PREFIX}/")  # nothing published

    monkeypatch.setattr(engine, "check_accounted", real_check)
    again = stage(data, store(s3), options)
    assert again.version == version and not again.unchanged
    assert len(again.uploaded) + len(again.copied) == len(removed)  # only what was removed is sent again
    listed = keys(s3, f"{PREFIX}/{version}/")
    manifest = engine.read_manifest(store(s3))
    assert manifest is not None and manifest.version == version
    assert all(listed.get(o.name) == o.size for o in manifest.objects)


def test_an_object_left_at_another_size_also_stops_the_publication(
    s3: Any, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_check = engine.check_accounted

    def overwritten(target: Any, manifest: Any, result: Any) -> None:
        real_check(target, manifest, result)
        name = manifest.objects[0].name
        s3.put_object(Bucket="bkt", Key=f"{PREFIX}/{manifest.version}/{name}", Body=b"short")

    monkeypatch.setattr(engine, "check_accounted", overwritten)
    with pytest.raises(CloudDDPError, match=r"1 of the 12 objects of version v-[0-9a-f]{16} .*another size"):
        stage(data, store(s3))
    assert MANIFEST_NAME not in keys(s3, f"{PREFIX}/")


def test_names_a_server_lists_otherwise_are_no_missing_objects_on_seaweedfs(
    seaweed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SeaweedFS lists `a\\b` as `a/b`: the check before publishing must not take such an object for a removed one."""
    for name, value in seaweed.env().items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "odd"
    (root / "cls").mkdir(parents=True)
    (root / "cls" / "back\\slash.txt").write_bytes(b"one")
    (root / "cls" / "plain.txt").write_bytes(b"two")
    from cloudddp.staging.s3_store import open_s3_store

    result = stage(root, open_s3_store(parse_location("s3://data/backslash"), "boto3"))
    manifest = seaweed.client().get_object(Bucket="data", Key=f"backslash/{MANIFEST_NAME}")["Body"].read()
    assert result.version.encode() in manifest
