# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""The estimator's v2 attributes read as v2 stores them, and refusals that name the v2 arguments the notebook set.

From aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0):
src/sagemaker/estimator.py (`EstimatorBase.__init__`, `enable_network_isolation`, `Framework.training_image_uri`),
src/sagemaker/pytorch/estimator.py (`self.distribution = distribution or {}`), src/sagemaker/utils.py
(`format_tags`), src/sagemaker/vpc_utils.py (`to_dict`), src/sagemaker/job.py (`_prepare_stop_condition`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sdk2_moto import MotoServer, moto, source  # noqa: F401  (moto and source are fixtures)

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker import InstanceGroup, PyTorch, Session

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BASE: dict[str, Any] = {
    "entry_point": "train.py", "role": ROLE, "framework_version": "2.5", "py_version": "py311",
    "instance_count": 2, "instance_type": "ml.g5.xlarge",
}  # fmt: skip
TORCHRUN = {"torch_distributed": {"enabled": True}}


@pytest.fixture(autouse=True)
def region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def estimator(source: Path, **overrides: Any) -> PyTorch:
    return PyTorch(**{**BASE, "source_dir": str(source), **overrides})


def sent_nothing(moto: MotoServer) -> bool:
    return [n for n, _ in moto.calls if n in ("PutObject", "CreateTrainingJob", "CreateMultipartUpload")] == []


# -- A: attributes as v2 stores them ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("distribution", "stored"),
    [
        (TORCHRUN, TORCHRUN),
        ({"torch_distributed": {"enabled": False}}, {"torch_distributed": {"enabled": False}}),
        ({"pytorchddp": {"enabled": True}}, {"smdistributed": {"dataparallel": {"enabled": True}}}),
        (None, {}),
        ({}, {}),
    ],
)
def test_distribution_reads_the_dict_v2_stores(distribution: Any, stored: dict[str, Any], source: Path) -> None:
    est = estimator(source, framework_version="2.2.0", py_version="py310", distribution=distribution)  # v2 takes both
    assert est.distribution == stored
    assert est.args.distribution == (next(iter(distribution)) if distribution and "pytorchddp" in distribution
                                      else "torch_distributed" if distribution == TORCHRUN else None)  # fmt: skip


def test_distribution_names_the_chosen_instance_group_as_v2_does(source: Path) -> None:
    groups = [InstanceGroup("train", "ml.g5.12xlarge", 2)]
    est = estimator(source, instance_count=None, instance_type=None, instance_groups=groups, distribution=TORCHRUN,
                    framework_version="2.5.1")  # fmt: skip
    assert est.distribution == {**TORCHRUN, "instance_groups": ["train"]}


def test_tags_read_as_v2_formats_them_and_are_still_sent(source: Path, moto: MotoServer) -> None:
    as_list = [{"Key": "team", "Value": "ml"}]
    assert estimator(source, tags=as_list).tags == as_list
    assert estimator(source).tags is None
    est = estimator(source, tags={"team": "ml", "n": 1}, sagemaker_session=Session())
    assert est.tags == [{"Key": "team", "Value": "ml"}, {"Key": "n", "Value": "1"}]
    est.fit("s3://data/all", wait=False)
    (sent,) = moto.created()
    assert sent["Tags"] == [{"Key": "team", "Value": "ml"}, {"Key": "n", "Value": "1"}]


def test_training_image_uri_is_the_image_sent(source: Path, moto: MotoServer) -> None:
    est = estimator(source, sagemaker_session=Session())
    est.fit("s3://data/all", wait=False)
    (sent,) = moto.created()
    assert est.training_image_uri() == sent["AlgorithmSpecification"]["TrainingImage"]
    assert est.training_image_uri().endswith("/pytorch-training:2.5-gpu-py311")
    assert est.training_image_uri(region="eu-west-1").startswith("763104351884.dkr.ecr.eu-west-1.amazonaws.com/")
    assert estimator(source, image_uri="my/image:1").training_image_uri() == "my/image:1"


def test_enable_network_isolation_is_a_method_as_in_v2(source: Path, moto: MotoServer) -> None:
    assert estimator(source).enable_network_isolation() is False
    est = estimator(source, enable_network_isolation=True, sagemaker_session=Session())
    assert est.enable_network_isolation() is True
    est.fit("s3://data/all", wait=False)
    assert moto.created()[0]["EnableNetworkIsolation"] is True


def test_kms_keys_and_debugger_hook_config_read_as_passed(source: Path) -> None:
    est = estimator(source, output_kms_key="alias/out", debugger_hook_config=False)
    assert (est.output_kms_key, est.volume_kms_key, est.debugger_hook_config) == ("alias/out", None, False)
    plain = estimator(source, volume_kms_key="alias/vol")
    assert (plain.output_kms_key, plain.volume_kms_key, plain.debugger_hook_config) == (None, "alias/vol", None)


# -- B: refusals named by the v2 arguments -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"subnets": ["subnet-0123456789abcdef0"]}, r"PyTorch\(subnets=\[.*pass security_group_ids=\[\.\.\.\] too"),
        ({"security_group_ids": ["sg-0123456789abcdef0"]}, r"PyTorch\(security_group_ids=.*pass subnets=\[\.\.\.\]"),
        ({"max_wait": 90000}, r"PyTorch\(max_wait=90000\): applies to spot jobs only: pass use_spot_instances=True"),
        ({"use_spot_instances": True}, r"PyTorch\(use_spot_instances=True\) needs max_wait="),
        ({"use_spot_instances": True, "max_run": 7200, "max_wait": 3600}, r"max_wait=3600\): is shorter than max_run"),
        ({"max_run": 29 * 86400}, r"PyTorch\(max_run=2505600\): SageMaker's maximum is 28 days"),
        ({"output_path": "s3://Bad_Bucket/x"}, r"PyTorch\(output_path='s3://Bad_Bucket/x'\): is not an s3://"),
    ],
)
def test_cluster_settings_sagemaker_refuses_name_the_v2_arguments(
    overrides: dict[str, Any], message: str, source: Path
) -> None:
    with pytest.raises(CloudDDPError, match=message) as error:
        estimator(source, **overrides)
    assert "--" not in str(error.value)  # no CLI flag names
    assert error.value.exit_code == 2


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ("file:///tmp/x", r"fit\(inputs='file:///tmp/x'\): a SageMaker job reads s3:// URIs \(file:// works with"),
        ({"train": "gs://b/d"}, r"fit\(inputs=\{'train': 'gs://b/d'\}\): a SageMaker job reads s3:// URIs\.$"),
        ({"my data": "s3://b/d"}, r"fit\(inputs=\{'my data': 's3://b/d'\}\): channel names are"),
        ({"cloudddp_code": "s3://b/d"}, r"the channel name 'cloudddp_code' is cloudddp's"),
        ({"train": "no-such-folder"}, r"fit\(inputs=\{'train': 'no-such-folder'\}\): the local path .* not exist"),
        ({"train": "s3://x/d"}, r"'s3://x/d' is not an s3://bucket/prefix URI"),
    ],
)
def test_fit_inputs_sagemaker_refuses_name_fit_inputs(
    inputs: Any, message: str, source: Path, moto: MotoServer
) -> None:
    est = estimator(source, sagemaker_session=Session())
    with pytest.raises(CloudDDPError, match=message) as error:
        est.fit(inputs, wait=False)
    assert "--input" not in str(error.value)
    assert sent_nothing(moto)


def test_a_missing_output_path_bucket_names_output_path(source: Path, moto: MotoServer) -> None:
    est = estimator(source, output_path="s3://no-such-bucket/models", sagemaker_session=Session())
    with pytest.raises(CloudDDPError, match=r"PyTorch\(output_path='s3://no-such-bucket/models'\): the bucket "
                       r"'no-such-bucket' does not exist") as error:  # fmt: skip
        est.fit("s3://data/all", wait=False)
    assert "--bucket" not in str(error.value)
    assert sent_nothing(moto)
    moto.client("s3").create_bucket(Bucket="no-such-bucket")
    est.fit("s3://data/all", wait=False)
    assert moto.created()[0]["OutputDataConfig"]["S3OutputPath"] == "s3://no-such-bucket/models"


def test_a_default_bucket_prefix_of_slash_adds_no_empty_folder(source: Path, moto: MotoServer) -> None:
    session = Session()
    session.default_bucket_prefix = "/"
    estimator(source, sagemaker_session=session).fit("s3://data/all", wait=False)
    (sent,) = moto.created()
    assert sent["OutputDataConfig"]["S3OutputPath"] == f"s3://{session.default_bucket()}/"
