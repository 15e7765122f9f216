# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""Findings on the v2 constructor: old `train_*` names, hyperparameters v2 takes, the role, errors named as the
notebook wrote them, and requirements.txt where nothing installs it.

Upstream behaviour (each test cites its own):
- aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0): src/sagemaker/estimator.py
  `EstimatorBase.__init__` (renamed_kwargs calls, the role ValueError) and `_json_encode_hyperparameters`;
  src/sagemaker/deprecations.py `renamed_kwargs` / `renamed_warning` / `_warn`.
- aws/sagemaker-training-toolkit commit 33839372: src/sagemaker_training/mapping.py `to_cmd_args`, `_decode`;
  src/sagemaker_training/entry_point.py `install` (requirements.txt).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from sdk2_moto import MotoServer, moto, source  # noqa: F401  (moto and source are fixtures)

from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker import validation
from cloudddp.sagemaker import PyTorch, Session

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BASE: dict[str, Any] = {
    "entry_point": "train.py", "role": ROLE, "framework_version": "2.5", "py_version": "py311",
    "instance_count": 1, "instance_type": "ml.m5.xlarge",
}  # fmt: skip
SECRET = "TOPSECRET"
CUSTOM_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-trainer:latest"


@pytest.fixture(autouse=True)
def region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("CLOUDDDP_SAGEMAKER_ROLE", raising=False)


def estimator(source: Path, **overrides: Any) -> PyTorch:
    arguments = {**BASE, "source_dir": str(source), **overrides}
    return PyTorch(**{k: v for k, v in arguments.items() if v is not ...})


# -- 1. the old train_* names (v2.257.6 src/sagemaker/estimator.py EstimatorBase.__init__, renamed_kwargs) --------

# src/sagemaker/deprecations.py v2.257.6: renamed_warning(old) -> _warn(f"{old} has been renamed") ->
# f"{msg} in sagemaker>=2.\nSee: {V2_URL} for details.", a DeprecationWarning and logger.warning.
RENAMED_TEXT = (
    "{} has been renamed in sagemaker>=2.\nSee: https://sagemaker.readthedocs.io/en/stable/v2.html for details."
)


def test_the_old_train_names_are_used_under_the_new_ones_with_v2s_warning(
    source: Path, moto: MotoServer, caplog: pytest.LogCaptureFixture
) -> None:
    kms = "arn:aws:kms:us-east-1:123456789012:key/abc"
    old = {
        "train_instance_count": 2, "train_instance_type": "ml.m5.xlarge", "train_max_run": 3600,
        "train_use_spot_instances": True, "train_max_wait": 7200, "train_volume_size": 50,
        "train_volume_kms_key": kms,
    }  # fmt: skip
    with caplog.at_level(logging.WARNING), pytest.warns(DeprecationWarning) as warned:
        est = estimator(source, instance_count=..., instance_type=..., sagemaker_session=Session(), **old)
    assert [str(w.message) for w in warned] == [RENAMED_TEXT.format(name) for name in old]
    assert [r.getMessage() for r in caplog.records if "renamed" in r.getMessage()] == [
        RENAMED_TEXT.format(name) for name in old
    ]
    est.fit("s3://data/all", wait=False)
    (sent,) = moto.created()
    assert sent["ResourceConfig"] == {
        "InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50, "VolumeKmsKeyId": kms,
    }  # fmt: skip
    assert sent["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert sent["EnableManagedSpotTraining"] is True
    assert (est.instance_count, est.instance_type, est.max_run, est.volume_size) == (2, "ml.m5.xlarge", 3600, 50)


def test_given_both_names_the_old_one_wins_as_in_v2(source: Path) -> None:
    """renamed_kwargs: `value = kwargs.get(old_name, value)` replaces the new name's value."""
    with pytest.warns(DeprecationWarning, match="train_instance_count has been renamed"):
        est = estimator(source, instance_count=1, train_instance_count=3)
    assert est.instance_count == 3


# -- 2. hyperparameters: anything JSON, keys str()'d (v2.257.6 estimator.py `_json_encode_hyperparameters`) --------


def test_a_non_string_key_is_sent_as_its_string_and_the_value_as_given(source: Path, moto: MotoServer) -> None:
    # (A secret-named one is refused by fit(): HyperParameters are shown in clear; tests/test_secrets_policy.py.)
    est = estimator(source, hyperparameters={"label": SECRET, 1: 2}, sagemaker_session=Session())
    assert est.hyperparameters() == {"label": json.dumps(SECRET), "1": "2"}  # v2: {str(k): json.dumps(v)}
    est.fit("s3://data/all", wait=False)
    (sent,) = moto.created()
    assert (sent["HyperParameters"]["label"], sent["HyperParameters"]["1"]) == (json.dumps(SECRET), "2")


@pytest.mark.parametrize(
    "hyperparameters",
    [
        {"api_key": {SECRET}},  # not JSON: refused
        {"hf_token": [SECRET, float("nan")]},  # NaN: refused
        {"db_password": [SECRET], 1: object()},
        {"db_password": [SECRET], "lr": float("inf")},
    ],
)
def test_no_hyperparameter_message_shows_a_secret_named_value(source: Path, hyperparameters: dict[Any, Any]) -> None:
    with pytest.raises(CloudDDPError) as error:
        estimator(source, hyperparameters=hyperparameters)
    assert SECRET not in str(error.value)
    assert "PyTorch(hyperparameters=" in str(error.value)


def test_a_secret_in_a_list_is_not_shown_where_lists_are_refused_either(source: Path) -> None:
    with pytest.raises(CloudDDPError) as error:
        estimator(source, hyperparameters={"db_password": [SECRET]})
    assert SECRET not in str(error.value) and "'db_password': '***'" in str(error.value)


# -- 3. the role, and errors named as the notebook wrote them ---------------------------------------------------


def test_no_role_is_v2s_value_error_in_the_constructor_before_any_call(
    source: Path, moto: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v2.257.6 estimator.py EstimatorBase.__init__: `if not self.role: raise ValueError("An AWS IAM role is
    required to create an estimator. ...")`."""
    with pytest.raises(ValueError, match=r"^An AWS IAM role is required to create an estimator\. Please provide"):
        estimator(source, role=..., sagemaker_session=Session())
    assert moto.calls == []
    estimator(source, role=..., instance_type="local")  # no SageMaker job: cloudddp's local mode needs none
    monkeypatch.setenv("CLOUDDDP_SAGEMAKER_ROLE", ROLE)  # cloudddp's default role, as v2's config file gives one
    estimator(source, role=...)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"instance_type": "ml.foo.xlarge"}, "PyTorch(instance_type='ml.foo.xlarge') is not a SageMaker training"),
        ({"environment": {"MY-VAR": "x"}}, "PyTorch(environment={'MY-VAR': ...}): environment variable names"),
        ({"environment": {"BIG": "x" * 600}}, "PyTorch(environment={'BIG': ...}): the value is 600 characters"),
        ({"tags": [{"Key": "aws:x", "Value": "y"}]}, "PyTorch(tags=[{'Key': 'aws:x', ...}]): tag keys are"),
        ({"tags": {"team": "a\tb"}}, "PyTorch(tags=[{'Key': 'team', 'Value': 'a\\tb'}]): tag values are"),
        ({"checkpoint_s3_uri": "s3://Bad_Bucket/x"}, "PyTorch(checkpoint_s3_uri='s3://Bad_Bucket/x'): is not an s3"),
        ({"output_kms_key": "not a key!"}, "PyTorch(output_kms_key='not a key!'): is not a KMS key"),
        ({"image_uri": CUSTOM_IMAGE + "x" * 300}, "PyTorch(image_uri=...) is 362 characters"),
    ],
)
def test_the_drop_ins_errors_name_the_constructor_argument(
    source: Path, moto: MotoServer, overrides: dict[str, Any], named: str
) -> None:
    with pytest.raises(CloudDDPError) as error:
        estimator(source, sagemaker_session=Session(), **overrides).fit("s3://data/all", wait=False)
    assert named in str(error.value)
    assert not any(flag in str(error.value) for flag in ("--instance-type", "--env", "--tag", "--checkpoint-s3"))
    assert moto.calls == []


def test_the_cli_keeps_its_flags() -> None:
    with pytest.raises(CloudDDPError, match=r"^--instance-type 'ml.foo.xlarge' is not"):
        validation.check_instance("ml.foo.xlarge")
    with pytest.raises(CloudDDPError, match=r"^--env 'MY-VAR': environment variable names"):
        validation.check_environment({"MY-VAR": "x"})
    with pytest.raises(CloudDDPError, match=r"^--tag 'aws:x': tag keys"):
        validation.check_tags({"aws:x": "y"})


# -- 4. requirements.txt where SageMaker's training toolkit does not run (toolkit 33839372 entry_point.install) ---

WARNING = "requirements.txt is not installed"


@pytest.mark.parametrize(
    ("image", "warned"),
    [({}, False), ({"image_uri": CUSTOM_IMAGE, "framework_version": None, "py_version": None}, True)],
)
def test_a_custom_image_warns_that_requirements_txt_is_not_installed(
    source: Path, moto: MotoServer, capsys: pytest.CaptureFixture[str], image: dict[str, Any], warned: bool
) -> None:
    (source / "requirements.txt").write_text("einops\n")
    estimator(source, sagemaker_session=Session(), **image).fit("s3://data/all", wait=False)
    (sent,) = moto.created()
    assert ("ContainerEntrypoint" in sent["AlgorithmSpecification"]) is warned  # the mode without the toolkit
    lines = [line for line in capsys.readouterr().out.splitlines() if WARNING in line]
    assert len(lines) == int(warned)
    if warned:
        assert lines[0].startswith("cloudddp: warning: ") and "requirements.txt" in lines[0]
        assert "pip install -r requirements.txt" in lines[0] and "image" in lines[0]


def test_local_mode_warns_that_requirements_txt_is_not_installed(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    estimator(source, instance_type="local")
    assert WARNING not in capsys.readouterr().out
    (source / "requirements.txt").write_text("einops\n")
    estimator(source, instance_type="local")
    (line,) = [line for line in capsys.readouterr().out.splitlines() if WARNING in line]
    assert line.startswith(f"cloudddp: warning: {source / 'requirements.txt'} is not installed")
    assert f"pip install -r {source / 'requirements.txt'}" in line


# -- local_gpu on several hosts (v2.257.6 src/sagemaker/estimator.py EstimatorBase.__init__) ----------------------


def test_local_gpu_on_several_hosts_is_v2s_runtime_error(source: Path) -> None:
    # Before: accepted, and every emulated host's ranks ran on the same GPUs of this machine.
    with pytest.raises(
        RuntimeError, match=r"^Distributed Training in Local GPU is not supported\. Set instance_count to 1\.$"
    ):
        estimator(source, instance_type="local_gpu", instance_count=2, role=...)
    assert estimator(source, instance_type="local_gpu", instance_count=1, role=...).instance_count == 1
    assert estimator(source, instance_type="local", instance_count=2, role=...).instance_count == 2
