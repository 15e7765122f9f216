# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""cloudddp.sagemaker.Session and get_execution_role: the SDK v2 conventions a notebook relies on."""

from __future__ import annotations

from pathlib import Path

import pytest
from sdk2_moto import MotoServer, moto  # noqa: F401  (moto is a fixture)

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker import Session, get_execution_role
from cloudddp.sagemaker.session import role_from_identity


def test_default_bucket_is_created_once_and_named_like_the_sdks(moto: MotoServer) -> None:
    session = Session()
    assert session.default_bucket() == "sagemaker-us-east-1-123456789012"
    assert session.default_bucket() == "sagemaker-us-east-1-123456789012"
    assert [name for name, _ in moto.calls].count("CreateBucket") == 1


def test_upload_data_returns_the_prefix_for_a_folder_and_the_object_for_a_file(
    moto: MotoServer, tmp_path: Path
) -> None:
    (tmp_path / "data" / "a").mkdir(parents=True)
    (tmp_path / "data" / "a" / "x.csv").write_text("1\n")
    (tmp_path / "single.csv").write_text("2\n")
    session = Session(default_bucket="my-data")
    assert session.upload_data(str(tmp_path / "data"), key_prefix="sets/one") == "s3://my-data/sets/one"
    assert session.upload_data(str(tmp_path / "single.csv")) == "s3://my-data/data/single.csv"
    assert moto.keys("my-data") == ["data/single.csv", "sets/one/a/x.csv"]
    with pytest.raises(CloudDDPError, match="does not exist"):
        session.upload_data(str(tmp_path / "missing"))


def test_execution_role_is_the_callers_role_or_a_clear_error(moto: MotoServer) -> None:
    assert role_from_identity("arn:aws:iam::111122223333:role/Ops") == "arn:aws:iam::111122223333:role/Ops"
    assert role_from_identity("arn:aws:sts::111122223333:assumed-role/SageMakerRole/SageMaker") == (
        "arn:aws:iam::111122223333:role/SageMakerRole"
    )
    with pytest.raises(CloudDDPError, match=r"not a role \(arn:aws:sts::123456789012:user/moto\)"):
        get_execution_role()  # moto's caller is a user
