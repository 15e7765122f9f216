# ruff: noqa: F811  (the source fixture imported from sdk2_moto is redefined as an argument)
"""input_mode="FastFile" is sent as SDK v2 sends it; local mode reads the channels as File.

Upstream: aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0):
src/sagemaker/estimator.py `_TrainingJob._get_train_args` (train_args["input_mode"] = estimator.input_mode),
src/sagemaker/session.py `_get_train_request` ("AlgorithmSpecification": {"TrainingInputMode": input_mode}), and
src/sagemaker/local/image.py `_SageMakerContainer.write_config_files` (inputdataconfig.json gets
{"TrainingInputMode": "File"} for every channel, whatever the estimator's input_mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sdk2_moto import source  # noqa: F401  (a fixture)

from cloudddp.cluster import sagemaker
from cloudddp.cluster.environment import EmulatedCluster
from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker.request import build_request
from cloudddp.sagemaker import PyTorch

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture(autouse=True)
def region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def estimator(source: Path, **overrides: Any) -> PyTorch:
    arguments = {"entry_point": "train.py", "source_dir": str(source), "role": ROLE, "framework_version": "2.5.1",
                 "py_version": "py311", "instance_count": 2, "instance_type": "ml.g5.2xlarge",
                 "output_path": "s3://bucket/out"}  # fmt: skip
    return PyTorch(**{**arguments, **overrides})


def sent_request(est: PyTorch, scratch: Path) -> dict[str, Any]:
    """The CreateTrainingJob request fit() would send (built in process, nothing sent)."""
    spec = est.sagemaker_spec({"train": "s3://data/train"}, "job-1", scratch)
    sm = spec.sagemaker
    rendered = build_request(spec, job_name="job-1", region="us-east-1", role=ROLE, image=sm.image or "",
                             bucket=sm.bucket or "bucket")  # fmt: skip
    return rendered.payload


@pytest.mark.parametrize("mode", ["FastFile", "File"])
def test_input_mode_is_sent_as_training_input_mode(source: Path, tmp_path: Path, mode: str) -> None:
    est = estimator(source, input_mode=mode)
    assert est.input_mode == mode
    assert sent_request(est, tmp_path)["AlgorithmSpecification"]["TrainingInputMode"] == mode


def test_default_input_mode_is_file(source: Path, tmp_path: Path) -> None:
    assert sent_request(estimator(source), tmp_path)["AlgorithmSpecification"]["TrainingInputMode"] == "File"


def test_local_mode_takes_fastfile_and_reads_channels_as_file(source: Path, tmp_path: Path) -> None:
    est = estimator(source, input_mode="FastFile", instance_type="local", output_path=None)
    assert est.input_mode == "FastFile"
    cluster = EmulatedCluster(nodes=1, job_name="job-1", run_dir=tmp_path / "run", channels=("train",))
    (node,) = sagemaker.emulate(cluster, {"SM_NUM_GPUS": "0", "SM_NUM_NEURONS": "0"})
    config = node.root / "input" / "config" / "inputdataconfig.json"
    assert node.files[config]["train"]["TrainingInputMode"] == "File"


def test_pipe_is_still_refused(source: Path) -> None:
    with pytest.raises(CloudDDPError, match="input_mode='Pipe'"):
        estimator(source, input_mode="Pipe")
