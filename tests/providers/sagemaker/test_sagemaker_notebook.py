"""notebooks/sagemaker_ddp.ipynb runs top to bottom, unchanged, against a moto server."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from helpers import private_jupyter
from helpers.sagemaker_fixtures import REPO

pytestmark = [pytest.mark.slow, pytest.mark.notebook]
NOTEBOOK = REPO / "notebooks" / "sagemaker_ddp.ipynb"


def test_notebook_runs_end_to_end_against_moto(
    moto_server: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbclient import NotebookClient

    private_jupyter(tmp_path, monkeypatch)
    for name in list(os.environ):
        if name.startswith(("AWS_", "CLOUDDDP_", "SM_")):
            monkeypatch.delenv(name)
    for name, value in moto_server.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CLOUDDDP_NOTEBOOK_SEED_ARTIFACT", "1")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, kernel_name="python3", timeout=300,
                            resources={"metadata": {"path": str(REPO / "notebooks")}})  # fmt: skip
    client.execute()
    outputs = "\n".join(
        out.get("text", "") + str(out.get("data", {}).get("text/plain", "")) for cell in notebook.cells
        if cell.cell_type == "code" for out in cell.outputs
    )  # fmt: skip
    assert "TrainingJobName:" in outputs  # the dry run
    assert "cloudddp: submitted" in outputs and "cloudddp: job SUCCEEDED" in outputs
    assert "uploaded the source" in outputs and "staged train" in outputs
    assert "metrics.json" in outputs and "seeded: moto runs no training" in outputs
