"""`Session` and `get_execution_role`: the parts of the SDK v2's `sagemaker.Session` a training notebook uses.

Region, default bucket (`sagemaker-{region}-{account}`, created on first use as v2's
`Session.default_bucket()` does), `upload_data` and the boto3 session underneath. A real
SDK v2 `sagemaker.Session` works in its place: the drop-in only reads `boto_region_name`,
`default_bucket()`, `default_bucket_prefix` and `boto_session` from it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError


def _boto3() -> Any:
    try:
        import boto3
    except ModuleNotFoundError:
        raise CloudDDPError("cloudddp.sagemaker needs boto3: pip install 'cloudddp[sagemaker]'.") from None
    return boto3


class Session:
    """A boto3 session with SageMaker's conventions for buckets and uploads."""

    def __init__(
        self,
        boto_session: Any = None,
        default_bucket: str | None = None,
        default_bucket_prefix: str | None = None,
    ) -> None:
        self.boto_session = boto_session or _boto3().Session()
        region = self.boto_session.region_name or os.environ.get("AWS_REGION")
        if not region:
            raise CloudDDPError(
                "no AWS region for sagemaker Session: set AWS_REGION (or AWS_DEFAULT_REGION) or pass "
                "boto_session=boto3.Session(region_name=...)."
            )
        self.boto_region_name: str = region
        self.default_bucket_prefix = default_bucket_prefix
        self._bucket_name = default_bucket
        self._bucket_ready = False
        self._account: str | None = None

    def client(self, service: str) -> Any:
        return self.boto_session.client(service, region_name=self.boto_region_name)

    def account_id(self) -> str:
        if self._account is None:
            self._account = str(self.client("sts").get_caller_identity()["Account"])
        return self._account

    def default_bucket(self) -> str:
        """`sagemaker-{region}-{account}` (or the name given), created if it does not exist yet."""
        if self._bucket_ready and self._bucket_name:
            return self._bucket_name
        name = self._bucket_name or f"sagemaker-{self.boto_region_name}-{self.account_id()}"
        s3 = self.client("s3")
        try:
            s3.head_bucket(Bucket=name)
        except s3.exceptions.ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code not in ("404", "NoSuchBucket", "NotFound"):
                raise CloudDDPError(
                    f"the default bucket s3://{name} cannot be used ({code}): it may belong to another account. "
                    f"Pass default_bucket= to Session(), or output_path= to PyTorch()."
                ) from None
            kwargs: dict[str, Any] = {"Bucket": name}
            if self.boto_region_name != "us-east-1":
                kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.boto_region_name}
            s3.create_bucket(**kwargs)
        self._bucket_name, self._bucket_ready = name, True
        return name

    def upload_data(self, path: str, bucket: str | None = None, key_prefix: str = "data") -> str:
        """Upload a file or a folder; returns its S3 URI (v2: the prefix for a folder, the object for a file)."""
        local = Path(path)
        if not local.exists():
            raise CloudDDPError(f"upload_data: path {path!r} does not exist.")
        bucket = bucket or self.default_bucket()
        prefix = "/".join(p for p in ((self.default_bucket_prefix or "") if bucket == self._bucket_name else "",
                                      key_prefix.strip("/")) if p)  # fmt: skip
        s3 = self.client("s3")
        if local.is_file():
            key = f"{prefix}/{local.name}" if prefix else local.name
            s3.upload_file(str(local), bucket, key)
            return f"s3://{bucket}/{key}"
        for file in sorted(p for p in local.rglob("*") if p.is_file()):
            relative = file.relative_to(local).as_posix()
            s3.upload_file(str(file), bucket, f"{prefix}/{relative}" if prefix else relative)
        return f"s3://{bucket}/{prefix}"


def role_from_identity(arn: str) -> str:
    """The role ARN behind a caller identity: a role itself, or the role of an assumed-role session."""
    if ":role/" in arn:
        return arn
    if ":assumed-role/" in arn:
        account = arn.split(":")[4]
        return f"arn:aws:iam::{account}:role/{arn.split(':assumed-role/', 1)[1].split('/')[0]}"
    raise CloudDDPError(
        f"get_execution_role(): the current AWS identity is not a role ({arn}), so it cannot be a SageMaker "
        f"execution role. Pass role='arn:aws:iam::<account>:role/<name>' to PyTorch(...) instead."
    )


def get_execution_role(sagemaker_session: Any = None) -> str:
    """The IAM role of the current credentials, as v2's `get_execution_role` finds it (roles only)."""
    session = sagemaker_session or Session()
    return role_from_identity(str(session.client("sts").get_caller_identity()["Arn"]))
