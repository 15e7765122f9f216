"""`Estimator(provider="local")`: the notebook door to the local emulation, then one argument to switch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import SOURCES

from cloudddp import CloudDDPError, Estimator


def test_bad_arguments_fail_at_construction_with_the_field_named() -> None:
    with pytest.raises(CloudDDPError, match="nodes"):
        Estimator(provider="local", entry_point="allreduce_check.py", source_dir=str(SOURCES), instance_count=0)
    with pytest.raises(CloudDDPError, match="instance_typo"):
        Estimator(provider="sagemaker", entry_point="allreduce_check.py", source_dir=str(SOURCES), instance_typo="x")


def test_switching_provider_keeps_the_job_and_renders_the_platform_request(tmp_path: Path) -> None:
    local = Estimator(provider="local", entry_point="allreduce_check.py", source_dir=str(SOURCES), instance_count=2,
                      hyperparameters={"sleep": 0}, runs_dir=str(tmp_path))  # fmt: skip
    assert yaml.safe_load(local.dry_run())["request"]["nodes"][1]["name"] == "algo-2"
    remote = local.with_provider("sagemaker", role="arn:aws:iam::123456789012:role/SageMaker", region="us-east-1",
                                 bucket="my-bucket", instance_type="ml.c5.xlarge")  # fmt: skip
    request = yaml.safe_load(remote.dry_run({"train": "s3://my-bucket/data"}))["request"]
    assert request["ResourceConfig"]["InstanceCount"] == 2
    assert request["HyperParameters"]["sleep"] == "0"
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_fit_runs_the_job_and_exposes_status_and_artifacts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    est = Estimator(provider="local", entry_point="allreduce_check.py", source_dir=str(SOURCES), instance_count=2,
                    args=["--out-dir", str(tmp_path / "out")], runs_dir=str(tmp_path / "runs"))  # fmt: skip
    status = est.fit()
    assert status is not None and status.succeeded
    printed = capsys.readouterr().out
    assert "[algo-2] rank 1/2: all_reduce sum=3" in printed  # logs reach a notebook with no logging set up
    assert est.status().state == "SUCCEEDED" and est.model_data == status.artifacts
    assert json.loads((tmp_path / "out" / "rank0.json").read_text())["sum"] == 3.0


@pytest.mark.slow
def test_logs_after_fit_hide_the_jobs_secrets_as_fit_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "leak.py").write_text(
        "import os\nprint('raw token', os.environ['MY_API_KEY'], flush=True)\nprint('DB_PASSWORD=hunter2secret')\n"
    )
    est = Estimator(provider="local", entry_point="leak.py", source_dir=str(tmp_path / "src"), emulate="none",
                    environment={"MY_API_KEY": "sk-live-9876543210"}, runs_dir=str(tmp_path / "runs"))  # fmt: skip
    est.fit()
    during_fit = capsys.readouterr().out
    est.logs()
    afterwards = capsys.readouterr().out
    for printed in (during_fit, afterwards):
        assert "raw token ***" in printed and "DB_PASSWORD=***" in printed, printed
        assert "sk-live-9876543210" not in printed and "hunter2secret" not in printed


def test_one_folder_or_uri_is_the_training_channel_as_in_the_sagemaker_sdk(tmp_path: Path) -> None:
    est = Estimator(provider="local", entry_point="allreduce_check.py", source_dir=str(SOURCES))
    assert est.spec("s3://bucket/data").inputs == {"training": "s3://bucket/data"}
    assert est.spec({"train": "./data"}).inputs == {"train": "./data"}
    with pytest.raises(CloudDDPError, match=r"inputs=list\(\.\.\.\): pass a dict of channel name"):
        est.spec(["./data"])  # type: ignore[arg-type]


def test_nodes_zero_is_refused_as_instance_count_zero_is() -> None:
    with pytest.raises(CloudDDPError, match=r"nodes: Input should be greater than or equal to 1 \(got 0\)"):
        Estimator(provider="local", entry_point="allreduce_check.py", source_dir=str(SOURCES), nodes=0)
