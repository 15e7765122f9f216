# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""A real SageMaker SDK v2 `sagemaker.Session` drives cloudddp's PyTorch (needs `make sdk2-env`, else skipped).

Runs inside .venv-sdk2 (sagemaker 2.257.x), with this checkout on PYTHONPATH, against a moto server.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import require_environment
from record_sdk2_requests import SDK_PYTHON, redirect_to  # noqa: F401  (redirect_to runs in the child)
from sdk2_moto import MotoServer, moto  # noqa: F401  (moto is a fixture)

REPO = Path(__file__).resolve().parents[3]
SCRIPT = """
import json, os, sys
import boto3, sagemaker
sys.path.insert(0, sys.argv[2])
from record_sdk2_requests import redirect_to
from cloudddp.sagemaker import PyTorch
boto_session = boto3.Session(region_name="us-east-1")
boto_session.events.register("before-send", redirect_to(os.environ["AWS_ENDPOINT_URL"]))
session = sagemaker.Session(boto_session=boto_session, default_bucket="team-bucket", default_bucket_prefix="proj")
est = PyTorch(entry_point="train.py", source_dir=sys.argv[1], role="arn:aws:iam::123456789012:role/R",
              framework_version="2.5", py_version="py311", instance_count=2, instance_type="ml.g5.xlarge",
              sagemaker_session=session)
est.fit({"train": "s3://team-bucket/data"}, wait=False)
print("RESULT", json.dumps({"job": est.latest_training_job.name, "model_data": est.model_data}))
"""


@pytest.mark.slow  # the full tier: make test-all builds .venv-sdk2 first
@pytest.mark.sagemaker_sdk
def test_an_sdk_v2_session_gives_region_default_bucket_and_prefix(moto: MotoServer, tmp_path: Path) -> None:
    require_environment(SDK_PYTHON, "make sdk2-env")
    moto.client("s3").create_bucket(Bucket="team-bucket")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    (tmp_path / "sagemaker-config.yaml").write_text(
        "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(tmp_path / "sagemaker-config.yaml"),
    }
    result = subprocess.run([str(SDK_PYTHON), "-c", SCRIPT, str(tmp_path / "src"), str(Path(__file__).parent)],
                            env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    printed = json.loads(result.stdout.split("RESULT ", 1)[1])
    described = moto.client("sagemaker").describe_training_job(TrainingJobName=printed["job"])
    # v2's rule: the output and the code go to the session's default bucket and prefix.
    assert described["OutputDataConfig"]["S3OutputPath"] == "s3://team-bucket/proj/"
    hyperparameters = described["HyperParameters"]
    assert json.loads(hyperparameters["sagemaker_submit_directory"]) == (
        f"s3://team-bucket/proj/{printed['job']}/source/sourcedir.tar.gz"
    )
    assert printed["model_data"].startswith("s3://team-bucket/proj/")
