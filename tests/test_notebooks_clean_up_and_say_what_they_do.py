"""What the notebooks leave behind and what they claim.

A notebook works in a temporary folder that its last cell removes (the kernel removes it too when it shuts down
before), and gives the kernel its working folder back: nothing stays in the system temp folder ($TMPDIR) or
beside the notebook. The OCI notebook says what staging really does and shows the dry run's request whole."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml
from helpers import REPO, private_jupyter
from helpers.oci_loopback_server import COMPARTMENT, IMAGE, LOG_GROUP, PROJECT, WORK_DIR, FakeOCI, ThrowawayKey

from cloudddp.staging.engine import stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.oci_object_store import OCIObjectStore

NOTEBOOKS = REPO / "notebooks"
SAGEMAKER_NOTEBOOKS = ["sagemaker_ddp", "sagemaker_sdk_v2_dropin"]
CWD_CELL = 'import os\nprint("cwd:", os.getcwd())'


def outputs(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.get("outputs", []))


def scratch_notebook_folder(tmp_path: Path) -> Path:
    """An empty `notebooks/` beside the repo's `sources/`: where the kernel starts, as in the repo."""
    folder = tmp_path / "repo" / "notebooks"
    folder.mkdir(parents=True)
    (folder.parent / "sources").symlink_to(REPO / "sources")
    return folder


def private_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty $TMPDIR for the kernel (set after private_jupyter, whose `ipykernel install` leaves a folder)."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # torch's cache, not the notebook's
    return tmpdir


def execute(notebook: nbformat.NotebookNode, cwd: Path, timeout: int = 400) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    NotebookClient(
        notebook, kernel_name="python3", timeout=timeout, resources={"metadata": {"path": str(cwd)}}
    ).execute()
    return notebook


def use_moto(monkeypatch: pytest.MonkeyPatch, env: Mapping[str, str]) -> None:
    for name in list(os.environ):
        if name.startswith(("AWS_", "CLOUDDDP_", "SM_")):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CLOUDDDP_NOTEBOOK_SEED_ARTIFACT", "1")
    monkeypatch.setenv("SAGEMAKER_ROLE", env["CLOUDDDP_SAGEMAKER_ROLE"])


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("name", SAGEMAKER_NOTEBOOKS)
def test_a_sagemaker_notebook_leaves_nothing_in_tmpdir_nor_beside_it_and_keeps_the_kernel_folder(
    name: str, moto_server: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private_jupyter(tmp_path, monkeypatch)
    use_moto(monkeypatch, moto_server)
    tmpdir = private_tmpdir(tmp_path, monkeypatch)
    folder = scratch_notebook_folder(tmp_path)
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(CWD_CELL))
    execute(notebook, folder)
    text = "\n".join(outputs(cell) for cell in notebook.cells)
    assert "cloudddp: job SUCCEEDED" in text and "metrics.json" in text  # it ran to its end
    assert outputs(notebook.cells[-1]) == f"cwd: {folder}\n"  # the kernel's working folder is where it started
    assert sorted(tmpdir.rglob("*")) == []
    assert sorted(folder.rglob("*")) == []


@pytest.mark.slow
@pytest.mark.notebook
def test_the_local_metrics_notebook_trains_on_two_nodes_plots_each_epoch_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cloud account: 2 emulated nodes, the job's metric history read back per epoch, the nodes' timeline."""
    private_jupyter(tmp_path, monkeypatch)
    for name in list(os.environ):
        if name.startswith(("AWS_", "CLOUDDDP_", "SM_")):  # nothing of this shell's cloud setup
            monkeypatch.delenv(name)
    tmpdir = private_tmpdir(tmp_path, monkeypatch)
    folder = scratch_notebook_folder(tmp_path)
    notebook = nbformat.read(NOTEBOOKS / "local_metrics.ipynb", as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(CWD_CELL))
    execute(notebook, folder)
    text = "\n".join(outputs(cell) for cell in notebook.cells)
    assert "cloudddp: job SUCCEEDED" in text and "'SUCCEEDED'" in text
    table = next(outputs(c) for c in notebook.cells if c.cell_type == "code" and "pivot" in c.source)
    assert table.split("\n")[0].split() == ["metric", "loss", "train_acc", "val_acc"]
    assert [line.split()[0] for line in table.split("\n")[2:]] == ["1", "2", "3", "4"]  # one row per epoch
    pictures = [o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(pictures) == 2 and all(len(p["data"]["image/png"]) < 40_000 for p in pictures)  # small to commit
    timeline = next(outputs(c) for c in notebook.cells if c.cell_type == "code" and ".events(" in c.source)
    for node in ("algo-1", "algo-2"):  # the per-node timeline
        assert f"{node}   started" in timeline and f"{node}   succeeded" in timeline, timeline
    assert outputs(notebook.cells[-1]) == f"cwd: {folder}\n"
    assert sorted(tmpdir.rglob("*")) == []
    assert sorted(folder.rglob("*")) == []


@pytest.mark.notebook
@pytest.mark.parametrize("name", [*SAGEMAKER_NOTEBOOKS, "oci_ddp", "local_metrics"])
def test_a_kernel_shut_down_before_the_last_cell_removes_the_work_folder(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notebooks' promise for a run stopped half way: their first code cell, then the kernel shuts down."""
    private_jupyter(tmp_path, monkeypatch)
    monkeypatch.setenv("CLOUDDDP_SAGEMAKER_ROLE", "arn:aws:iam::123456789012:role/SageMakerRole")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    tmpdir = private_tmpdir(tmp_path, monkeypatch)
    folder = scratch_notebook_folder(tmp_path)
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    first = next(i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code")
    listing = 'import json, os\nprint(json.dumps(sorted(os.listdir(os.environ["TMPDIR"]))))'
    notebook.cells = [*notebook.cells[: first + 1], nbformat.v4.new_code_cell(listing)]
    execute(notebook, folder, timeout=120)
    (work,) = json.loads(outputs(notebook.cells[-1]))
    assert work.startswith("cloudddp-")  # the notebook's work folder, there while the kernel ran
    assert sorted(tmpdir.rglob("*")) == []
    assert sorted(p.name for p in folder.iterdir()) == []


@pytest.mark.network
def test_the_oci_notebook_says_what_staging_to_object_storage_does(tmp_path: Path) -> None:
    """Changing one file uploads every file of the folder again (no copies on OCI); unchanged, nothing is sent."""
    import oci

    key = ThrowawayKey.generate()
    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        (data / f"{i}.txt").write_text(f"file {i}\n")
    with FakeOCI(key, run_root=tmp_path / "service") as server:
        config = oci.config.from_file(str(key.write_config(tmp_path / ".oci")))
        client = oci.object_storage.ObjectStorageClient(config, service_endpoint=server.url)

        def store() -> OCIObjectStore:
            return OCIObjectStore(client, parse_location("oci://bkt@ns/inputs/train"))

        assert len(stage(data, store()).uploaded) == 4
        writes = len(server.writes())
        assert stage(data, store()).unchanged and len(server.writes()) == writes  # nothing sent again
        (data / "0.txt").write_text("changed\n")
        assert sorted(stage(data, store()).uploaded) == ["0.txt", "1.txt", "2.txt", "3.txt"]
    intro = nbformat.read(NOTEBOOKS / "oci_ddp.ipynb", as_version=4).cells[0].source
    assert "same MD5 are skipped" not in intro
    assert "Staging the folder again unchanged uploads nothing" in intro
    assert "change any file and every file of the folder is uploaded again" in intro


def oci_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = ThrowawayKey.generate().write_config(tmp_path / ".oci")
    for name in list(os.environ):
        if name.startswith(("OCI_", "CLOUDDDP_")):
            monkeypatch.delenv(name)
    for name, value in {
        "OCI_CONFIG_FILE": str(config), "CLOUDDDP_OCI_COMPARTMENT_ID": COMPARTMENT, "CLOUDDDP_OCI_PROJECT_ID": PROJECT,
        "CLOUDDDP_OCI_IMAGE": IMAGE, "CLOUDDDP_OCI_WORK_DIR": WORK_DIR, "CLOUDDDP_OCI_LOG_GROUP_ID": LOG_GROUP,
        "CLOUDDDP_SOURCES": str(REPO / "sources"),
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)


@pytest.mark.notebook
def test_the_oci_notebook_shows_the_dry_runs_environment_and_command_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cell under the requests' heading prints every environment variable and every command argument whole."""
    private_jupyter(tmp_path, monkeypatch)
    oci_environment(tmp_path, monkeypatch)
    notebook = nbformat.read(NOTEBOOKS / "oci_ddp.ipynb", as_version=4)
    dry_run = next(i for i, cell in enumerate(notebook.cells) if "estimator.dry_run(inputs)" in cell.source)
    # The request the dry run produced, from the kernel that ran the cell (the old cell kept it as text).
    notebook.cells = [
        *notebook.cells[: dry_run + 1],
        nbformat.v4.new_code_cell("import json, yaml\nprint(json.dumps(yaml.safe_load(plan) if isinstance(plan, str) else plan))"),
    ]  # fmt: skip
    execute(notebook, clean_folder(tmp_path), timeout=120)
    plan: dict[str, Any] = json.loads(outputs(notebook.cells[-1]))
    (group,) = plan["request"]["create_job"]["job_node_configuration_details"][
        "job_node_group_configuration_details_list"
    ]
    container = group["job_environment_configuration_details"]
    shown = outputs(notebook.cells[dry_run])
    lines = shown.splitlines()
    for argument in container["entrypoint"] + container["cmd"]:
        assert f"  {argument}" in lines, argument  # the shell script too, on one line, not cut where YAML folds it
    environment = group["job_configuration_details"]["environment_variables"]
    assert set(environment) == {"CLOUDDDP_SOURCE", "CLOUDDDP_CHANNEL_TRAIN", "CLOUDDDP_OUTPUT_DIR"}
    assert json.dumps(environment, indent=2) in shown
    # Nothing of the script outside its own line (the old filter caught wrapped lines holding CLOUDDDP_).
    script = container["entrypoint"][2]
    assert [line for line in lines if "CLOUDDDP_NODE_ROOT" in line] == [f"  {script}"]
    assert yaml.safe_dump({"before_submit": plan["before_submit"]}, sort_keys=False) in shown


def clean_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "cwd"
    folder.mkdir()
    return folder
