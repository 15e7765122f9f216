"""A failed local-mode fit() raises a RuntimeError with SDK v2's message, as v2's local mode does.

Upstream: aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0; the file is the
same in sagemaker 2.257.7, the version .venv-sdk2 holds and the recordings were made with),
src/sagemaker/local/image.py: `_stream_output` raises RuntimeError(f"Failed to run: {process.args}. Process exited
with code: {exit_code}") for any code but 0 and 130, and `_SageMakerContainer.train` lets it through (its
`finally:` retrieves the artifacts). Code written for v2 (`except RuntimeError:` around a local fit, or reading the
code after "Process exited with code: ") keeps working; the error is still a CloudDDPError for cloudddp's callers.
The job itself is not run here: `run_job` is replaced by one whose job ended with exit code 3 (the full-tier
test_sagemaker_dropin_local.py runs a failing job for real and checks the same shape).
"""

from __future__ import annotations

import re
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


# v2's message (image.py `_stream_output`): "Failed to run: " WHAT ". Process exited with code: " N, nothing after.
V2_SHAPE = re.compile(r"Failed to run: (?P<what>.+)\. Process exited with code: (?P<code>-?\d+)", re.DOTALL)


def test_a_failed_local_job_raises_runtime_error_in_v2s_shape(
    local_estimator: PyTorch, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dropin, "run_job", ended_with(3))
    spec = SimpleNamespace(name="pytorch-training-local", environment={}, hyperparameters={})
    with pytest.raises(RuntimeError) as raised:
        local_estimator._run(SimpleNamespace(name="local"), spec, True, False)  # type: ignore[arg-type]
    assert isinstance(raised.value, CloudDDPError)
    assert raised.value.exit_code == 3
    shape = V2_SHAPE.fullmatch(str(raised.value))
    assert shape is not None, str(raised.value)
    assert shape["code"] == "3"
    # What failed, where v2 names its docker compose command: the job and its run folder (its logs are there).
    assert shape["what"] == "local training job pytorch-training-local in /runs/pytorch-training-local"


def test_a_local_job_that_succeeded_raises_nothing(local_estimator: PyTorch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dropin, "run_job", ended_with(0))
    spec = SimpleNamespace(name="pytorch-training-local", environment={}, hyperparameters={})
    job = local_estimator._run(SimpleNamespace(name="local"), spec, True, False)  # type: ignore[arg-type]
    assert job.name == "pytorch-training-local"
