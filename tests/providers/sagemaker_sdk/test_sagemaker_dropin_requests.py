# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""cloudddp's CreateTrainingJob equals the real SageMaker SDK v2's for the same arguments.

The SDK's requests were recorded by `record_sdk2_requests.py` (sagemaker 2.257.7 in
.venv-sdk2, against moto) into `sdk2_requests/sagemaker-<version>/<case>.json`. Here the same
cases go through `cloudddp.sagemaker.PyTorch(...).fit(wait=False)` against a moto server,
and the request cloudddp sent is compared with the recording, after removing only the
differences listed in `INTENDED` (each one is in the README's drop-in section with its reason).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from sdk2_cases import BUCKETS, CASES, job_name, with_instance_groups, with_tensorboard
from sdk2_moto import MotoServer, moto  # noqa: F401  (moto is a fixture)

from cloudddp.sagemaker import InstanceGroup, PyTorch, Session, TensorBoardOutputConfig

RECORDINGS = sorted((Path(__file__).parent / "sdk2_requests").glob("sagemaker-*"))
SERVICE_DEFAULTS = {"EnableNetworkIsolation": False, "EnableInterContainerTrafficEncryption": False,
                    "EnableManagedSpotTraining": False}  # fmt: skip
# Hyperparameters that ask the DLC's toolkit to start torchrun itself: cloudddp's launcher does it instead.
TOOLKIT_DISTRIBUTION = ("sagemaker_torch_distributed_enabled", "sagemaker_pytorch_ddp_enabled",
                        "sagemaker_distributed_dataparallel_enabled", "sagemaker_instance_type",
                        "sagemaker_distributed_dataparallel_custom_mpi_options")  # fmt: skip
INTENDED = {
    "HyperParameters.sagemaker_program": "cloudddp_bootstrap.py starts cloudddp's launcher, which runs the entry point",
    "HyperParameters.<toolkit distribution>": "cloudddp's launcher runs torchrun on every host, not the toolkit",
    "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": "not sent by cloudddp's SageMaker provider",
    "<service defaults>": "False flags and CheckpointConfig.LocalPath=/opt/ml/checkpoints sent explicitly",
    "InputDataConfig order": "channels sorted by name",
    "OutputDataConfig.KmsKeyId": "volume_kms_key also encrypts the output (one key in cloudddp)",
    "CheckpointConfig (spot)": "a spot job without checkpoint_s3_uri gets one in the staging bucket",
}


def comparable(request: dict[str, Any], name: str) -> dict[str, Any]:
    """The request without the INTENDED differences, the job name replaced by <job>."""
    request = copy.deepcopy(request)
    request = json.loads(json.dumps(request).replace(name, "<job>"))
    hyperparameters = request.get("HyperParameters", {})
    hyperparameters.pop("sagemaker_program", None)
    for key in TOOLKIT_DISTRIBUTION:
        hyperparameters.pop(key, None)
    request["AlgorithmSpecification"].pop("EnableSageMakerMetricsTimeSeries", None)
    for key, default in SERVICE_DEFAULTS.items():
        if request.get(key) == default:
            del request[key]
    if request.get("CheckpointConfig", {}).get("LocalPath") == "/opt/ml/checkpoints":
        del request["CheckpointConfig"]["LocalPath"]
    request["InputDataConfig"] = sorted(request.get("InputDataConfig", []), key=lambda c: c["ChannelName"])
    if "VolumeKmsKeyId" in request["ResourceConfig"]:
        request["OutputDataConfig"].pop("KmsKeyId", None)
    return request


def recorded(case: str) -> dict[str, Any]:
    assert RECORDINGS, "no recordings: run tests/providers/sagemaker_sdk/record_sdk2_requests.py"
    return dict(json.loads((RECORDINGS[-1] / f"{case}.json").read_text()))


def all_objects(moto: MotoServer) -> set[str]:
    s3 = moto.client("s3")
    return {f"s3://{b['Name']}/{key}" for b in s3.list_buckets()["Buckets"] for key in moto.keys(b["Name"])}


def fit_case(case: str, moto: MotoServer, tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    """cloudddp's CreateTrainingJob request for the case, and the S3 objects its fit() wrote."""
    for bucket in BUCKETS:
        moto.client("s3").create_bucket(Bucket=bucket)
    source = tmp_path / f"source-{case}"
    source.mkdir()
    (source / CASES[case]["estimator"]["entry_point"]).write_text("print('training')\n")
    kwargs = with_tensorboard(with_instance_groups(CASES[case]["estimator"], InstanceGroup), TensorBoardOutputConfig)
    estimator = PyTorch(source_dir=str(source), sagemaker_session=Session(), **kwargs)
    before = all_objects(moto)
    estimator.fit(inputs=CASES[case]["inputs"], wait=False, job_name=job_name(case))
    (request,) = moto.created()
    return dict(request), sorted(all_objects(moto) - before)


@pytest.mark.parametrize("case", sorted(CASES))
def test_create_training_job_equals_the_sdk_v2_request_but_for_the_listed_differences(
    case: str, moto: MotoServer, tmp_path: Path
) -> None:
    sdk = recorded(case)
    ours, written = fit_case(case, moto, tmp_path)
    assert ours["TrainingJobName"] == sdk["request"]["TrainingJobName"] == job_name(case)
    if ours.get("EnableManagedSpotTraining") and "CheckpointConfig" not in sdk["request"]:
        # Intended: cloudddp never runs spot without checkpoints; they go to the staging bucket.
        assert ours.pop("CheckpointConfig")["S3Uri"].startswith("s3://sagemaker-us-east-1-123456789012/")
    assert comparable(ours, job_name(case)) == comparable(sdk["request"], job_name(case))
    # The source archive (the only object either side writes) lands where the SDK v2 puts its own.
    assert written == sdk["s3_objects_written_by_fit"]


def test_the_comparison_catches_a_changed_field() -> None:
    """comparable() removes only the listed differences: a real change still shows."""
    sdk = recorded("seed")["request"]
    changed = copy.deepcopy(sdk)
    changed["ResourceConfig"]["InstanceCount"] = 3
    assert comparable(changed, job_name("seed")) != comparable(sdk, job_name("seed"))
    changed = copy.deepcopy(sdk)
    changed["HyperParameters"]["epochs"] = '"25"'
    assert comparable(changed, job_name("seed")) != comparable(sdk, job_name("seed"))
