"""Staging to S3: the staging bucket, the code archive and local input folders.

Uploads go through boto3's transfer manager (`upload_file` with a `TransferConfig`:
multipart and parallel for large files). An object whose size and MD5 already match
the local file is skipped, so launching the same job twice uploads the data once; the
MD5 is kept in the object's metadata (`cloudddp-md5`) because with SSE-KMS or multipart
the ETag is not the MD5. A staged folder is mirrored: objects under its prefix that no
longer exist locally are deleted, so the job sees exactly the local folder.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from cloudddp.errors import CloudDDPError
from cloudddp.staging.report import StageReport

MD5_META = "cloudddp-md5"
TRANSFER = TransferConfig(multipart_threshold=64 * 1024 * 1024, multipart_chunksize=64 * 1024 * 1024, max_concurrency=8)


def split_uri(uri: str) -> tuple[str, str]:
    """s3://bucket/key -> (bucket, key)."""
    without = uri.removeprefix("s3://")
    bucket, _, key = without.partition("/")
    return bucket, key


def file_md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def access_error(exc: ClientError, bucket: str, action: str) -> CloudDDPError:
    code = error_code(exc)
    if code in ("AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return CloudDDPError(
            f"cannot {action} in the S3 bucket {bucket!r} ({code}): the bucket belongs to another account or your "
            f"credentials may not write to it. Pass --bucket with a bucket of yours, or grant s3:PutObject, "
            f"s3:GetObject and s3:ListBucket on it."
        )
    return CloudDDPError(f"S3 refused to {action} in the bucket {bucket!r}: {code}: {exc}")


class S3Stager:
    """Uploads into one bucket, optionally with SSE-KMS."""

    def __init__(self, s3: Any, bucket: str, kms_key: str | None = None, account: str | None = None) -> None:
        self.s3, self.bucket, self.kms_key, self.account = s3, bucket, kms_key, account

    # -- the bucket ---------------------------------------------------------------------
    def ensure_bucket(self, create: bool, region: str) -> bool:
        """Check the bucket is this account's; create it (private) when `create` and missing. True if created."""
        owner = {"ExpectedBucketOwner": self.account} if self.account else {}
        try:
            self.s3.head_bucket(Bucket=self.bucket, **owner)
        except ClientError as exc:
            code = error_code(exc)
            if code in ("404", "NoSuchBucket", "NotFound"):
                if not create:
                    raise CloudDDPError(
                        f"the staging bucket {self.bucket!r} (--bucket or sagemaker.bucket) does not exist. Create "
                        f"it, or leave --bucket out to use cloudddp's default bucket."
                    ) from None
                self.create_bucket(region)
                return True
            raise CloudDDPError(
                f"the staging bucket {self.bucket!r} is not usable ({code}): it belongs to another account or "
                f"your credentials may not access it. Pass --bucket with a bucket owned by account "
                f"{self.account or 'of your credentials'}."
            ) from None
        self.check_owned()
        return False

    def check_owned(self) -> None:
        """Where ListBuckets is allowed, the bucket must be among this account's (moto ignores ExpectedBucketOwner)."""
        try:
            mine = self.s3.list_buckets(Prefix=self.bucket).get("Buckets", [])
        except ClientError:
            return  # not allowed to list: HeadBucket's ExpectedBucketOwner is the check
        if not any(b.get("Name") == self.bucket for b in mine):
            raise CloudDDPError(
                f"the staging bucket {self.bucket!r} exists but belongs to another account "
                f"(it is not among the buckets of account {self.account or 'of your credentials'}). "
                f"Pass --bucket with a bucket of yours."
            )

    def create_bucket(self, region: str) -> None:
        args: dict[str, Any] = {"Bucket": self.bucket}
        if region != "us-east-1":
            args["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            self.s3.create_bucket(**args)
        except ClientError as exc:
            if error_code(exc) == "BucketAlreadyOwnedByYou":
                return
            if error_code(exc) == "BucketAlreadyExists":
                raise CloudDDPError(
                    f"the bucket name {self.bucket!r} is taken by another account. Pass --bucket with a bucket "
                    f"of yours."
                ) from None
            raise access_error(exc, self.bucket, "create the bucket") from None
        self.s3.put_public_access_block(
            Bucket=self.bucket,
            PublicAccessBlockConfiguration={
                "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True,
            },
        )  # fmt: skip
        if self.kms_key:
            self.s3.put_bucket_encryption(
                Bucket=self.bucket,
                ServerSideEncryptionConfiguration={
                    "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                                                      "KMSMasterKeyID": self.kms_key}}]
                },
            )  # fmt: skip

    # -- objects ------------------------------------------------------------------------
    def extra_args(self, md5: str) -> dict[str, Any]:
        extra: dict[str, Any] = {"Metadata": {MD5_META: md5}}
        if self.kms_key:
            extra.update(ServerSideEncryption="aws:kms", SSEKMSKeyId=self.kms_key)
        return extra

    def is_current(self, key: str, size: int, md5: str, existing: dict[str, Any] | None = None) -> bool:
        """True if s3://bucket/key already holds these bytes (size, then MD5 from metadata or ETag)."""
        if existing is not None and existing.get("Size") != size:
            return False
        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise access_error(exc, self.bucket, "read objects") from None
        if head.get("ContentLength") != size:
            return False
        if head.get("Metadata", {}).get(MD5_META) == md5:
            return True
        return str(head.get("ETag", "")).strip('"') == md5 and not self.kms_key

    def upload_file(
        self, path: Path, key: str, report: StageReport, existing: dict[str, Any] | None = None, check: bool = True
    ) -> None:
        """Upload unless the object already holds these bytes; `check=False` when a listing showed it absent."""
        size = path.stat().st_size
        md5 = file_md5(path)
        uri = f"s3://{self.bucket}/{key}"
        if check and self.is_current(key, size, md5, existing):
            report.skipped.append(uri)
            return
        try:
            self.s3.upload_file(str(path), self.bucket, key, ExtraArgs=self.extra_args(md5), Config=TRANSFER)
        except ClientError as exc:
            raise access_error(exc, self.bucket, "upload objects") from None
        except Exception as exc:  # boto3.exceptions.S3UploadFailedError wraps the ClientError's text
            if "AccessDenied" in str(exc) or "Forbidden" in str(exc):
                raise CloudDDPError(
                    f"cannot upload to the S3 bucket {self.bucket!r}: access denied. The bucket belongs to another "
                    f"account or your credentials may not write to it; pass --bucket with a bucket of yours."
                ) from None
            raise
        report.uploaded.append(uri)
        report.bytes_uploaded += size

    def listing(self, prefix: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    found[item["Key"]] = item
        except ClientError as exc:
            raise access_error(exc, self.bucket, "list objects") from None
        return found

    def stage_path(
        self, local: str | Path, prefix: str, on_file: Callable[[str], None] | None = None, workers: int = 8
    ) -> StageReport:
        """Mirror a local folder (or one file) under s3://bucket/prefix/ and return what changed."""
        root = Path(local)
        prefix = prefix.rstrip("/") + "/"
        files = [(root, root.name)] if root.is_file() else [
            (p, p.relative_to(root).as_posix()) for p in sorted(root.rglob("*")) if p.is_file()
        ]  # fmt: skip
        existing = self.listing(prefix)
        report = StageReport()

        def one(item: tuple[Path, str]) -> None:
            key = prefix + item[1]
            self.upload_file(item[0], key, report, existing.get(key), check=key in existing)
            if on_file:
                on_file(key)

        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(files) or 1))) as pool:
            list(pool.map(one, files))
        stale = sorted(set(existing) - {prefix + name for _, name in files})
        for start in range(0, len(stale), 1000):
            batch = stale[start : start + 1000]
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
        report.deleted = [f"s3://{self.bucket}/{k}" for k in stale]
        report.uploaded.sort()
        report.skipped.sort()
        return report


def folder_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(os.path.getsize(p) for p in path.rglob("*") if p.is_file())
