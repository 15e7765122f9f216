# ruff: noqa: F811  (pytest fixtures imported from sagemaker_fixtures are redefined as arguments)
"""Interop with the SageMaker Python SDK v3, which lives in its own virtual env.

The SDK is an optional extra (hundreds of MB, seconds to import), so these tests run it
from its own virtual env: `.venv-sdk` in the checkout (`make test-sdk` builds it and runs
them; CI builds it too), or the Python named by CLOUDDDP_SMSDK_PYTHON. Skipped where
neither exists. v3 needs SAGEMAKER_VALIDATE_ROLE=false under moto (it
simulates the role's IAM policy otherwise) and a config file opting out of telemetry.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import boto3
import pytest
from helpers import require_environment
from helpers.sagemaker_fixtures import REGION, REPO, ROLE, SDK_PYTHON, project  # noqa: F401

from cloudddp.providers.sagemaker import images
from cloudddp.providers.sagemaker.image_table import REGISTRIES, VERSION_ALIASES, VERSIONS

pytestmark = [pytest.mark.slow, pytest.mark.sagemaker_sdk]


@pytest.fixture(autouse=True)
def sdk_environment() -> None:
    require_environment(SDK_PYTHON, "make .venv-sdk/.installed-stamp")


SDK_CONFIG = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"


def sdk_env(base: dict[str, str], tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "sagemaker-config.yaml"
    config.write_text(SDK_CONFIG)
    return {**base, "PYTHONPATH": str(REPO), "SAGEMAKER_VALIDATE_ROLE": "false",
            "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config)}  # fmt: skip


DLC_ACCOUNT = "763104351884"  # the ECR account of the DLCs in most regions; the regions with another are all tried
COMMON_REGIONS = ("us-east-1", "eu-west-1", "ap-northeast-1")


def test_builtin_image_table_agrees_with_the_sdks(tmp_path: Path) -> None:
    script = (
        "import json, sys\n"
        "from sagemaker.core import image_uris\n"
        "out = {}\n"
        "for region, version, py, itype in json.loads(sys.argv[1]):\n"
        "    out[f'{region} {version} {py} {itype}'] = image_uris.retrieve(framework='pytorch', region=region,\n"
        "        version=version, py_version=py, instance_type=itype, image_scope='training')\n"
        "print(json.dumps(out))\n"
    )
    cases = [
        [region, version, pythons[0], itype]
        for region in [*sorted(r for r, a in REGISTRIES[-1].items() if a != DLC_ACCOUNT), *COMMON_REGIONS]
        for version in ("2.1", "2.5", "2.8")
        for pythons in [VERSIONS[VERSION_ALIASES[version]]["py_versions"]]
        for itype in ("ml.g5.12xlarge", "ml.m5.xlarge")
    ]
    result = subprocess.run([str(SDK_PYTHON), "-c", script, json.dumps(cases)], capture_output=True, text=True,
                            env=sdk_env({"PATH": "/usr/bin:/bin"}, tmp_path), timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    sdk = json.loads(result.stdout.strip().splitlines()[-1])
    for region, version, py, itype in cases:
        assert images.training_image(None, region, version, py, itype) == sdk[f"{region} {version} {py} {itype}"]


def test_to_model_trainer_runs_the_cloudddp_launcher_under_moto(
    moto_server: dict[str, str], project: Path, tmp_path: Path
) -> None:
    script = (
        "import json, sys\n"
        "from cloudddp import Estimator\n"
        "est = Estimator(provider='sagemaker', entry_point='train.py', source_dir=sys.argv[1], instance_count=2,\n"
        f"                role={ROLE!r}, region={REGION!r}, hyperparameters={{'epochs': 2, 'version': '1.10'}},\n"
        "                bucket='sdk-bucket')\n"
        "trainer = est.to_model_trainer({'train': 's3://sdk-bucket/data/'})\n"
        "trainer.train(wait=False)\n"
        "print(json.dumps({'job': trainer._latest_training_job.training_job_name}))\n"
    )
    endpoint = moto_server["AWS_ENDPOINT_URL"]
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing")  # fmt: skip
    s3.create_bucket(Bucket="sdk-bucket")
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = subprocess.run([str(SDK_PYTHON), "-c", script, str(project)], capture_output=True, text=True,
                            env={**sdk_env(moto_server, tmp_path), "TMPDIR": str(temp)}, timeout=240)  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    job = json.loads(result.stdout.strip().splitlines()[-1])["job"]
    # The source packed for the SDK lived as long as the trainer, not for ever in the user's temp folder.
    assert list(temp.glob("cloudddp-trainer-*")) == []
    sagemaker = boto3.client("sagemaker", region_name=REGION, endpoint_url=endpoint, aws_access_key_id="testing",
                             aws_secret_access_key="testing")  # fmt: skip
    described = sagemaker.describe_training_job(TrainingJobName=job)
    assert described["ResourceConfig"]["InstanceCount"] == 2
    assert described["RoleArn"] == ROLE
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in described["InputDataConfig"]}
    assert channels["train"] == "s3://sdk-bucket/data/"

    def objects(uri: str) -> dict[str, bytes]:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        return {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}

    code = objects(channels["code"])
    (archive,) = [body for key, body in code.items() if key.endswith(".tar.gz")]
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
        job_json = json.loads(tar.extractfile("cloudddp_job.json").read())  # type: ignore[union-attr]
    assert "cloudddp_bootstrap.py" in names and "cloudddp/launcher/cli.py" in names and "train.py" in names
    assert "--hyperparameters-as-args" in job_json["launcher_args"]
    drivers = objects(channels["sm_drivers"])
    (train_sh,) = [body.decode() for key, body in drivers.items() if key.endswith("sm_train.sh")]
    assert "python3 cloudddp_bootstrap.py" in train_sh and "torchrun" not in train_sh
    assert json.loads(described["HyperParameters"]["epochs"]) == 2
    # v3 sends a str as it is (ModelTrainer -> safe_serialize, aws/sagemaker-python-sdk
    # a24812666d258d9d19c9a82d0c9385ca0bd3ba01 sagemaker-train/src/sagemaker/train/utils.py) and the job side
    # JSON-decodes values (container_drivers/common/utils.py safe_deserialize; cloudddp's launcher too), which
    # would read a bare 1.10 as 1.1: cloudddp hands the SDK the JSON string, so "1.10" arrives as typed.
    assert json.loads(described["HyperParameters"]["version"]) == "1.10"
