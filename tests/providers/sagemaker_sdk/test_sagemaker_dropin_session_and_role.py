# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""Session and get_execution_role against the SDK v2's own behaviour, on a moto server.

Upstream: aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0):
- src/sagemaker/session.py `Session.get_caller_identity_arn`: the assumed role's ARN rebuilt from the STS caller
  identity, then `iam.get_role(RoleName=...)["Role"]["Arn"]` for its IAM path; if GetRole fails, a role whose name
  holds `AmazonSageMaker-ExecutionRole` is put under `role/service-role/`.
- src/sagemaker/s3_utils.py `determine_bucket_and_prefix` (used by `Session.upload_data`): the session's
  default_bucket_prefix is added only when no bucket is passed, "even if the bucket exists but is equal to the
  default_bucket".
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from sdk2_moto import REGION, MotoServer, moto, no_credentials  # noqa: F401  (moto and no_credentials are fixtures)

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker import Session, get_execution_role

ACCOUNT = "123456789012"  # moto's account
CONSOLE_ROLE = "AmazonSageMaker-ExecutionRole-20240101T000000"  # the name the SageMaker console gives a role
TRUST = json.dumps({"Version": "2012-10-17", "Statement": []})


def assumed_session(moto: MotoServer, name: str, path: str) -> tuple[Session, str]:
    """A Session on the credentials of the role `path`+`name` (created in moto), assumed; and the role's real ARN."""
    arn = moto.client("iam").create_role(RoleName=name, Path=path, AssumeRolePolicyDocument=TRUST)["Role"]["Arn"]
    credentials = moto.client("sts").assume_role(RoleArn=arn, RoleSessionName="SageMaker")["Credentials"]
    boto_session = boto3.Session(
        aws_access_key_id=credentials["AccessKeyId"], aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"], region_name=REGION,
    )  # fmt: skip
    caller = boto_session.client("sts").get_caller_identity()["Arn"]
    assert caller == f"arn:aws:sts::{ACCOUNT}:assumed-role/{name}/SageMaker"  # no path in an assumed-role ARN
    return Session(boto_session=boto_session), str(arn)


@pytest.mark.parametrize(("name", "path"), [(CONSOLE_ROLE, "/service-role/"), ("TeamTraining", "/teams/ml/")])
def test_the_execution_role_keeps_its_iam_path(name: str, path: str, moto: MotoServer) -> None:
    session, arn = assumed_session(moto, name, path)
    assert arn == f"arn:aws:iam::{ACCOUNT}:role{path}{name}"
    assert get_execution_role(session) == arn
    assert "GetRole" in [operation for operation, _ in moto.calls]


def test_a_console_role_iam_cannot_describe_is_put_under_service_role_as_v2_does(moto: MotoServer) -> None:
    session, arn = assumed_session(moto, CONSOLE_ROLE, "/service-role/")
    moto.client("iam").delete_role(RoleName=CONSOLE_ROLE)  # GetRole now fails (NoSuchEntity), as if refused
    assert get_execution_role(session) == arn == f"arn:aws:iam::{ACCOUNT}:role/service-role/{CONSOLE_ROLE}"


def test_another_role_iam_cannot_describe_is_returned_without_a_path(moto: MotoServer) -> None:
    session, _ = assumed_session(moto, "Ops", "/teams/")
    moto.client("iam").delete_role(RoleName="Ops")
    assert get_execution_role(session) == f"arn:aws:iam::{ACCOUNT}:role/Ops"


def test_upload_data_adds_the_default_prefix_only_when_no_bucket_is_given(moto: MotoServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.csv").write_text("1\n")
    session = Session(default_bucket_prefix="team")
    bucket = session.default_bucket()
    assert session.upload_data(str(tmp_path / "d"), key_prefix="one") == f"s3://{bucket}/team/one"
    assert session.upload_data(str(tmp_path / "d"), bucket=bucket, key_prefix="two") == f"s3://{bucket}/two"
    assert moto.keys(bucket) == ["team/one/x.csv", "two/x.csv"]


def no_credentials_error(call: object) -> CloudDDPError:
    with pytest.raises(CloudDDPError, match=r"^no AWS credentials found while trying to .*aws configure") as error:
        call()  # type: ignore[operator]
    assert error.value.__suppress_context__ and error.value.__cause__ is None  # one paragraph, no traceback
    return error.value


def test_missing_credentials_are_one_clear_paragraph_not_a_botocore_traceback(
    no_credentials: MotoServer, tmp_path: Path
) -> None:
    (tmp_path / "d.csv").write_text("1\n")
    no_credentials_error(get_execution_role)
    no_credentials_error(lambda: Session().default_bucket())
    no_credentials_error(lambda: Session().upload_data(str(tmp_path / "d.csv")))
    no_credentials_error(lambda: Session(default_bucket="given").upload_data(str(tmp_path / "d.csv")))
    no_credentials_error(lambda: Session().upload_data(str(tmp_path / "d.csv"), bucket="mine"))
    assert buckets() == []  # nothing was created


def buckets() -> list[str]:
    """The moto server's buckets, read with moto's test credentials (the environment has none)."""
    s3 = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION).client("s3")
    return [bucket["Name"] for bucket in s3.list_buckets()["Buckets"]]
