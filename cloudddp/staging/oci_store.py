"""Staging to OCI Object Storage: the source archive and local input folders.

The same contract as `cloudddp.staging.s3.S3Stager.stage_path` (mirror a local folder
under a prefix, skip what is already there, delete what is no longer local, report what
changed), over the `oci` SDK's `UploadManager` (one `put_object` for small files,
multipart with parts uploaded in parallel above `part_size`). Files go up several at a
time. An object counts as already there when its size matches and its MD5 does: the
listing's `md5` is the base64 MD5 of the bytes for a single-part object and
`<base64 MD5 of the parts' MD5s>-<part count>` for a multipart one, both computed here
in one read of the file; objects uploaded with another part size are checked through
the `cloudddp-md5` metadata cloudddp writes on every upload.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oci
from oci.object_storage import UploadManager

from cloudddp.errors import CloudDDPError
from cloudddp.staging.report import StageReport

MD5_META = "cloudddp-md5"
PART_SIZE = 128 * 1024 * 1024  # the SDK's default: multipart above this size
PARALLEL_PARTS = 3  # the SDK's default number of parts in flight per file
LIST_FIELDS = "name,size,md5"


@dataclass
class Digests:
    hex: str  # whole-file MD5, hex (kept in metadata)
    single: str  # whole-file MD5, base64 (what the listing shows for a single-part object)
    multipart: str | None  # what the listing shows for a multipart upload with our part size


def file_digests(path: Path, part_size: int) -> Digests:
    """Whole-file and multipart MD5s in one read."""
    whole = hashlib.md5(usedforsecurity=False)
    parts: list[bytes] = []
    size = path.stat().st_size
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(part_size)
            if not chunk:
                break
            whole.update(chunk)
            parts.append(hashlib.md5(chunk, usedforsecurity=False).digest())
    multipart = None
    if size > part_size:
        combined = hashlib.md5(b"".join(parts), usedforsecurity=False).digest()
        multipart = f"{base64.b64encode(combined).decode()}-{len(parts)}"
    return Digests(whole.hexdigest(), base64.b64encode(whole.digest()).decode(), multipart)


def service_error(exc: oci.exceptions.ServiceError, where: str, action: str) -> CloudDDPError:
    if exc.status == 404:
        return CloudDDPError(
            f"cannot {action}: {where} was not found ({exc.code}). Check the bucket and namespace in oci.work_dir "
            f"(oci://bucket@namespace/prefix), and that your policies let you use that bucket."
        )
    if exc.status in (401, 403):
        return CloudDDPError(
            f"cannot {action} in {where}: Object Storage said {exc.status} {exc.code}. Your credentials are not "
            f"accepted or may not use this bucket (policy: allow ... to manage objects in compartment ...)."
        )
    return CloudDDPError(f"cannot {action} in {where}: Object Storage said {exc.status} {exc.code}: {exc.message}")


class OCIStager:
    """Uploads into one bucket of one namespace."""

    def __init__(
        self,
        client: Any,
        namespace: str,
        bucket: str,
        part_size: int = PART_SIZE,
        parallel_parts: int = PARALLEL_PARTS,
    ) -> None:
        self.client, self.namespace, self.bucket, self.part_size = client, namespace, bucket, part_size
        self.uploads = UploadManager(client, allow_parallel_uploads=True, parallel_process_count=parallel_parts)

    @property
    def where(self) -> str:
        return f"oci://{self.bucket}@{self.namespace}"

    def listing(self, prefix: str) -> dict[str, dict[str, Any]]:
        """name -> {"size", "md5"} of every object under `prefix`."""
        found: dict[str, dict[str, Any]] = {}
        start: str | None = None
        while True:
            kwargs: dict[str, Any] = {"prefix": prefix, "fields": LIST_FIELDS, "limit": 1000}
            if start:
                kwargs["start"] = start
            try:
                page = self.client.list_objects(self.namespace, self.bucket, **kwargs).data
            except oci.exceptions.ServiceError as exc:
                raise service_error(exc, f"the bucket {self.where}", "list objects") from None
            for item in page.objects or []:
                found[item.name] = {"size": item.size, "md5": item.md5}
            start = page.next_start_with
            if not start:
                return found

    def is_current(self, name: str, size: int, digests: Digests, existing: dict[str, Any]) -> bool:
        if existing.get("size") != size:
            return False
        md5 = existing.get("md5")
        if md5 and md5 in (digests.single, digests.multipart):
            return True
        if md5 and "-" not in md5:
            return False  # a single-part object with other bytes
        try:
            head = self.client.head_object(self.namespace, self.bucket, name)
        except oci.exceptions.ServiceError as exc:
            if exc.status == 404:
                return False
            raise service_error(exc, f"{self.where}/{name}", "read object metadata") from None
        return head.headers.get(f"opc-meta-{MD5_META}") == digests.hex

    def upload_file(self, path: Path, name: str, report: StageReport, existing: dict[str, Any] | None) -> None:
        size = path.stat().st_size
        digests = file_digests(path, self.part_size)
        uri = f"{self.where}/{name}"
        if existing is not None and self.is_current(name, size, digests, existing):
            report.skipped.append(uri)
            return
        kwargs: dict[str, Any] = {"part_size": self.part_size, "metadata": {MD5_META: digests.hex}}
        if size <= self.part_size:
            kwargs["content_md5"] = digests.single  # the service rejects the upload if the bytes differ
        try:
            self.uploads.upload_file(self.namespace, self.bucket, name, str(path), **kwargs)
        except oci.exceptions.ServiceError as exc:
            raise service_error(exc, f"the bucket {self.where}", "upload objects") from None
        report.uploaded.append(uri)
        report.bytes_uploaded += size

    def delete(self, names: list[str]) -> None:
        for name in names:
            try:
                self.client.delete_object(self.namespace, self.bucket, name)
            except oci.exceptions.ServiceError as exc:
                if exc.status != 404:
                    raise service_error(exc, f"{self.where}/{name}", "delete a stale staged object") from None

    def stage_path(
        self, local: str | Path, prefix: str, on_file: Callable[[str], None] | None = None, workers: int = 8
    ) -> StageReport:
        """Mirror a local folder under `prefix/` (one file goes to `prefix/<its name>`) and report what changed."""
        root = Path(local)
        base = prefix.rstrip("/") + "/"
        if root.is_file():
            files = [(root, base + root.name)]
        else:
            files = [(p, base + p.relative_to(root).as_posix()) for p in sorted(root.rglob("*")) if p.is_file()]
        existing = self.listing(base)
        report = StageReport()

        def one(item: tuple[Path, str]) -> None:
            path, name = item
            self.upload_file(path, name, report, existing.get(name))
            if on_file:
                on_file(name)

        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(files) or 1))) as pool:
            list(pool.map(one, files))
        if not root.is_file():  # a single file leaves its neighbours alone
            stale = sorted(set(existing) - {name for _, name in files})
            self.delete(stale)
            report.deleted = [f"{self.where}/{name}" for name in stale]
        report.uploaded.sort()
        report.skipped.sort()
        return report

    def download_prefix(self, prefix: str, destination: str | Path) -> list[Path]:
        """Every object under `prefix/` into `destination`, keeping the relative paths."""
        base = prefix.rstrip("/") + "/"
        target = Path(destination)
        written: list[Path] = []
        for name in sorted(self.listing(base)):
            relative = name[len(base) :]
            if not relative or relative.endswith("/"):
                continue
            path = (target / relative).resolve()
            if target.resolve() not in path.parents:
                raise CloudDDPError(f"refusing to write {name!r} outside {target}.")
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                response = self.client.get_object(self.namespace, self.bucket, name)
            except oci.exceptions.ServiceError as exc:
                raise service_error(exc, f"{self.where}/{name}", "download an object") from None
            with open(path, "wb") as handle:
                for chunk in response.data.raw.stream(1024 * 1024, decode_content=False):
                    handle.write(chunk)
            written.append(path)
        return written


def folder_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(os.path.getsize(p) for p in path.rglob("*") if p.is_file())
