# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""notebooks/sagemaker_sdk_v2_dropin.ipynb (the seed guide's flow on cloudddp) runs top to bottom against moto."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from helpers import private_jupyter
from sdk2_moto import MotoServer, moto  # noqa: F401  (moto is a fixture)

REPO = Path(__file__).resolve().parents[3]
NOTEBOOK = REPO / "notebooks" / "sagemaker_sdk_v2_dropin.ipynb"


@pytest.mark.slow
@pytest.mark.notebook
def test_notebook_trains_locally_then_creates_the_sagemaker_job(
    moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbclient import NotebookClient

    private_jupyter(tmp_path, monkeypatch)
    monkeypatch.setenv("SAGEMAKER_ROLE", "arn:aws:iam::123456789012:role/SageMakerRole")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebook's working folder
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, kernel_name="python3", timeout=400,
                            resources={"metadata": {"path": str(REPO / "notebooks")}})  # fmt: skip
    client.execute()
    outputs = [
        "".join(out.get("text", "") + str(out.get("data", {}).get("text/plain", "")) for out in cell.outputs)
        for cell in notebook.cells if cell.cell_type == "code"
    ]  # fmt: skip
    text = "\n".join(outputs)
    assert "[algo-1]" in text and "[algo-2]" in text and "cloudddp: job SUCCEEDED" in text
    assert "'model.pt'" in text and "'world_size': 2" in text  # the model.tar.gz read back from S3
    # The last cell created the real-instance job on the server; its name and status are what it printed.
    (job,) = moto.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    described = moto.client("sagemaker").describe_training_job(TrainingJobName=job["TrainingJobName"])
    # train_ddp.py needs torch 2.1+: the guide's 1.9 image could not run it.
    assert described["AlgorithmSpecification"]["TrainingImage"].endswith("/pytorch-training:2.5-gpu-py311")
    assert outputs[-1].splitlines()[-1].split() == [job["TrainingJobName"], job["TrainingJobStatus"]]
    assert f"cloudddp: submitted {job['TrainingJobName']} (sagemaker)" in outputs[-1]
