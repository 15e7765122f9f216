"""The local side of staging: which files a folder holds, and their content hashes.

Hashes are of the content (SHA-256, and MD5 where the store verifies with it), never
mtimes: a touched but unchanged file is not uploaded again. Symlinks to files are
followed; a symlink loop or a dangling link is an error naming the path.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError

READ_BLOCK = 1024 * 1024
HASH_THREADS = 4  # hashlib releases the GIL on large buffers: two cores stay busy
# Files are handed to the threads in batches of about this many bytes (at most HASH_BATCH_FILES files): one
# task per 20 KiB file cost more in hand-overs than it saved (2000 such files: 0.31 s wall, 0.48 s CPU in 4
# threads against 0.25 s in one; in 4 MiB batches 0.14 s wall, 0.25 s CPU; best of 5 each).
HASH_BATCH_BYTES = 4 * 1024 * 1024
HASH_BATCH_FILES = 256


# slots: a few thousand of these per stage, and a frozen dataclass with slots is built ~2x as fast (3.5 -> 1.9 ms
# per 2000 here).
@dataclass(frozen=True, slots=True)
class LocalFile:
    relative: str  # POSIX path under the staged folder: the object name below the version prefix
    # The path to open, as the scan found it. A str, not a Path: a Path per file cost the scan of 2000 files more
    # than its stat calls (17 -> 7 ms with the folders walked as str too).
    path: str
    size: int
    mtime_ns: int
    # With size and mtime, what the hash cache (hash_cache.py) compares to trust a remembered hash.
    ctime_ns: int = 0
    device: int = 0
    inode: int = 0


@dataclass(frozen=True, slots=True)
class Hashed:
    file: LocalFile
    sha256: str  # hex
    # The MD5 as OCI Object Storage reports it: base64 of the bytes' MD5, or for a file uploaded in parts
    # "<base64 MD5 of the parts' MD5s>-<part count>". None when the store does not check MD5s.
    md5: str | None
    # zlib's CRC-32 of the bytes (S3's `x-amz-checksum-crc32`): what each PUT and each shard member is checked
    # against. zlib computes it ~8x faster than SHA-256 here (2.8 GB/s against 350 MB/s), and SeaweedFS spent
    # ~1.2 s less CPU on 256 MiB checking it than `x-amz-checksum-sha256` (s3_http.checksum_header). None where it
    # was not computed (an Upload built by hand).
    crc32: int | None = None


def list_files(root: Path) -> list[LocalFile]:
    """Every regular file under `root` (or `root` itself), sorted by relative path."""
    if not root.exists() and not root.is_symlink():
        raise CloudDDPError(f"the local path {str(root)!r} to stage does not exist.")
    if root.is_file():
        check_utf8(root.name, str(root), root.parent)
        return [describe(root, root.name)]
    if not root.is_dir():
        raise CloudDDPError(
            f"the local path {str(root)!r} to stage is neither a file nor a folder (a broken symlink?)."
        )
    found: list[LocalFile] = []
    walk(root, str(root), frozenset(), found)
    found.sort(key=lambda f: f.relative)
    return found


def walk(
    root: Path, folder: str, ancestors: frozenset[tuple[int, int]], found: list[LocalFile], under: str = ""
) -> None:
    # os.walk(followlinks=True) would loop forever on a cycle: a folder that is one of its own ancestors (device,
    # inode) is a loop. Two links to one folder side by side are not: its files are staged under both paths.
    try:
        stat = os.stat(folder)
    except OSError as exc:
        raise CloudDDPError(f"cannot read the folder {folder!r}: {exc.strerror}.") from None
    here = (stat.st_dev, stat.st_ino)
    if here in ancestors:
        raise CloudDDPError(f"symlink loop under {str(root)!r}: {folder!r} leads back to a folder that holds it.")
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise CloudDDPError(f"cannot read the folder {folder!r}: {exc.strerror}.") from None
    for entry in entries:
        if not entry.name.isascii():
            check_utf8(entry.name, entry.path, root)
        try:
            is_dir = entry.is_dir(follow_symlinks=True)
            is_file = entry.is_file(follow_symlinks=True)
        except OSError as exc:  # ELOOP: a link pointing at itself
            raise CloudDDPError(f"cannot follow {entry.path!r} under {str(root)!r}: {exc.strerror}.") from None
        if is_dir:
            walk(root, entry.path, ancestors | {here}, found, f"{under}{entry.name}/")
        elif is_file:  # the relative path built as a string: Path.relative_to per file costs more than the stat
            found.append(describe(entry.path, under + entry.name))
        elif entry.is_symlink() and not os.path.exists(entry.path):
            raise CloudDDPError(f"{entry.path!r} under {str(root)!r} is a broken symlink (or a symlink loop).")
        else:  # never skipped without a word: a dataset short of a file would go unnoticed
            raise CloudDDPError(
                f"{entry.path!r} under {str(root)!r} is {'a link to ' if entry.is_symlink() else ''}neither a file nor "
                f"a folder (a device, FIFO or socket), so it has no content to stage. Move it out of the folder."
            )


def check_utf8(name: str, path: str, root: Path) -> None:
    """Object keys (S3's and OCI's) and the manifest are UTF-8: a name whose bytes are not UTF-8 (Python hands
    them over as surrogate escapes) has no key to go to. An error naming it, rather than skipping it (a dataset
    silently short of a file) or a mangled key."""
    try:
        name.encode()
    except UnicodeEncodeError:
        raise CloudDDPError(
            f"{path!r} under {str(root)!r} has a name that is not valid UTF-8, so it cannot be an object key "
            f"(S3 and OCI Object Storage keys are UTF-8). Rename it (e.g. `convmv -f latin1 -t utf8`) and stage again."
        ) from None


# Object names: OCI takes 1 to 1024 characters, any but line feed, carriage return and NUL (Object Storage docs,
# "Managing Objects", Object Names: docs.oracle.com/en-us/iaas/Content/Object/Tasks/managingobjects.htm); S3 a key
# whose UTF-8 is at most 1024 bytes (S3 user guide, "Naming Amazon S3 objects"), listed in XML, where a carriage
# return reads back as a line feed (same page, "XML related object key constraints").
MAX_KEY_BYTES = 1024
REFUSED_IN_KEYS = {"\n": "a line feed", "\r": "a carriage return", "\0": "a NUL"}


def check_keys(files: list[LocalFile], key_of: Callable[[str], str], root: Path) -> None:
    """Every file's object name (`key_of` its relative path) is one S3 and OCI Object Storage both store: refused
    before anything is uploaded, naming the file, rather than by the service halfway through the upload."""
    for file in files:
        if refused := [what for char, what in REFUSED_IN_KEYS.items() if char in file.relative]:
            raise CloudDDPError(
                f"{file.path!r} under {str(root)!r} has {' and '.join(refused)} in its name, which cannot be in an "
                f"object name (OCI Object Storage refuses it; S3 lists a carriage return as a line feed). Rename it, "
                f"or stage with --shards (names are then kept inside the shards), and stage again."
            )
        key = key_of(file.relative)
        if len(key.encode()) > MAX_KEY_BYTES:
            raise CloudDDPError(
                f"{file.path!r} under {str(root)!r} would be the object {key!r}, {len(key.encode())} bytes long "
                f"with the prefix and version folder: S3 and OCI Object Storage take names of at most "
                f"{MAX_KEY_BYTES} bytes. Shorten its path or the prefix, or stage with --shards (names are then kept "
                f"inside the shards), and stage again."
            )


def describe(path: str | Path, relative: str) -> LocalFile:
    where = os.fspath(path)
    try:
        stat = os.stat(where)
    except OSError as exc:
        raise CloudDDPError(f"cannot read {where!r}: {exc.strerror}.") from None
    return LocalFile(relative, where, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_dev, stat.st_ino)


class ContentDigest:
    """SHA-256 and CRC-32 of bytes fed in order and, with `md5_part_size`, their MD5 as OCI reports it."""

    def __init__(self, md5_part_size: int | None = None) -> None:
        self.sha, self.crc, self.md5_part_size = hashlib.sha256(), 0, md5_part_size
        self.md5 = hashlib.md5(usedforsecurity=False) if md5_part_size else None
        self.parts: list[bytes] = []  # the MD5 of each finished part
        self.in_part = 0

    def update(self, block: bytes) -> None:
        self.sha.update(block)
        self.crc = zlib.crc32(block, self.crc)
        while self.md5_part_size and self.md5 and block:
            take = block[: self.md5_part_size - self.in_part]
            self.md5.update(take)
            self.in_part += len(take)
            block = block[len(take) :]
            if self.in_part == self.md5_part_size:
                self.parts.append(self.md5.digest())
                self.md5, self.in_part = hashlib.md5(usedforsecurity=False), 0

    def hashed(self, file: LocalFile) -> Hashed:
        md5 = oci_md5(self.md5, self.parts, self.in_part) if self.md5 else None
        return Hashed(file, self.sha.hexdigest(), md5, self.crc)


def hash_file(file: LocalFile, md5_part_size: int | None = None) -> Hashed:
    """SHA-256 and CRC-32 of the content and, with `md5_part_size`, its MD5 (per part above that size), in one read."""
    digest = ContentDigest(md5_part_size)
    block_size = min(READ_BLOCK, max(file.size, 1))  # a small file in one read, without a 1 MiB buffer
    try:
        with open(file.path, "rb", buffering=0) as handle:
            while block := handle.read(block_size):
                digest.update(block)
    except OSError as exc:
        raise CloudDDPError(f"cannot read {file.path!r}: {exc.strerror}.") from None
    return digest.hashed(file)


def oci_md5(last: Any, parts: list[bytes], in_last: int) -> str:
    if in_last or not parts:
        parts.append(last.digest())
    if len(parts) == 1:
        return base64.b64encode(parts[0]).decode()
    combined = hashlib.md5(b"".join(parts), usedforsecurity=False).digest()
    return f"{base64.b64encode(combined).decode()}-{len(parts)}"


def recall(files: list[LocalFile], md5_part_size: int | None, cache: Any | None) -> list[Hashed | LocalFile]:
    """Each file's remembered hashes from `cache` (a hash_cache.HashCache), or the file itself where none holds."""
    if cache is None:
        return list(files)
    return [cache.lookup(f, md5_part_size) or f for f in files]


def hash_files(files: Iterable[LocalFile], md5_part_size: int | None = None, cache: Any | None = None) -> list[Hashed]:
    """Content hashes of many files, a few at a time, in the input order; `cache` (a hash_cache.HashCache)
    answers for files whose stat has not changed since it hashed them, and remembers the rest."""
    return hash_known(recall(list(files), md5_part_size, cache), md5_part_size, cache)


def hash_known(known: list[Hashed | LocalFile], md5_part_size: int | None, cache: Any | None) -> list[Hashed]:
    """hash_files for what `recall` answered: each LocalFile is hashed, the Hashed are kept."""
    missing = [f for f in known if isinstance(f, LocalFile)]
    if missing:  # threads only for files to read: handing thousands of cache hits to a pool costs more
        with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
            done = pool.map(lambda batch: [hash_file(f, md5_part_size) for f in batch], hash_batches(missing))
            fresh = iter([hashed for batch in done for hashed in batch])
        known = [next(fresh) if isinstance(h, LocalFile) else h for h in known]
    hashed: list[Hashed] = known  # type: ignore[assignment]  # every LocalFile was replaced above
    if cache:
        cache.save(hashed, md5_part_size)
    return hashed


def hash_batches(files: list[LocalFile]) -> list[list[LocalFile]]:
    """`files` in order, cut into runs of about HASH_BATCH_BYTES (a large file alone in its batch)."""
    batches: list[list[LocalFile]] = [[]]
    size = 0
    for file in files:
        if batches[-1] and (size + file.size > HASH_BATCH_BYTES or len(batches[-1]) >= HASH_BATCH_FILES):
            batches.append([])
            size = 0
        batches[-1].append(file)
        size += file.size
    return batches


def unchanged_since_scan(file: LocalFile) -> bool:
    """True if the file still has the size and mtime it had when it was hashed."""
    try:
        stat = os.stat(file.path)
    except OSError:
        return False
    return (stat.st_size, stat.st_mtime_ns) == (file.size, file.mtime_ns)
