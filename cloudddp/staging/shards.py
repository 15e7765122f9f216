"""Shard layout: many small files packed into a few tar shards, plus an index.

The shards are plain POSIX tar files with the files' relative paths as member names, in
sorted order, so WebDataset reads them as samples (key = path without extension) and
`tarfile` reads them as files. Members carry fixed metadata (mtime 0, mode 0644, root
owner) so the same files always give byte-identical shards (and the same hashes: an
unchanged shard is never uploaded twice). `_cloudddp_index.json` lists every member's
shard, offset and size, so a reader can also seek straight to one file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import queue
import tarfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from cloudddp.errors import CloudDDPError
from cloudddp.staging.local_files import READ_BLOCK, Hashed

INDEX_NAME = "_cloudddp_index.json"
INDEX_FORMAT = "cloudddp-shards/1"
DEFAULT_SHARD_SIZE = 256 * 1024 * 1024


@dataclass
class Member:
    path: str
    offset: int  # of the data, from the start of the shard
    size: int


@dataclass
class Shard:
    name: str
    path: Path
    size: int = 0
    sha256: str = ""
    members: list[Member] = field(default_factory=list)


class HashingWriter:
    """A write-only file that hashes and counts what goes through it.

    The shard's SHA-256 is computed on a second thread: the builder's own thread is busy checking
    each member's SHA-256, and hashlib releases the GIL, so the two digests use two cores (SHA-256
    is most of a shard build's time: ~0.7 s of 0.8 s for 2000 files of 20 KiB, measured)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw, self.digest, self.written = raw, hashlib.sha256(), 0
        self.blocks: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.hasher = threading.Thread(target=self.hash_blocks, daemon=True)
        self.hasher.start()

    def hash_blocks(self) -> None:
        while (block := self.blocks.get()) is not None:
            self.digest.update(block)

    def write(self, data: bytes) -> int:
        self.raw.write(data)
        self.blocks.put(data)
        self.written += len(data)
        return len(data)

    def hexdigest(self) -> str:
        """The digest of everything written; call once, after the last write (also ends the thread)."""
        self.close()
        return self.digest.hexdigest()

    def close(self) -> None:
        if self.hasher.is_alive():
            self.blocks.put(None)
            self.hasher.join()


def plan_shards(files: list[Hashed], shard_size: int) -> list[list[Hashed]]:
    """Greedy, in path order: a shard closes once it holds `shard_size` bytes."""
    groups: list[list[Hashed]] = [[]]
    filled = 0
    for item in files:
        if groups[-1] and filled >= shard_size:
            groups.append([])
            filled = 0
        groups[-1].append(item)
        filled += item.file.size + 512
    return [g for g in groups if g]


def member_info(item: Hashed) -> tarfile.TarInfo:
    info = tarfile.TarInfo(item.file.relative)
    info.size, info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = (
        item.file.size, 0, 0o644, 0, 0, "", "",
    )  # fmt: skip
    return info


# A member's ustar header: with the fixed metadata above only the name, the size and the checksum vary, so
# the rest is a constant. Byte for byte what tarfile writes (tested); tarfile takes ~10x as long (45 µs each).
USTAR_FIXED = b"0000644\x000000000\x000000000\x00"  # mode, uid, gid
USTAR_TAIL = b"0" + b"\0" * 100 + b"ustar\x0000" + b"\0" * 247  # type, link name, magic, owner names, devices, prefix
USTAR_TAIL_SUM = 8 * ord(" ") + sum(USTAR_TAIL)  # the checksum counts its own field as eight spaces


def member_header(item: Hashed) -> bytes:
    name, size = item.file.relative, item.file.size
    if len(name) > 100 or not name.isascii() or size >= 8**11:  # tarfile adds a pax header for these
        return member_info(item).tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    head = name.encode().ljust(100, b"\0") + USTAR_FIXED + b"%011o\0" % size + b"00000000000\0"  # mtime 0
    return head + b"%06o\0 " % (USTAR_TAIL_SUM + sum(head)) + USTAR_TAIL


def write_shard(shard: Shard, items: list[Hashed]) -> None:
    """Write one shard; a file whose bytes no longer match its scanned hash is an error naming it."""
    with open(shard.path, "wb") as raw:
        out = HashingWriter(raw)
        try:
            for item in items:
                # Headers written by hand (not TarFile.addfile) so the data can be copied and hashed in one pass.
                out.write(member_header(item))
                shard.members.append(Member(item.file.relative, out.written, item.file.size))
                copy_checked(item, out)
                out.write(b"\0" * ((-item.file.size) % tarfile.BLOCKSIZE))
            out.write(b"\0" * (2 * tarfile.BLOCKSIZE))  # end of archive, then pad to a whole record as tar does
            out.write(b"\0" * ((-out.written) % tarfile.RECORDSIZE))
        finally:
            out.close()
        shard.size, shard.sha256 = out.written, out.hexdigest()


def copy_checked(item: Hashed, out: HashingWriter) -> None:
    digest, copied = hashlib.sha256(), 0
    with open(item.file.path, "rb") as source:
        while copied < item.file.size and (block := source.read(min(READ_BLOCK, item.file.size - copied))):
            digest.update(block)
            out.write(block)
            copied += len(block)
    if copied != item.file.size or digest.hexdigest() != item.sha256:
        raise CloudDDPError(
            f"{str(item.file.path)!r} changed while it was being staged (its size or content differs from when it was "
            f"scanned). Stage again once nothing writes to it."
        )


def build_shards(
    files: list[Hashed], folder: Path, shard_size: int, on_shard: Callable[[Shard], None] | None = None
) -> list[Shard]:
    """Pack `files` into tar shards under `folder`; disk-full is an error naming the folder."""
    shards: list[Shard] = []
    for number, items in enumerate(plan_shards(files, shard_size)):
        shard = Shard(f"shard-{number:06d}.tar", folder / f"shard-{number:06d}.tar")
        try:
            write_shard(shard, items)
        except OSError as exc:
            shard.path.unlink(missing_ok=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise CloudDDPError(
                    f"the shard folder {str(folder)!r} ran out of disk space while writing {shard.name} "
                    f"({sum(i.file.size for i in files) / 1e6:.0f} MB of shards in all). Pass --shard-dir with a "
                    f"folder on a bigger disk."
                ) from None
            raise CloudDDPError(f"cannot write the shard {str(shard.path)!r}: {exc.strerror}.") from None
        shards.append(shard)
        if on_shard:
            on_shard(shard)
    return shards


def index_json(shards: list[Shard]) -> bytes:
    body = {
        "format": INDEX_FORMAT,
        "shards": [
            {"name": s.name, "size": s.size, "sha256": s.sha256,
             "members": [{"path": m.path, "offset": m.offset, "size": m.size} for m in s.members]}
            for s in shards
        ],
    }  # fmt: skip
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()  # no indent: C encoder, ~5x faster
