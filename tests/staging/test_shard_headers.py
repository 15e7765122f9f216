"""Shard member headers (staging/shards.py `member_header`) are byte for byte what Python's tarfile
writes for the same member, so shards stay identical (same SHA-256, same version) whichever path
wrote them, and every tar reader reads them."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from cloudddp.staging.local_files import LocalFile
from cloudddp.staging.shards import member_header, member_info


def item(relative: str, size: int) -> LocalFile:
    return LocalFile(relative, "/unused", size, 0)


@pytest.mark.parametrize(
    ("relative", "size"),
    [
        ("d0/e1/f0001.jpg", 20480),
        ("a b/c+d=e~f.txt", 0),
        ("x" * 100, 7),  # the longest name ustar holds
        ("x" * 101, 7),  # tarfile writes a pax header: so does member_header
        ("chats/été/ça.png", 123),  # not ASCII: pax header too
        ("huge.bin", 8**11 - 1),  # the largest size 11 octal digits hold
        ("huger.bin", 8**11),  # pax header for the size
    ],
)
def test_each_header_equals_tarfiles(relative: str, size: int) -> None:
    expected = member_info(item(relative, size)).tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    assert member_header(item(relative, size)) == expected


def test_a_tar_of_these_headers_reads_back_with_tarfile() -> None:
    members = {"d0/a.bin": b"alpha", "d1/b c.bin": b"b" * 700, "x" * 120: b"long name"}
    raw = io.BytesIO()
    for name, data in members.items():
        raw.write(member_header(item(name, len(data))) + data + b"\0" * (-len(data) % 512))
    raw.write(b"\0" * 1024)
    raw.seek(0)
    with tarfile.open(fileobj=raw) as tar:
        assert {m.name: tar.extractfile(m).read() for m in tar.getmembers()} == members  # type: ignore[union-attr]


def test_planned_size_is_the_size_of_the_shard_written(tmp_path: Path) -> None:
    """What the progress bar is told before a shard is built (shards.planned_size) is what write_shard writes."""
    import os

    from cloudddp.staging.local_files import list_files
    from cloudddp.staging.shards import build_shards, planned_size

    for name, size in (("a.bin", 0), ("b/c.bin", 511), ("x" * 120 + ".bin", 513), ("été.png", 10_240), ("z", 20_000)):
        (tmp_path / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / name).write_bytes(os.urandom(size))
    files = list_files(tmp_path / "data")
    (tmp_path / "out").mkdir()
    for chosen in (files, files[:1], files[2:4]):
        (shard,), _ = build_shards(chosen, tmp_path / "out", 1 << 30)
        assert planned_size(chosen) == shard.size == shard.path.stat().st_size
