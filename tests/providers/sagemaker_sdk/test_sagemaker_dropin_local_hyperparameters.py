"""Local mode's hyperparameters.json holds the sagemaker_* keys the SDK v2's local-mode containers see.

Compared with what sagemaker 2.257.7's local mode hands its LocalSagemakerClient for the same arguments
(`sdk2_requests/sagemaker-2.257.7/local*.json`, recorded by record_sdk2_requests.py; the SDK writes that
request's HyperParameters into every container's hyperparameters.json, aws/sagemaker-python-sdk
`src/sagemaker/local/image.py: _SageMakerContainer.train / write_config_files`). The one intended difference:
`sagemaker_submit_directory`, which v2 rewrites to the folder it mounts the code at (/opt/ml/code,
`_update_local_src_path`), names the folder the code runs from here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sdk2_cases import LOCAL_CASES, REGION, job_name

from cloudddp.sagemaker.arguments import check_distribution
from cloudddp.sagemaker.local_mode import container_hyperparameters

RECORDINGS = sorted((Path(__file__).parent / "sdk2_requests").glob("sagemaker-*"))


def recorded(case: str) -> dict[str, str]:
    return dict(json.loads((RECORDINGS[-1] / f"{case}.json").read_text())["request"]["HyperParameters"])


@pytest.mark.parametrize("case", sorted(LOCAL_CASES))
def test_the_sagemaker_keys_equal_the_sdk_v2_local_mode_request(case: str, tmp_path: Path) -> None:
    estimator: dict[str, Any] = LOCAL_CASES[case]["estimator"]
    ours = container_hyperparameters(
        estimator["hyperparameters"], entry_point=estimator["entry_point"], source_dir=str(tmp_path),
        region=REGION, job_name=job_name(case), distribution=check_distribution(estimator.get("distribution")),
        instance_type=estimator["instance_type"],
    )  # fmt: skip
    encoded = {key: json.dumps(value) for key, value in ours.items()}  # as the emulation writes the file
    sdk = recorded(case)
    assert json.loads(sdk.pop("sagemaker_submit_directory")) == "file://<source_dir>"  # v2: /opt/ml/code
    assert json.loads(encoded.pop("sagemaker_submit_directory")) == str(tmp_path.resolve())
    assert encoded == sdk


def test_a_changed_key_would_show(tmp_path: Path) -> None:
    ours = container_hyperparameters(
        {"epochs": 2, "lr": 0.5}, entry_point="other.py", source_dir=str(tmp_path), region=REGION,
        job_name=job_name("local"), distribution=None, instance_type="local",
    )  # fmt: skip
    encoded = {key: json.dumps(value) for key, value in ours.items() if key != "sagemaker_submit_directory"}
    assert encoded != {k: v for k, v in recorded("local").items() if k != "sagemaker_submit_directory"}
