"""notebooks/oci_ddp.ipynb, executed top to bottom against the loopback OCI service.

The service runs the two nodes for real (execute mode), so the notebook stages the demo
data, fits on 2 nodes, streams their logs and fetches a real model.pt, into its work folder:
nothing stays beside the notebook or in $TMPDIR once it has run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
import pytest
from helpers import REPO, clean_env, private_jupyter
from helpers.oci_loopback_server import COMPARTMENT, IMAGE, LOG_GROUP, PROJECT, WORK_DIR, FakeOCI, ThrowawayKey
from nbclient import NotebookClient

NOTEBOOK = REPO / "notebooks" / "oci_ddp.ipynb"


def outputs_text(notebook: nbformat.NotebookNode) -> str:
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", "") or str(output.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


@pytest.mark.slow
@pytest.mark.notebook
def test_oci_notebook_stages_fits_on_two_nodes_watches_and_fetches_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = ThrowawayKey.generate()
    config = key.write_config(tmp_path / ".oci")
    node_env = clean_env({"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"})
    with FakeOCI(key, run_root=tmp_path / "service", node_env=node_env, node_start_delay=1.0) as server:
        for name, value in {
            "CLOUDDDP_OCI_SERVICE_ENDPOINT": server.url, "OCI_CONFIG_FILE": str(config),
            "CLOUDDDP_OCI_COMPARTMENT_ID": COMPARTMENT, "CLOUDDDP_OCI_PROJECT_ID": PROJECT, "CLOUDDDP_OCI_IMAGE": IMAGE,
            "CLOUDDDP_OCI_WORK_DIR": WORK_DIR, "CLOUDDDP_OCI_LOG_GROUP_ID": LOG_GROUP,
            "CLOUDDDP_SOURCES": str(REPO / "sources"),
        }.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        private_jupyter(tmp_path, monkeypatch)
        (tmpdir := tmp_path / "tmpdir").mkdir()  # the kernel's $TMPDIR, empty (the nodes' env is set above)
        monkeypatch.setenv("TMPDIR", str(tmpdir))
        (folder := tmp_path / "notebooks").mkdir()  # where the kernel starts
        notebook = nbformat.read(NOTEBOOK, as_version=4)
        NotebookClient(
            notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
        ).execute()
        text = outputs_text(notebook)
        assert server.signature_failures == []
    assert "SUCCEEDED {'cloudddp': 'DELETED'}" in text
    assert "[node-0] epoch=1/1" in text and "[node-1] cloudddp: node 1 exited with code 0" in text
    assert "['fingerprint-rank0.txt', 'logs', 'metrics.json', 'model.pt']" in text
    assert "tensors, e.g. conv1.weight" in text
    assert sorted(folder.rglob("*")) == [] and sorted(tmpdir.rglob("*")) == []  # no model/ beside the notebook
    assert "| still there: False" in text  # the last cell removed the work folder, model included
    assert (
        len(server.calls("POST", r"^/20190101/jobs$")) == 1 and len(server.calls("POST", r"^/20190101/jobRuns$")) == 1
    )
