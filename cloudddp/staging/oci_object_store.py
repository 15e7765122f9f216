"""OCI Object Storage adapter for the staging algorithm (`cloudddp.staging.engine`).

A file up to `part_size` goes up in one `put_object` (the SDK's `UploadManager`) with `Content-MD5`:
the service refuses bytes that don't match. A larger one is a multipart upload driven through the
SDK's `MultipartObjectAssembler`, PARALLEL_PARTS parts in flight, each given its MD5 so the SDK
sends it as `Content-MD5` and the service refuses a damaged part; a failed or interrupted upload is
aborted, so no uncommitted parts stay behind. Every object's MD5 as the service reports it is then
compared with the scan's; a committed multipart object that differs (the file changed since the
scan) is deleted before the error, so a rerun cannot resume it. Several files go up at a time.
Object Storage's `copy_object` is an asynchronous work request meant for copies across regions,
so this adapter does not copy: objects of a new version are uploaded from the local files
(`can_copy = False`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import oci
from oci.object_storage import UploadManager
from oci.object_storage.transfer.internal.multipart_object_assembler import MultipartObjectAssembler

from cloudddp.errors import CloudDDPError
from cloudddp.staging.local_files import READ_BLOCK
from cloudddp.staging.location import Location
from cloudddp.staging.store import Upload, upload_in_parallel

PART_SIZE = 128 * 1024 * 1024  # the SDK's default: multipart above this size
PARALLEL_PARTS = 8  # parts of one file in flight (the SDK's default is 3)
FILES_AT_ONCE = 8
ABORT_WAIT = 5.0  # seconds an interrupted stage gives the aborts of its multipart uploads in flight


class OCIObjectStore:
    can_copy = False
    # Turns network failures (unreachable endpoint, timeouts) raised inside into one CloudDDPError naming the
    # call, endpoint and region: the OCI provider's `reaching`. Set by open_oci_store for `cloudddp stage`;
    # the provider wraps its own calls.
    reaching: Callable[[str], AbstractContextManager[None]] | None = None

    def __init__(
        self, client: Any, location: Location, part_size: int = PART_SIZE, compartment_id: str | None = None
    ) -> None:
        self.client, self.location, self.part_size = client, location, part_size
        self.md5_part_size = part_size  # the scan computes the MD5s the service will report for these parts
        self.namespace, self.bucket = location.namespace, location.bucket
        self.compartment_id = compartment_id
        self.uploads = UploadManager(client, allow_parallel_uploads=True, parallel_process_count=PARALLEL_PARTS)
        self.lock = threading.Lock()
        self.active: set[MultipartObjectAssembler] = set()  # multipart uploads begun and not yet committed

    def error(self, exc: oci.exceptions.ServiceError, action: str, name: str | None = None) -> CloudDDPError:
        where = f"{self.location.bucket_uri}/{name}" if name else f"the bucket {self.location.bucket_uri}"
        if exc.status == 404 and exc.code in ("BucketNotFound", "NamespaceNotFound"):
            return self.missing_bucket()
        if exc.status in (401, 403):
            return CloudDDPError(
                f"cannot {action} {where}: Object Storage said {exc.status} {exc.code}. Your credentials are not "
                f"accepted or may not use this bucket (policy: allow group ... to manage objects in compartment ...)."
            )
        return CloudDDPError(f"cannot {action} {where}: Object Storage said {exc.status} {exc.code}: {exc.message}")

    def missing_bucket(self) -> CloudDDPError:
        return CloudDDPError(
            f"the bucket {self.location.bucket_uri} does not exist (or your policies hide it). Create it, or pass "
            f"--create-bucket to create it (private, in the compartment OCI_COMPARTMENT_ID, else your tenancy)."
        )

    def check_bucket(self, create: bool) -> bool:
        try:
            self.client.list_objects(self.namespace, self.bucket, prefix=self.location.key(), limit=1)
            return False
        except oci.exceptions.ServiceError as exc:
            if exc.status != 404 or not create:
                raise self.error(exc, "use") from None
        details = oci.object_storage.models.CreateBucketDetails(
            name=self.bucket, compartment_id=self.compartment_id, public_access_type="NoPublicAccess"
        )
        try:
            self.client.create_bucket(self.namespace, details)
        except oci.exceptions.ServiceError as exc:
            raise self.error(exc, "create") from None
        return True

    def list_sizes(self, prefix: str) -> dict[str, int]:
        found: dict[str, int] = {}
        start: str | None = None
        while True:
            kwargs: dict[str, Any] = {"prefix": prefix, "fields": "name,size", "limit": 1000}
            if start:
                kwargs["start"] = start
            try:
                page = self.client.list_objects(self.namespace, self.bucket, **kwargs).data
            except oci.exceptions.ServiceError as exc:
                raise self.error(exc, "list objects in") from None
            for item in page.objects or []:
                found[item.name] = int(item.size)
            start = page.next_start_with
            if not start:
                return found

    def read(self, key: str) -> bytes | None:
        try:
            return bytes(self.client.get_object(self.namespace, self.bucket, key).data.content)
        except oci.exceptions.ServiceError as exc:
            if exc.status == 404 and exc.code == "ObjectNotFound":
                return None
            raise self.error(exc, "read", key) from None

    def write(self, key: str, data: bytes) -> None:
        md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        try:
            self.client.put_object(self.namespace, self.bucket, key, data, content_md5=md5)
        except oci.exceptions.ServiceError as exc:
            raise self.error(exc, "write", key) from None

    def upload(self, uploads: list[Upload], on_done: Callable[[Upload], None]) -> None:
        try:
            upload_in_parallel(uploads, self.upload_one, on_done, FILES_AT_ONCE)
        except KeyboardInterrupt:
            # upload_in_parallel leaves the uploads in flight running (an interrupt does not wait for them), so
            # their multipart uploads are aborted from here, or their parts would stay in the bucket.
            self.abort_in_flight()
            raise

    def upload_one(self, upload: Upload) -> None:
        """Upload one file; the service's MD5 of what it stored must be the scan's (see the module's note)."""
        with self.upload_errors(upload):
            if upload.size <= self.part_size:
                self.upload_whole(upload)
            else:
                self.upload_parts(upload)

    @contextlib.contextmanager
    def upload_errors(self, upload: Upload) -> Iterator[None]:
        """The SDK's errors while uploading `upload` as one CloudDDPError naming the object (or the file)."""
        try:
            yield
        except oci.exceptions.ServiceError as exc:
            if exc.code == "InvalidContentMd5" or "md5" in str(exc.message).lower():
                raise self.mismatch(upload) from None
            raise self.error(exc, "upload", upload.key) from None
        except OSError as exc:
            if exc.filename != str(upload.path):
                raise  # a network failure (the SDK's requests errors are OSErrors too): the caller words it
            raise CloudDDPError(f"cannot read {str(upload.path)!r}: {exc.strerror}.") from None

    def upload_whole(self, upload: Upload) -> None:
        kwargs: dict[str, Any] = {"part_size": self.part_size}
        if upload.md5:
            kwargs["content_md5"] = upload.md5  # the service refuses bytes that don't match
        response = self.uploads.upload_file(self.namespace, self.bucket, upload.key, str(upload.path), **kwargs)
        if upload.md5 and response.headers.get("opc-content-md5") != upload.md5:
            raise self.mismatch(upload)

    def upload_parts(self, upload: Upload) -> None:
        """A multipart upload whose every part carries its MD5, aborted unless committed; the committed object is
        deleted again if its multipart MD5 is not the scan's."""
        path = str(upload.path)
        parts = part_ranges(upload.size, self.part_size)  # the scanned size: what upload.md5 covers
        # UploadManager.upload_file cannot send part MD5s: MultipartObjectAssembler._upload_part builds
        # `new_kwargs = {'content_md5': part["hash"]}` (oci 2.189.0, object_storage/transfer/internal/
        # multipart_object_assembler.py:445) before it computes a missing hash (lines 467-468), so a part added
        # without `part_hash` goes without Content-MD5 and the service would accept a damaged one.
        hashes = part_md5s(path, parts, PARALLEL_PARTS)
        assembler = MultipartObjectAssembler(self.client, self.namespace, self.bucket, upload.key,
                                             part_size=self.part_size, parallel_process_count=PARALLEL_PARTS)  # fmt: skip
        for (offset, size), md5 in zip(parts, hashes, strict=True):
            assembler.add_part_from_file(path, offset=offset, size=size, part_hash=md5)
        assembler.new_upload()
        with self.in_flight(assembler):
            try:
                assembler.upload()
                response = assembler.commit()
            except BaseException:
                abort(assembler)
                raise
        if upload.md5 and response.headers.get("opc-multipart-md5") != upload.md5:
            self.remove_committed(upload.key, response.headers.get("etag"))
            raise self.mismatch(upload)

    @contextlib.contextmanager
    def in_flight(self, assembler: MultipartObjectAssembler) -> Iterator[None]:
        """`assembler`'s upload is one abort_in_flight aborts, until it is committed or aborted."""
        with self.lock:
            self.active.add(assembler)
        try:
            yield
        finally:
            with self.lock:
                self.active.discard(assembler)

    def abort_in_flight(self) -> None:
        """Abort every multipart upload under way, on threads of their own, waiting at most ABORT_WAIT seconds in
        all: an interrupted stage exits promptly even where the service does not answer."""
        with self.lock:
            running = list(self.active)
        threads = [threading.Thread(target=abort, args=(a,), name="cloudddp-abort", daemon=True) for a in running]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + ABORT_WAIT
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def remove_committed(self, key: str, etag: str | None) -> None:
        """Delete the object this upload committed: with its ETag as if-match, so an object another stage wrote
        to the key since is left alone (DeleteObject answers 412 NoEtagMatch then: OCI API Errors,
        docs.oracle.com/en-us/iaas/Content/API/References/apierrors.htm)."""
        try:
            self.client.delete_object(self.namespace, self.bucket, key, **({"if_match": etag} if etag else {}))
        except oci.exceptions.ServiceError as exc:
            if exc.status not in (404, 412):  # gone already, or no longer the object this upload wrote
                raise CloudDDPError(
                    f"{self.location.bucket_uri}/{key} failed its MD5 check (the file changed since the scan) and "
                    f"could not be deleted: Object Storage said {exc.status} {exc.code}: {exc.message}. Delete it "
                    f"(oci os object delete --bucket-name {self.bucket} --name '{key}') before staging again, or "
                    f"the rerun keeps it."
                ) from None

    def mismatch(self, upload: Upload) -> CloudDDPError:
        return CloudDDPError(
            f"Object Storage received other bytes for {self.location.bucket_uri}/{upload.key} than "
            f"{str(upload.path)!r} held when it was scanned (MD5 mismatch: the file changed, or the bytes were "
            f"damaged in transit). Nothing was published; stage again."
        )

    def copy(self, pairs: list[tuple[str, str]]) -> None:
        raise NotImplementedError("OCIObjectStore.can_copy is False: the engine uploads instead")

    def download(self, destination: Path) -> list[Path]:
        """Every object under the location's prefix into `destination`, keeping the paths below the prefix."""
        base = self.location.key() + "/" if self.location.key() else ""
        target = destination.resolve()
        written: list[Path] = []
        for name in sorted(self.list_sizes(base)):
            relative = name[len(base) :]
            if not relative or relative.endswith("/"):
                continue  # a folder marker
            path = (target / relative).resolve()
            if target not in path.parents:
                raise CloudDDPError(f"refusing to write {self.location.bucket_uri}/{name} outside {str(target)!r}.")
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                response = self.client.get_object(self.namespace, self.bucket, name)
            except oci.exceptions.ServiceError as exc:
                raise self.error(exc, "download", name) from None
            with open(path, "wb") as handle:
                for chunk in response.data.raw.stream(1024 * 1024, decode_content=False):
                    handle.write(chunk)
            written.append(path)
        return written

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            try:
                self.client.delete_object(self.namespace, self.bucket, key)
            except oci.exceptions.ServiceError as exc:
                if exc.status != 404:
                    raise self.error(exc, "delete", key) from None


def part_ranges(size: int, part_size: int) -> list[tuple[int, int]]:
    """(offset, size) of each part of a file of `size` bytes, as the SDK's add_parts_from_file cuts it."""
    return [(offset, min(part_size, size - offset)) for offset in range(0, size, part_size)]


def part_md5s(path: str, parts: list[tuple[int, int]], threads: int) -> list[str]:
    """The base64 MD5 of each part of the file at `path`, `threads` parts at a time (hashlib releases the GIL)."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda part: part_md5(path, *part), parts))


def part_md5(path: str, offset: int, size: int) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb", buffering=0) as handle:
        handle.seek(offset)
        while size > 0 and (block := handle.read(min(READ_BLOCK, size))):
            digest.update(block)
            size -= len(block)
    return base64.b64encode(digest.digest()).decode()


def abort(assembler: MultipartObjectAssembler) -> None:
    """Abort `assembler`'s upload, best effort: a failure here must not hide the one that led to it (and an upload
    already committed or aborted answers 404)."""
    with contextlib.suppress(Exception):
        assembler.abort()
