"""What the staging algorithm needs from an object store; S3 and OCI each implement it.

Every method raises `CloudDDPError` with the bucket or object named; `upload` verifies
each object (the store checks a checksum the client computed from the bytes it scanned)
and calls `on_done` as each one lands, so progress and resume see completed objects.
"""

from __future__ import annotations

import queue
import signal
import threading
from collections.abc import Callable
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

    @property
    def md5_part_size(self) -> int | None: ...  # uploads are verified with MD5s of parts this big (OCI); None: none

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

    The first failure of an upload stops those not yet started, waits for those in flight and is raised; objects
    already written stay (the manifest is written only after every upload, so a job never reads a partial version).
    An interrupt of the calling thread (KeyboardInterrupt, or cli.Terminated for SIGTERM, raised by a signal handler
    or `on_done`) is raised at once, without waiting for the uploads in flight: they run on daemon threads, which the
    process does not wait for at exit (a ThreadPoolExecutor's are joined, by its `with` and again at interpreter
    exit), and an object only exists once its upload completed, so an abandoned one leaves nothing a rerun would
    take for finished.
    """
    pending: queue.SimpleQueue[Upload] = queue.SimpleQueue()
    for upload in uploads:
        pending.put(upload)
    finished: queue.SimpleQueue[tuple[Upload, BaseException | None]] = queue.SimpleQueue()
    stop = threading.Event()
    threads = [
        threading.Thread(target=upload_each, args=(pending, upload_one, finished, stop), name="cloudddp-upload",
                         daemon=True)
        for _ in range(min(workers, len(uploads)))
    ]  # fmt: skip
    for thread in threads:
        thread.start()
    try:
        failure = report_each(len(uploads), finished, on_done)
    except KeyboardInterrupt:
        stop.set()
        raise
    except BaseException as exc:  # on_done's: the uploads in flight are waited for, as for an upload's failure
        failure = exc
    if failure is None:
        return
    stop.set()
    for thread in threads:
        thread.join()
    raise failure


def report_each(
    count: int, finished: queue.SimpleQueue[tuple[Upload, BaseException | None]], on_done: Callable[[Upload], None]
) -> BaseException | None:
    """`on_done` for each of `count` uploads as it lands; the first upload's failure is returned, not raised."""
    for _ in range(count):
        upload, error = finished.get()  # a signal interrupts this wait, as it does any lock's
        if error is not None:
            return error
        on_done(upload)
    return None


def upload_each(
    pending: queue.SimpleQueue[Upload], upload_one: Callable[[Upload], None],
    finished: queue.SimpleQueue[tuple[Upload, BaseException | None]], stop: threading.Event,
) -> None:  # fmt: skip
    """One worker of upload_in_parallel: uploads from `pending` until none is left or `stop` is set."""
    # Ctrl-C, SIGTERM and SIGHUP go to the main thread: the kernel may give a process-directed signal to any thread
    # that does not block it, and one landing here left the main thread asleep in report_each's wait (a test's
    # stage never saw its Ctrl-C in one CI run).
    if hasattr(signal, "pthread_sigmask"):  # POSIX (not Windows)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    while not stop.is_set():
        try:
            upload = pending.get_nowait()
        except queue.Empty:
            return
        try:
            upload_one(upload)
        except BaseException as exc:  # raised again in the caller's thread
            stop.set()
            finished.put((upload, exc))
            return
        finished.put((upload, None))
