"""`Session` and `get_execution_role`: the parts of the SDK v2's `sagemaker.Session` a training notebook uses.

Region, default bucket (`sagemaker-{region}-{account}`, created on first use as v2's
`Session.default_bucket()` does), `upload_data` and the boto3 session underneath. A real
SDK v2 `sagemaker.Session` works in its place: the drop-in only reads `boto_region_name`,
`default_bucket()`, `default_bucket_prefix` and `boto_session` from it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError

# aws/sagemaker-python-sdk v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0), src/sagemaker/session.py
# `Session.get_caller_identity_arn`: the name v2 takes the role's IAM path for when iam:GetRole is refused (roles
# the SageMaker console makes live under /service-role/).
CONSOLE_ROLE = "AmazonSageMaker-ExecutionRole"
# An assumed-role caller `arn:<partition>:sts::<account>:assumed-role/<role>[/<session>]` (same function's regex).
ASSUMED_ROLE = re.compile(r"^(arn:[^:]+:)sts::(\d+):assumed-role/([^/]+)")


@contextlib.contextmanager
def aws_errors(action: str) -> Iterator[None]:
    """botocore's own failures (no credentials, an endpoint that does not answer, a misspelt profile) as cloudddp's
    one-paragraph CloudDDPError (`cloudddp.providers.sagemaker.aws.translate`), not a traceback. S3's and the
    services' answers (ClientError) are left as they are: v2 raises them and the callers here read their codes."""
    try:
        yield
    except Exception as exc:
        exceptions = sys.modules.get("botocore.exceptions")  # not imported: the failure cannot be botocore's
        if exceptions is None or not isinstance(exc, exceptions.BotoCoreError):  # ClientError is not one
            raise
        from cloudddp.providers.sagemaker.aws import translate

        raise translate(exc, action) from None


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
            with aws_errors("read your AWS account (sts:GetCallerIdentity)"):
                self._account = str(self.client("sts").get_caller_identity()["Account"])
        return self._account

    def default_bucket(self) -> str:
        """`sagemaker-{region}-{account}` (or the name given), created if it does not exist yet."""
        if self._bucket_ready and self._bucket_name:
            return self._bucket_name
        name = self._bucket_name or f"sagemaker-{self.boto_region_name}-{self.account_id()}"
        with aws_errors(f"find or create the default bucket s3://{name}"):
            self._ensure_bucket(name)
        self._bucket_name, self._bucket_ready = name, True
        return name

    def _ensure_bucket(self, name: str) -> None:
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

    def upload_data(self, path: str, bucket: str | None = None, key_prefix: str = "data") -> str:
        """Upload a file or a folder; returns its S3 URI (v2: the prefix for a folder, the object for a file)."""
        local = Path(path)
        if not local.exists():
            raise CloudDDPError(f"upload_data: path {path!r} does not exist.")
        # aws/sagemaker-python-sdk v2.257.6 (fc582aaa), src/sagemaker/s3_utils.py `determine_bucket_and_prefix`: the
        # session's default_bucket_prefix is added only when no bucket is given, never to a bucket passed in, even
        # one equal to the default bucket.
        prefixes = [key_prefix or ""]
        if not bucket:
            bucket = self.default_bucket()
            prefixes.insert(0, self.default_bucket_prefix or "")
        prefix = "/".join(p.strip("/") for p in prefixes if p.strip("/"))
        s3 = self.client("s3")
        with aws_errors(f"upload {path} to s3://{bucket}/{prefix}"):
            if local.is_file():
                key = f"{prefix}/{local.name}" if prefix else local.name
                s3.upload_file(str(local), bucket, key)
                return f"s3://{bucket}/{key}"
            for file in sorted(p for p in local.rglob("*") if p.is_file()):
                relative = file.relative_to(local).as_posix()
                s3.upload_file(str(file), bucket, f"{prefix}/{relative}" if prefix else relative)
        return f"s3://{bucket}/{prefix}"


def role_from_identity(arn: str) -> str:
    """The role ARN behind a caller identity: a role itself, or the role of an assumed-role session, in the caller's
    partition (aws, aws-cn, aws-us-gov) as v2 keeps it (aws/sagemaker-python-sdk v2.257.6, src/sagemaker/session.py
    `get_caller_identity_arn` rewrites `<prefix>sts::<account>:assumed-role/<role>/...` to
    `<prefix>iam::<account>:role/<role>`, the prefix `arn:<partition>:` kept)."""
    if ":role/" in arn:
        return arn
    assumed = ASSUMED_ROLE.match(arn)
    if assumed:
        return f"{assumed.group(1)}iam::{assumed.group(2)}:role/{assumed.group(3)}"
    raise CloudDDPError(
        f"get_execution_role(): the current AWS identity is not a role ({arn}), so it cannot be a SageMaker "
        f"execution role. Pass role='arn:aws:iam::<account>:role/<name>' to PyTorch(...) instead."
    )


def with_role_path(boto_session: Any, role: str, caller: str) -> str:
    """The role ARN with its IAM path (`role/service-role/Name`), as v2's `get_caller_identity_arn` recovers it:
    iam:GetRole; where that is refused, `service-role/` for the console's AmazonSageMaker-ExecutionRole-* roles."""
    from botocore.exceptions import ClientError

    name = role[role.rfind("/") + 1 :]
    try:
        with aws_errors(f"read the IAM role {name} (iam:GetRole)"):
            return str(boto_session.client("iam").get_role(RoleName=name)["Role"]["Arn"])
    except ClientError:  # v2 logs a warning and goes on
        if CONSOLE_ROLE in caller and ":assumed-role/" in caller:  # `role` is that session's role
            return role.replace(":role/", ":role/service-role/", 1)
        return role


def get_execution_role(sagemaker_session: Any = None) -> str:
    """The IAM role of the current credentials, as v2's `get_execution_role` finds it (roles only), with the role's
    IAM path (aws/sagemaker-python-sdk v2.257.6, fc582aaa, src/sagemaker/session.py `get_caller_identity_arn`).
    Works with an SDK v2 `sagemaker.Session` too (its boto_session and boto_region_name)."""
    session = sagemaker_session or Session()
    boto_session = session.boto_session
    with aws_errors("find the role of your AWS credentials (sts:GetCallerIdentity)"):
        sts = boto_session.client("sts", region_name=session.boto_region_name)
        caller = str(sts.get_caller_identity()["Arn"])
    return with_role_path(boto_session, role_from_identity(caller), caller)
