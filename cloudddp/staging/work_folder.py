"""The folder a `--shards` stage builds its tar shards in, and the cleaning of ones a killed stage left.

A stage deletes its folder when it ends, even on Ctrl-C; `kill -9` (or a lost machine) gives it no chance, and
the shard it was writing, up to `--shard-size` bytes, stayed in the temp folder for good. Each folder now holds a
lock file its stage keeps locked (`flock`) while it runs. The kernel drops that lock when the process dies,
however it dies, so the next stage that can take the lock of a sibling folder knows no stage is using it and
removes it. A folder is made under a hidden name, locked, and only then renamed, so no stage ever sees
another's folder unlocked. A folder without a lock file (one written by an older cloudddp) is left alone:
nothing is removed on a guess. Across machines (a shared --shard-dir) this holds where the filesystem's flock
reaches every client (NFS does since Linux 2.6.12, unless mounted with local_lock or nolock).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from cloudddp.errors import CloudDDPError

try:
    import fcntl
except ImportError:  # Windows: no flock, so nothing is cleaned (and nothing wrongly removed)
    fcntl = None  # type: ignore[assignment]

PREFIX = "cloudddp-shards-"
HIDDEN_PREFIX = ".cloudddp-shards-new-"  # while being made: no cleaner looks at it
LOCK_NAME = ".in-use"


def _lock(path: Path, create: bool) -> int | None:
    """An open descriptor holding an exclusive lock on `path`, or None if another process holds it (or, unless
    `create`, there is no such file)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0), 0o600)
    except OSError:
        if create:
            raise
        return None  # gone (another stage cleaned it), or not ours to open
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


class ShardWorkFolder:
    """A fresh folder for one stage's shards, locked for as long as the stage runs; `remove()` when done."""

    def __init__(self, path: Path, lock_fd: int | None) -> None:
        self.path = path
        self.lock_fd = lock_fd

    @classmethod
    def create(cls, parent: Path | None) -> ShardWorkFolder:
        try:
            # Made under a name cleaners pass over, locked, then renamed: no cleaner sees it before it is locked
            # (between creating the lock file and locking it, another stage took it for abandoned and removed it).
            hidden = Path(tempfile.mkdtemp(prefix=HIDDEN_PREFIX, dir=parent))
            lock_fd = _lock(hidden / LOCK_NAME, create=True)
            path = hidden.with_name(PREFIX + hidden.name[len(HIDDEN_PREFIX) :])
            hidden.rename(path)
        except OSError as exc:
            where = str(parent) if parent else tempfile.gettempdir()
            raise CloudDDPError(
                f"cannot create a folder for the shards in {where!r} (--shard-dir): {exc.strerror}."
            ) from None
        remove_abandoned(path.parent, keep=path)
        return cls(path, lock_fd)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def remove_abandoned(parent: Path, keep: Path) -> list[Path]:
    """Remove the shard folders in `parent` no running stage holds (see the module's note); return them."""
    removed = []
    try:
        siblings = [entry for entry in parent.iterdir() if entry.name.startswith(PREFIX) and entry != keep]
    except OSError:
        return removed  # a parent we cannot list is not ours to clean
    for folder in siblings:
        fd = _lock(folder / LOCK_NAME, create=False)
        if fd is None:
            continue  # a running stage's, one without a lock file, or another user's
        try:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            os.close(fd)
    return removed
