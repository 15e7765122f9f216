"""What the staging algorithm needs from an object store; S3 and OCI each implement it.

Every method raises `CloudDDPError` with the bucket or object named; `upload` verifies
each object (the store checks a checksum the client computed from the bytes it scanned)
and calls `on_done` as each one lands, so progress and resume see completed objects.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cloudddp.staging.local_files import LocalFile
from cloudddp.staging.location import Location


@dataclass(frozen=True)
class Upload:
    key: str
    path: str | Path  # the file to send (a scanned file's path is a str: local_files.LocalFile)
    size: int
    sha256: str  # hex, of the bytes scanned
    md5: str | None = None  # where the store verifies with MD5: as it reports it (see local_files.Hashed)
    source: LocalFile | None = None  # the user's file (not a shard): checked for changes after the upload
    crc32: int | None = None  # of the bytes scanned (zlib.crc32); S3 stores check it where given, else the SHA-256


class ObjectStore(Protocol):
    location: Location
    md5_part_size: int | None  # uploads are verified with MD5s of parts this big (OCI); None: no MD5
    can_copy: bool  # server-side copies are cheap; otherwise unchanged objects are uploaded again

    def check_bucket(self, create: bool) -> bool:
        """Fail naming the bucket if it is missing (unless `create`) or not usable. True if created."""
        ...

    def list_sizes(self, prefix: str) -> dict[str, int]:
        """key -> size of every object whose key starts with `prefix`."""
        ...

    def read(self, key: str) -> bytes | None:
        """The object's bytes, or None if it does not exist."""
        ...

    def write(self, key: str, data: bytes) -> None:
        """A small object from memory, verified like an upload."""
        ...

    def upload(self, uploads: list[Upload], on_done: Callable[[Upload], None]) -> None:
        """Upload and verify every file, several at a time."""
        ...

    def copy(self, pairs: list[tuple[str, str]]) -> None:
        """Server-side copies (source key, destination key) within the bucket: no bytes from this machine."""
        ...

    def delete(self, keys: list[str]) -> None: ...


def upload_in_parallel(
    uploads: list[Upload], upload_one: Callable[[Upload], None], on_done: Callable[[Upload], None], workers: int
) -> None:
    """Run `upload_one` for every upload on `workers` threads, reporting each as it completes.

    The first failure cancels the uploads not yet started and is raised; objects already written
    stay (the manifest is written only after every upload, so a job never reads a partial version).
    """
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(upload_one, u): u for u in uploads}
        try:
            for future in as_completed(futures):
                future.result()
                on_done(futures[future])
        except BaseException:
            for future in futures:
                future.cancel()
            raise
