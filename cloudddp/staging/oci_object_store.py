"""OCI Object Storage adapter for the staging algorithm (`cloudddp.staging.engine`).

Uploads go through the `oci` SDK's `UploadManager`: one `put_object` with `Content-MD5`
(the service refuses bytes that don't match) for files up to `part_size`, a multipart
upload above it with `parallel_process_count` parts in flight, each part carrying its own
MD5 (the SDK computes it). Single-part uploads are also checked against the MD5 the
service reports back. Several files go up at a time. Object Storage's `copy_object` is an
asynchronous work request meant for copies across regions, so this adapter does not copy:
objects of a new version are uploaded from the local files (`can_copy = False`).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import oci
from oci.object_storage import UploadManager

from cloudddp.errors import CloudDDPError
from cloudddp.staging.location import Location
from cloudddp.staging.store import Upload, upload_in_parallel

PART_SIZE = 128 * 1024 * 1024  # the SDK's default: multipart above this size
PARALLEL_PARTS = 8  # parts of one file in flight (the SDK's default is 3)
FILES_AT_ONCE = 8


class OCIObjectStore:
    can_copy = False
    # Turns network failures (unreachable endpoint, timeouts) raised inside into one CloudDDPError naming the
    # call, endpoint and region: the OCI provider's `reaching`. Set by open_oci_store for `cloudddp stage`;
    # the provider wraps its own calls.
    reaching: Callable[[str], AbstractContextManager[None]] | None = None

    def __init__(self, client: Any, location: Location, part_size: int = PART_SIZE,
                 parallel_parts: int = PARALLEL_PARTS, compartment_id: str | None = None) -> None:  # fmt: skip
        self.client, self.location, self.part_size = client, location, part_size
        self.md5_part_size = part_size  # the scan computes the MD5s the service will report for these parts
        self.namespace, self.bucket = location.namespace, location.bucket
        self.compartment_id = compartment_id
        self.uploads = UploadManager(client, allow_parallel_uploads=True, parallel_process_count=parallel_parts)

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
        upload_in_parallel(uploads, self.upload_one, on_done, FILES_AT_ONCE)

    def upload_one(self, upload: Upload) -> None:
        """Upload one file and compare the MD5 the service computed with the scan's (per part for multipart)."""
        single = upload.size <= self.part_size
        kwargs: dict[str, Any] = {"part_size": self.part_size}
        if single and upload.md5:
            kwargs["content_md5"] = upload.md5  # the service refuses bytes that don't match
        try:
            response = self.uploads.upload_file(self.namespace, self.bucket, upload.key, str(upload.path), **kwargs)
        except oci.exceptions.ServiceError as exc:
            if exc.code == "InvalidContentMd5" or "md5" in str(exc.message).lower():
                raise self.mismatch(upload) from None
            raise self.error(exc, "upload", upload.key) from None
        except OSError as exc:
            if exc.filename != str(upload.path):
                raise  # a network failure (the SDK's requests errors are OSErrors too): the caller words it
            raise CloudDDPError(f"cannot read {str(upload.path)!r}: {exc.strerror}.") from None
        # The SDK sends no Content-MD5 with file parts, so the multipart MD5 is the end-to-end check there.
        reported = response.headers.get("opc-content-md5" if single else "opc-multipart-md5")
        if upload.md5 and reported != upload.md5:
            raise self.mismatch(upload)

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


def open_oci_store(location: Location) -> OCIObjectStore:
    """An OCIObjectStore from ~/.oci/config (or the profile/endpoint variables the OCI provider reads)."""
    import os

    from cloudddp.providers.oci.provider import OCIProvider

    provider = OCIProvider()
    clients = provider.clients()
    compartment = os.environ.get("OCI_COMPARTMENT_ID") or clients.credentials.config.get("tenancy")
    store = OCIObjectStore(clients.object_storage, location, compartment_id=compartment)
    store.reaching = provider.reaching
    return store
