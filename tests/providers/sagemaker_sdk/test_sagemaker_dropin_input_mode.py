# ruff: noqa: F811  (the source fixture imported from sdk2_moto is redefined as an argument)
"""input_mode="FastFile" is sent as SDK v2 sends it; local mode hands it on and reads the channels as File.

Upstream: aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0):
src/sagemaker/estimator.py `_TrainingJob._get_train_args` (train_args["input_mode"] = estimator.input_mode),
src/sagemaker/session.py `_get_train_request` ("AlgorithmSpecification": {"TrainingInputMode": input_mode}), and
src/sagemaker/local/image.py `_SageMakerContainer.write_config_files` (inputdataconfig.json gets
{"TrainingInputMode": "File"} for every channel, whatever the estimator's input_mode). What sagemaker 2.257.7
sends for FastFile is recorded (sdk2_requests/sagemaker-2.257.7/fastfile.json, compared field by field in
test_sagemaker_dropin_requests.py) and what its local mode hands its LocalSagemakerClient
(local_fastfile.json: TrainingInputMode FastFile, read here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sdk2_moto import source  # noqa: F401  (a fixture)

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import JobSpec
from cloudddp.providers.local.layout import node_layouts
from cloudddp.providers.sagemaker.request import build_request
from cloudddp.sagemaker import PyTorch
from cloudddp.sagemaker import estimator as dropin

RECORDED = Path(__file__).parent / "sdk2_requests" / "sagemaker-2.257.7"

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


class Handed(Exception):
    """Raised by the stand-in run_job once it has the spec local mode hands the local provider."""


def handed_to_the_local_provider(est: PyTorch, inputs: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> JobSpec:
    """The JobSpec fit() hands run_job("local", ...): fit() runs as far as that, and no job is started."""
    handed: list[JobSpec] = []

    def run_job(provider: Any, spec: JobSpec, **_: Any) -> int:
        assert provider.name == "local"
        handed.append(spec)
        raise Handed

    monkeypatch.setattr(dropin, "run_job", run_job)
    with pytest.raises(Handed):
        est.fit(inputs, logs=False)
    (spec,) = handed
    return spec


def test_local_mode_hands_fastfile_to_the_emulation_which_reads_the_channel_as_file(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    est = estimator(source, input_mode="FastFile", instance_type="local", instance_count=1,
                    output_path=f"file://{tmp_path / 'out'}")  # fmt: skip
    spec = handed_to_the_local_provider(est, {"train": f"file://{tmp_path / 'data'}"}, monkeypatch)
    # The mode the user chose reaches the local provider, as v2 hands it to its LocalSagemakerClient.
    v2 = json.loads((RECORDED / "local_fastfile.json").read_text())["request"]["AlgorithmSpecification"]
    assert spec.sagemaker.input_mode == v2["TrainingInputMode"] == "FastFile"
    # The local provider lays the host out from that spec (providers/local/layout.py): the channel is read as File.
    (node,) = node_layouts(spec, tmp_path / "run", spec.name)
    config = node.root / "input" / "config" / "inputdataconfig.json"
    assert node.files[config] == {
        "train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}
    }
    assert json.loads(node.env["SM_INPUT_DATA_CONFIG"]) == node.files[config]  # what the script reads, as the toolkit


def test_pipe_is_still_refused(source: Path) -> None:
    with pytest.raises(CloudDDPError, match="input_mode='Pipe'"):
        estimator(source, input_mode="Pipe")
