"""The SageMaker provider's staging bucket: checked to be this account's, created (private,
optionally SSE-KMS) when it is cloudddp's default, listed to remove a refused launch's uploads.

What goes into it goes through the one staging algorithm (`cloudddp.staging.engine`, `S3Store`).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from cloudddp.errors import CloudDDPError
from cloudddp.staging.s3_store import PRIVATE, code_of, create_bucket_args


def split_uri(uri: str) -> tuple[str, str]:
    """s3://bucket/key -> (bucket, key)."""
    without = uri.removeprefix("s3://")
    bucket, _, key = without.partition("/")
    return bucket, key


def access_error(exc: ClientError, bucket: str, action: str) -> CloudDDPError:
    code = code_of(exc)
    if code in ("AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return CloudDDPError(
            f"cannot {action} in the S3 bucket {bucket!r} ({code}): the bucket belongs to another account or your "
            f"credentials may not write to it. Pass --bucket with a bucket of yours, or grant s3:PutObject, "
            f"s3:GetObject and s3:ListBucket on it."
        )
    return CloudDDPError(f"S3 refused to {action} in the bucket {bucket!r}: {code}: {exc}")


class StagingBucket:
    """One bucket of the caller's account, optionally with SSE-KMS by default."""

    def __init__(self, s3: Any, bucket: str, kms_key: str | None = None, account: str | None = None) -> None:
        self.s3, self.bucket, self.kms_key, self.account = s3, bucket, kms_key, account

    # -- the bucket ---------------------------------------------------------------------
    def ensure_bucket(self, create: bool, region: str) -> bool:
        """Check the bucket is this account's; create it (private) when `create` and missing. True if created."""
        owner = {"ExpectedBucketOwner": self.account} if self.account else {}
        try:
            self.s3.head_bucket(Bucket=self.bucket, **owner)
        except ClientError as exc:
            code = code_of(exc)
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
        try:
            self.s3.create_bucket(**create_bucket_args(self.bucket, region))
        except ClientError as exc:
            if code_of(exc) == "BucketAlreadyOwnedByYou":
                return
            if code_of(exc) == "BucketAlreadyExists":
                raise CloudDDPError(
                    f"the bucket name {self.bucket!r} is taken by another account. Pass --bucket with a bucket "
                    f"of yours."
                ) from None
            raise access_error(exc, self.bucket, "create the bucket") from None
        self.s3.put_public_access_block(Bucket=self.bucket, PublicAccessBlockConfiguration=PRIVATE)
        if self.kms_key:
            self.s3.put_bucket_encryption(
                Bucket=self.bucket,
                ServerSideEncryptionConfiguration={
                    "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                                                      "KMSMasterKeyID": self.kms_key}}]
                },
            )  # fmt: skip

    def listing(self, prefix: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    found[item["Key"]] = item
        except ClientError as exc:
            raise access_error(exc, self.bucket, "list objects") from None
        return found
