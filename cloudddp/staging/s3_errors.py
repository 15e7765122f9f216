"""S3's refusals and failed uploads, in one sentence each, for both S3 transports (botocore and s3_http.py)."""

from __future__ import annotations

import re

from cloudddp.errors import CloudDDPError
from cloudddp.staging.store import Upload

# Error codes that mean no access: S3 API reference, "Error responses" (AccessDenied, AllAccessDisabled,
# InvalidAccessKeyId, SignatureDoesNotMatch); "403" and "Forbidden" as botocore names an HTTP 403
# that came without a body (a HEAD).
DENIED = ("AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden")
REJECTED = ("InvalidAccessKeyId", "SignatureDoesNotMatch")  # the credentials themselves, not their permissions


def missing_bucket(bucket: str) -> CloudDDPError:
    return CloudDDPError(
        f"the bucket s3://{bucket} does not exist. Create it, or pass --create-bucket to create it (private)."
    )


def refused(bucket: str, action: str, key: str | None, code: str, denied: bool, detail: str) -> CloudDDPError:
    """S3's refusal with `code` of `action` on the bucket (or `key` in it): a missing bucket, refused credentials
    (REJECTED: granting a permission would not help), a missing permission (`denied`, or a code in DENIED), else
    the code and `detail`."""
    if code == "NoSuchBucket":
        return missing_bucket(bucket)
    where = f"s3://{bucket}/{key}" if key else f"the bucket s3://{bucket}"
    if code in REJECTED:
        return CloudDDPError(
            f"cannot {action} {where}: S3 rejected the credentials ({code}): the access key id is unknown, or "
            f"the secret key does not belong to it. Check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
            f"the profile in use)."
        )
    if denied or code in DENIED:
        return CloudDDPError(
            f"cannot {action} {where}: access denied ({code}). Your credentials may not use this bucket; "
            f"grant s3:PutObject, s3:GetObject, s3:ListBucket (and s3:DeleteObject for --delete) on it."
        )
    return CloudDDPError(f"cannot {action} {where}: {code}{detail}")


def mismatch(bucket: str, upload: Upload) -> CloudDDPError:
    """S3 refused the bytes: say whether the file changed since the scan or the bytes were damaged."""
    from cloudddp.staging.local_files import hash_file

    now = hash_file(upload.source).sha256 if upload.source else None
    if now is not None and now != upload.sha256:
        return changed_while_uploading(upload)
    return CloudDDPError(
        f"S3 rejected s3://{bucket}/{upload.key} from {str(upload.path)!r}: the bytes it received do not "
        f"match their checksum (damaged in transit). Nothing was published; stage again."
    )


def changed_while_uploading(upload: Upload) -> CloudDDPError:
    return CloudDDPError(
        f"{str(upload.path)!r} changed while it was being uploaded (its content differs from the scan). "
        f"Nothing was published; stage again once nothing writes to it."
    )


def upload_failure(
    bucket: str, upload: Upload, status: int | None, body: bytes, error: Exception | None
) -> CloudDDPError:
    """The error for a PUT that could not complete, from S3's status and error body."""
    text = body.decode(errors="replace")
    if any(code in text for code in ("BadDigest", "XAmzContentChecksumMismatch", "InvalidDigest",
                                      "XAmzContentSHA256Mismatch")):  # fmt: skip
        return mismatch(bucket, upload)
    code = re.search(r"<Code>([^<]+)</Code>", text)
    if code and code.group(1) == "NoSuchBucket":
        return missing_bucket(bucket)
    if status == 403 or (code and code.group(1) in DENIED):
        return CloudDDPError(
            f"cannot upload to s3://{bucket}/{upload.key}: access denied ({code.group(1) if code else status})."
            f" Your credentials may not write to this bucket; grant s3:PutObject on it."
        )
    reason = code.group(1) if code else (f"HTTP {status}" if status else str(error).rstrip("."))
    retried = "" if code or status else (
        " S3 could not be reached, though retried for up to 15 s. Nothing was published; the files already "
        "uploaded are kept: run the same stage again to send the rest."
    )  # fmt: skip
    return CloudDDPError(f"cannot upload {str(upload.path)!r} to s3://{bucket}/{upload.key}: {reason}.{retried}")
