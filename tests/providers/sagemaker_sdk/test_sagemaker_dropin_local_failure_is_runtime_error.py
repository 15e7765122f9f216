"""A failed local-mode fit() raises a RuntimeError, as SDK v2's local mode does.

Upstream: aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0),
src/sagemaker/local/image.py: `_stream_output` raises RuntimeError("Failed to run: ... Process exited with code:
N") and `_SageMakerContainer.train` re-raises it as RuntimeError("Failed to run: ..."). Code written for v2
(`except RuntimeError:` around a local fit) keeps working; the error is still a CloudDDPError for cloudddp's callers.
The job itself is not run here: `run_job` is replaced by one whose job ended with exit code 3.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cloudddp.errors import CloudDDPError
from cloudddp.providers import JobHandle
from cloudddp.sagemaker import PyTorch
from cloudddp.sagemaker import estimator as dropin


@pytest.fixture
def local_estimator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PyTorch:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    (tmp_path / "train.py").write_text("raise ValueError('bad')\n")
    return PyTorch(entry_point="train.py", source_dir=str(tmp_path), role="arn:aws:iam::123456789012:role/R",
                   instance_count=2, instance_type="local")  # fmt: skip


def ended_with(code: int) -> Any:
    def run_job(provider: Any, spec: Any, *, record: Any, **_: Any) -> int:
        record.handle = JobHandle(provider=provider.name, job_id=f"/runs/{spec.name}")
        return code

    return run_job


def test_a_failed_local_job_raises_runtime_error(local_estimator: PyTorch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dropin, "run_job", ended_with(3))
    spec = SimpleNamespace(name="pytorch-training-local", environment={}, hyperparameters={})
    with pytest.raises(RuntimeError, match="Process exited with code: 3") as raised:
        local_estimator._run(SimpleNamespace(name="local"), spec, True, False)  # type: ignore[arg-type]
    assert isinstance(raised.value, CloudDDPError)
    assert raised.value.exit_code == 3


def test_a_local_job_that_succeeded_raises_nothing(local_estimator: PyTorch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dropin, "run_job", ended_with(0))
    spec = SimpleNamespace(name="pytorch-training-local", environment={}, hyperparameters={})
    job = local_estimator._run(SimpleNamespace(name="local"), spec, True, False)  # type: ignore[arg-type]
    assert job.name == "pytorch-training-local"
