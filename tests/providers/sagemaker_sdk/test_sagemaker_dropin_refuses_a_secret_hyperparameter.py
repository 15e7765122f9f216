# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""The SDK v2 drop-in is one more door to the one secrets policy (cloudddp/secrets_policy.py): a secret-named
hyperparameter, which SageMaker's DescribeTrainingJob would show in clear, is refused by `fit()` with the message
`cloudddp launch -p sagemaker -H ...` gives, exit 2, before anything is uploaded or created (tests/test_secrets_policy.py
holds the other doors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import cli
from sdk2_moto import MotoServer, moto, source  # noqa: F401  (moto and source are fixtures)

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker import PyTorch, Session

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
SECRET = "s3cr3tValue9876"


def test_fit_refuses_a_secret_named_hyperparameter_as_the_cli_does(source: Path, moto: MotoServer) -> None:
    moto.client("s3").create_bucket(Bucket="out")
    est = PyTorch(entry_point="train.py", source_dir=str(source), role=ROLE, framework_version="2.5",
                  py_version="py311", instance_count=1, instance_type="ml.m5.xlarge", output_path="s3://out/jobs",
                  hyperparameters={"api_key": SECRET, "lr": 0.1}, sagemaker_session=Session())  # fmt: skip
    with pytest.raises(CloudDDPError) as caught:
        est.fit("s3://data/all", wait=False)
    assert caught.value.exit_code == 2 and SECRET not in str(caught.value)
    assert moto.created() == [] and moto.keys("out") == []  # nothing created, nothing uploaded
    by_cli = cli("launch", "-p", "sagemaker", "--dry-run", "--role", ROLE, "--instance-type", "ml.m5.xlarge",
                 "-H", f"api_key={SECRET}", "-H", "lr=0.1", str(source / "train.py"))  # fmt: skip
    assert by_cli.returncode == 2 and SECRET not in by_cli.stdout + by_cli.stderr
    assert str(caught.value).startswith("hyperparameters.api_key looks like a secret")
    assert by_cli.stderr.strip() == f"error: {caught.value}"
