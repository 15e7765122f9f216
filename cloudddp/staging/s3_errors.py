"""S3's refusals of access, in one sentence each, for every S3 transport (botocore, the CRT, the direct client)."""

from __future__ import annotations

from cloudddp.errors import CloudDDPError

# Error codes that mean no access: S3 API reference, "Error responses" (AccessDenied, AllAccessDisabled,
# InvalidAccessKeyId, SignatureDoesNotMatch); "403" and "Forbidden" as botocore and the CRT name an HTTP 403
# that came without a body (a HEAD).
DENIED = ("AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden")
REJECTED = ("InvalidAccessKeyId", "SignatureDoesNotMatch")  # the credentials themselves, not their permissions


def access_error(action: str, where: str, code: str, denied: bool) -> CloudDDPError | None:
    """The error for refused credentials (REJECTED: granting a permission would not help) or, where `denied`, a
    missing permission; None for anything else."""
    if code in REJECTED:
        return CloudDDPError(
            f"cannot {action} {where}: S3 rejected the credentials ({code}): the access key id is unknown, or "
            f"the secret key does not belong to it. Check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
            f"the profile in use)."
        )
    if denied:
        return CloudDDPError(
            f"cannot {action} {where}: access denied ({code}). Your credentials may not use this bucket; "
            f"grant s3:PutObject, s3:GetObject, s3:ListBucket (and s3:DeleteObject for --delete) on it."
        )
    return None
