"""Shard layout: many small files packed into a few tar shards, plus an index.

The shards are plain POSIX tar files with the files' relative paths as member names, in
sorted order, so WebDataset reads them as samples (key = path without extension) and
`tarfile` reads them as files. Members carry fixed metadata (mtime 0, mode 0644, root
owner) so the same files always give byte-identical shards (and the same hashes: an
unchanged shard is never uploaded twice). `_cloudddp_index.json` lists every member's
shard, offset and size, so a reader can also seek straight to one file.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import queue
import tarfile
import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from cloudddp.errors import CloudDDPError
from cloudddp.staging.local_files import READ_BLOCK, ContentDigest, Hashed, LocalFile, unchanged_since_scan

INDEX_NAME = "_cloudddp_index.json"
INDEX_FORMAT = "cloudddp-shards/1"
DEFAULT_SHARD_SIZE = 256 * 1024 * 1024
Packable = Hashed | LocalFile  # a file hashed before (checked while packed) or not yet (hashed while packed)


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
    crc32: int = 0
    members: list[Member] = field(default_factory=list)


class HashingWriter:
    """A write-only file that hashes and counts what goes through it, writing and hashing on a thread.

    The caller (write_shard) reads each member and hashes it on its own: ~0.06 s for 2000 x 20 KiB on
    this machine. The shard's own SHA-256 (the manifest's record of it, and the signed payload hash of
    its PUT), its CRC-32 and the disk write take ~0.05 s more. hashlib, zlib and file writes release the
    GIL, so a second thread doing those overlaps the two: the build of 2000 x 20 KiB took 116 -> 91 ms
    (medians of 15, against the write and CRC-32 on the caller's thread; benchmarks/RESULTS-staging.md,
    run 14). Writes are gathered into ~1 MiB blocks: per-member writes and hand-overs cost more than the
    copy. At most BLOCKS_AHEAD blocks wait for the thread, so memory stays bounded whatever the shard's
    size. An error on the thread (a failed write) is raised by the next write or by close."""

    BLOCKS_AHEAD = 8

    def __init__(self, raw: IO[bytes], stop: threading.Event | None = None) -> None:
        self.raw, self.digest, self.crc32, self.written, self.stop = raw, hashlib.sha256(), 0, 0, stop
        self.pending: list[bytes] = []
        self.pending_size = 0
        self.error: Exception | None = None  # raised on the thread (a failed write)
        self.blocks: queue.Queue[bytes | None] = queue.Queue(maxsize=self.BLOCKS_AHEAD)
        self.thread = threading.Thread(target=self.write_blocks, name="cloudddp-shard-writer", daemon=True)
        self.thread.start()

    def write_blocks(self) -> None:
        while (block := self.blocks.get()) is not None:
            if self.error is not None:
                continue  # only drained after an error: the caller never waits on a full queue
            try:
                self.raw.write(block)
                self.digest.update(block)
                self.crc32 = zlib.crc32(block, self.crc32)
            except Exception as exc:  # ENOSPC, say: raised again in the caller's thread
                self.error = exc

    def write(self, data: bytes) -> int:
        self.pending.append(data)
        self.pending_size += len(data)
        self.written += len(data)
        if self.pending_size >= READ_BLOCK:
            if self.stop is not None and self.stop.is_set():
                raise Stopped  # checked here, not in flush: close() must still end the writing thread
            self.flush()
        return len(data)

    def flush(self) -> None:
        if self.error is not None:
            raise self.error
        self.hand_over()

    def hand_over(self) -> None:
        """Queue what is pending for the thread as one block (waits while BLOCKS_AHEAD blocks are queued)."""
        self.blocks.put(b"".join(self.pending))
        self.pending, self.pending_size = [], 0

    def hexdigest(self) -> str:
        """The digest of everything written; call once, after the last write (also ends the thread)."""
        self.close()
        return self.digest.hexdigest()

    def close(self) -> None:
        """Hand over what is pending and wait until it is written; a write error is raised here."""
        if self.thread.is_alive():
            self.hand_over()  # even after an error: the thread drains it, then ends on None
            self.blocks.put(None)
            self.thread.join()
        if self.error is not None:
            raise self.error


def plan_shards(files: Sequence[Packable], shard_size: int) -> list[list[Packable]]:
    """Greedy, in path order: a shard closes once it holds `shard_size` bytes."""
    groups: list[list[Packable]] = [[]]
    filled = 0
    for item in files:
        if groups[-1] and filled >= shard_size:
            groups.append([])
            filled = 0
        groups[-1].append(item)
        filled += file_of(item).size + 512
    return [g for g in groups if g]


def file_of(item: Packable) -> LocalFile:
    return item.file if isinstance(item, Hashed) else item


def member_info(file: LocalFile) -> tarfile.TarInfo:
    info = tarfile.TarInfo(file.relative)
    info.size, info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = (
        file.size, 0, 0o644, 0, 0, "", "",
    )  # fmt: skip
    return info


# A member's ustar header: with the fixed metadata above only the name, the size and the checksum vary, so
# the rest is a constant. Byte for byte what tarfile writes (tested); tarfile takes ~10x as long (45 µs each).
USTAR_FIXED = b"0000644\x000000000\x000000000\x00"  # mode, uid, gid
USTAR_TAIL = b"0" + b"\0" * 100 + b"ustar\x0000" + b"\0" * 247  # type, link name, magic, owner names, devices, prefix
USTAR_TAIL_SUM = 8 * ord(" ") + sum(USTAR_TAIL)  # the checksum counts its own field as eight spaces


def member_header(file: LocalFile) -> bytes:
    name, size = file.relative, file.size
    if len(name) > 100 or not name.isascii() or size >= 8**11:  # tarfile adds a pax header for these
        return member_info(file).tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    head = name.encode().ljust(100, b"\0") + USTAR_FIXED + b"%011o\0" % size + b"00000000000\0"  # mtime 0
    return head + b"%06o\0 " % (USTAR_TAIL_SUM + sum(head)) + USTAR_TAIL


def write_shard(
    shard: Shard, items: Sequence[Packable], md5_part_size: int | None, stop: threading.Event | None = None
) -> list[Hashed]:
    """Write one shard; return each member's hashes (see copy_member)."""
    hashed: list[Hashed] = []
    with open(shard.path, "wb") as raw:
        out = HashingWriter(raw, stop)
        try:
            for item in items:
                # Headers written by hand (not TarFile.addfile) so the data can be copied and hashed in one pass.
                file = file_of(item)
                out.write(member_header(file))
                shard.members.append(Member(file.relative, out.written, file.size))
                hashed.append(copy_member(item, out, md5_part_size))
                out.write(b"\0" * ((-file.size) % tarfile.BLOCKSIZE))
            out.write(b"\0" * (2 * tarfile.BLOCKSIZE))  # end of archive, then pad to a whole record as tar does
            out.write(b"\0" * ((-out.written) % tarfile.RECORDSIZE))
        finally:
            out.close()
        shard.size, shard.sha256, shard.crc32 = out.written, out.hexdigest(), out.crc32
    return hashed


def copy_member(item: Packable, out: HashingWriter, md5_part_size: int | None) -> Hashed:
    """Copy a file into the shard and return its hashes.

    A file not hashed yet (a LocalFile) is hashed from the very bytes copied: one read of it for both, and
    its SHA-256 runs beside the shard's, which the writer's thread computes (2000 x 20 KiB: ~0.15 s less
    CPU and ~0.06 s less wall time than hashing every file before the build; benchmarks/
    RESULTS-staging.md, run 11). Its stat after the copy must still be the scan's: a write since is an
    error, as the version may be named from the scan (engine.stage_shards_in_one_pass). A file hashed
    before (a Hashed, from the hash cache) is checked against those hashes: by its CRC-32 where it has one
    (an accidental change escapes it with odds of 2^-32, at ~8x less CPU than a SHA-256), else by its
    SHA-256. Either way the shard holds the bytes its member's hashes describe, or the file is named as
    changed."""
    file = file_of(item)
    scanned = item if isinstance(item, Hashed) else None
    by_crc = scanned is not None and scanned.crc32 is not None
    digest = ContentDigest(None if scanned else md5_part_size)  # fed only when not checked by CRC-32
    crc, copied = 0, 0
    for block in read_blocks(file):
        if by_crc:
            crc = zlib.crc32(block, crc)
        else:
            digest.update(block)
        out.write(block)
        copied += len(block)
    if scanned is None:  # hashed from these bytes: the file must not have been written since the scan
        same = unchanged_since_scan(file)
    else:
        same = crc == scanned.crc32 if by_crc else digest.hashed(file).sha256 == scanned.sha256
    if copied != file.size or not same:
        raise CloudDDPError(
            f"{file.path!r} changed while it was being staged (its size, content or modification time differs from "
            f"when it was scanned). Stage again once nothing writes to it."
        )
    return scanned or digest.hashed(file)


def read_blocks(file: LocalFile) -> Iterator[bytes]:
    """The file's first `file.size` bytes, in blocks; a read error names the file (a write error into the
    shard, raised in the caller, is not caught here: it names the shard folder)."""
    copied = 0
    try:
        with open(file.path, "rb", buffering=0) as source:
            while copied < file.size and (block := source.read(min(READ_BLOCK, file.size - copied))):
                copied += len(block)
                yield block
    except OSError as exc:
        raise CloudDDPError(f"cannot read {file.path!r}: {exc.strerror}.") from None


def build_shards(
    files: Sequence[Packable], folder: Path, shard_size: int, md5_part_size: int | None = None
) -> tuple[list[Shard], list[Hashed]]:
    """Pack `files` into tar shards under `folder`, hashing those not hashed yet; return the shards and every
    file's hashes, in order. Disk-full is an error naming the folder."""
    shards: list[Shard] = []
    hashed: list[Hashed] = []
    room = f"{sum(file_of(i).size for i in files) / 1e6:.0f} MB of shards in all"
    for number, items in enumerate(plan_shards(files, shard_size)):
        shard, members = build_shard(number, items, folder, md5_part_size, room)
        shards.append(shard)
        hashed += members
    return shards, hashed


def build_shard(
    number: int, items: Sequence[Packable], folder: Path, md5_part_size: int | None, room: str,
    stop: threading.Event | None = None,
) -> tuple[Shard, list[Hashed]]:  # fmt: skip
    """Shard number `number` of `items`, and their hashes; `room` says in the disk-full error how much space
    the shards need."""
    shard = Shard(shard_name(number), folder / shard_name(number))
    try:
        return shard, write_shard(shard, items, md5_part_size, stop)
    except OSError as exc:
        shard.path.unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise CloudDDPError(
                f"the shard folder {str(folder)!r} ran out of disk space while writing {shard.name} ({room}). "
                f"Pass --shard-dir with a folder on a bigger disk, or a smaller --shard-size."
            ) from None
        raise CloudDDPError(f"cannot write the shard {str(shard.path)!r}: {exc.strerror}.") from None
    except BaseException:
        shard.path.unlink(missing_ok=True)
        raise


def shard_name(number: int) -> str:
    return f"shard-{number:06d}.tar"


Built = tuple[Shard, list[Hashed]]  # a shard and its members' hashes, in order


class Stopped(Exception):
    """The background builder was told to stop: the stage failed or was interrupted while sending."""


class BackgroundBuilder:
    """Builds the shards of `groups` one after another on a thread while the caller sends those already
    built: `with BackgroundBuilder(...) as built: for shard, hashed in built: ...` (`hashed`: its members'
    hashes, from the bytes packed where a member was not hashed before). At most one finished shard
    waits, so the folder holds at most three (one being sent, one waiting, one being built) whatever the
    dataset's size, and the caller deletes each once sent. A build error is raised in the caller's loop;
    leaving the `with` early stops the build within ~1 MiB of writing."""

    def __init__(self, groups: list[list[Packable]], folder: Path, md5_part_size: int | None, shard_size: int) -> None:
        self.groups, self.folder, self.md5_part_size = groups, folder, md5_part_size
        self.room = f"room for about 3 shards of {shard_size / 1e6:.0f} MB (--shard-size)"
        self.ready: queue.Queue[Built | BaseException | None] = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.build_all, name="cloudddp-shard-builder", daemon=True)

    def __enter__(self) -> BackgroundBuilder:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()

    def __iter__(self) -> Iterator[Built]:
        while (item := self.ready.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    def build_all(self) -> None:
        try:
            for number, items in enumerate(self.groups):
                self.hand_over(build_shard(number, items, self.folder, self.md5_part_size, self.room, self.stop))
            self.hand_over(None)
        except Stopped:
            pass
        except BaseException as exc:  # raised again in the caller's thread
            with contextlib.suppress(Stopped):
                self.hand_over(exc)

    def hand_over(self, item: Built | BaseException | None) -> None:
        """Queue `item` for the caller; Stopped once the caller has left (it takes nothing more)."""
        while not self.stop.is_set():
            try:
                self.ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise Stopped


def planned_size(items: Sequence[Packable]) -> int:
    """The size write_shard will give the shard of `items` (for progress totals before it is built)."""
    files = [file_of(i) for i in items]
    size = sum(len(member_header(f)) + f.size + (-f.size) % tarfile.BLOCKSIZE for f in files) + 2 * tarfile.BLOCKSIZE
    return size + (-size) % tarfile.RECORDSIZE


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
