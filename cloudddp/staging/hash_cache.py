"""Remembered content hashes, so re-staging an unchanged folder does not read every file again.

An entry is reused only while the file's (device, inode, size, mtime_ns, ctime_ns) are what they
were when it was hashed: any write changes mtime and ctime (ctime cannot be set back by a user),
a replaced file changes the inode. As git does for its index, a file modified within RACY_NS of
being hashed is not remembered: a write in the same timestamp tick could leave its stat unchanged.
One JSON file per staged folder, under `cache_dir()`; a damaged or foreign file is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, TypeGuard

from cloudddp.staging.local_files import Hashed, LocalFile

FORMAT = 2  # 2: with the CRC-32; a cache of format 1 is ignored (its files are hashed once more)
RACY_NS = 2_000_000_000  # coarse file-system timestamps (2 s on FAT) included
CACHE_VARIABLE = "CLOUDDDP_CACHE_DIR"


def cache_dir() -> Path:
    """$CLOUDDDP_CACHE_DIR, else $XDG_CACHE_HOME/cloudddp, else ~/.cache/cloudddp."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cloudddp"


def identity(file: LocalFile) -> list[int]:
    return [file.device, file.inode, file.size, file.mtime_ns, file.ctime_ns]


def settled(file: LocalFile, now_ns: int) -> bool:
    """True if the file was last written long enough before `now_ns` for its stat to stand for its content."""
    return now_ns - max(file.mtime_ns, file.ctime_ns) > RACY_NS


def well_formed(entry: object) -> TypeGuard[list[Any]]:
    """True for an entry as `save` writes it: [identity, sha256, md5, md5_part_size, crc32]."""
    return (
        isinstance(entry, list)
        and len(entry) == 5
        and isinstance(entry[1], str)
        and isinstance(entry[2], (str, type(None)))  # None: the store checks no MD5
        and type(entry[4]) is int  # bool is an int subclass, and the CRC-32 is always computed when hashing
    )


class HashCache:
    """Hashes of the files under one root folder, keyed by relative path."""

    def __init__(self, folder: Path, root: Path) -> None:
        digest = hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:24]  # fsencode: any bytes a path may hold
        self.path = Path(folder) / f"hashes-{digest}.json"
        self.entries: dict[str, list] = {}
        try:
            loaded = json.loads(self.path.read_text())
            if loaded.get("format") == FORMAT and isinstance(loaded.get("files"), dict):
                self.entries = loaded["files"]
        except (OSError, ValueError, AttributeError):
            pass  # no cache yet, or an unreadable one: hash everything

    def lookup(self, file: LocalFile, md5_part_size: int | None) -> Hashed | None:
        entry = self.entries.get(file.relative)
        # A damaged file may hold valid JSON of another shape: such an entry is ignored, the file hashed again.
        if not well_formed(entry) or entry[0] != identity(file) or entry[3] != md5_part_size:
            return None
        return Hashed(file, entry[1], entry[2], entry[4])

    def save(self, hashed: list[Hashed], md5_part_size: int | None) -> None:
        """Remember these hashes (and only these: files gone from the folder are forgotten)."""
        now = time.time_ns()
        entries = {
            h.file.relative: [identity(h.file), h.sha256, h.md5, md5_part_size, h.crc32]
            for h in hashed
            if settled(h.file, now)
        }
        if entries == self.entries:
            return  # nothing new: a no-op re-stage writes no cache file either
        self.entries = entries
        written = ""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, delete=False, suffix=".tmp") as out:
                written = out.name
                # dumps, not dump: json.dump encodes in pure Python (~3x slower for a few thousand entries)
                out.write(json.dumps({"format": FORMAT, "files": self.entries}, separators=(",", ":")))
            os.replace(written, self.path)
        except OSError:  # a cache that cannot be written only costs the next run a re-read
            if written:  # a disk that filled up mid-write: no half-written file left beside the cache
                with contextlib.suppress(OSError):
                    os.unlink(written)
