"""`cloudddp tensorboard JOB` (cloudddp/tensorboard.py): the folder of a local run's TensorBoard event files, a
SageMaker job's TensorBoardOutputConfig prefix, and `--serve` starting TensorBoard where it is installed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import cli

from cloudddp import tensorboard
from cloudddp.errors import CloudDDPError


def run_with_events(root: Path, *relative: str) -> Path:
    (root / "state.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "state.json").write_text("{}")  # what makes a local run folder
    for path in relative:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"event")
    return root


def test_the_log_folder_holds_every_event_file_of_the_run(tmp_path: Path) -> None:
    one = run_with_events(tmp_path / "one", "nodes/algo-1/output/tensorboard/events.out.tfevents.1.algo-1")
    assert tensorboard.event_folder(one) == one / "nodes/algo-1/output/tensorboard"
    two = run_with_events(tmp_path / "two", "nodes/algo-1/tb/train/events.out.tfevents.1",
                          "nodes/algo-2/tb/train/events.out.tfevents.2")  # fmt: skip
    assert tensorboard.event_folder(two) == two / "nodes"
    assert tensorboard.event_folder(run_with_events(tmp_path / "none", "nodes/algo-1/model/model.pt")) is None


def test_a_local_run_and_a_sagemaker_job_name_their_location(tmp_path: Path) -> None:
    run = run_with_events(tmp_path / "run", "nodes/algo-1/tb/events.out.tfevents.1")
    assert tensorboard.log_location(SimpleNamespace(find_run=lambda job: run), "run") == str(run / "nodes/algo-1/tb")
    described = {"TrainingJobName": "job-1", "TensorBoardOutputConfig": {"S3OutputPath": "s3://b/tb/"}}
    sagemaker = SimpleNamespace(describe=lambda name: described if name == "job-1" else {})
    assert tensorboard.log_location(sagemaker, "job-1") == "s3://b/tb/job-1/tensorboard-output"
    assert tensorboard.log_location(sagemaker, "other") is None  # sent no TensorBoardOutputConfig
    assert tensorboard.log_location(SimpleNamespace(), "job") is None  # a provider that knows of no logs


def test_serve_runs_tensorboard_on_the_folder_or_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(tensorboard.shutil, "which", lambda name: f"/bin/{name}")
    assert tensorboard.serve("/runs/x", run=lambda command: ran.append(command) or 0) == 0
    assert ran == [["/bin/tensorboard", "--logdir", "/runs/x"]]
    monkeypatch.setattr(tensorboard.shutil, "which", lambda name: None)
    with pytest.raises(CloudDDPError, match=r"TensorBoard is not installed here: `pip install tensorboard`") as caught:
        tensorboard.serve("/runs/x")
    assert caught.value.exit_code == 2 and "--logdir /runs/x" in str(caught.value)


def test_the_command_prints_the_location_or_says_there_is_none(tmp_path: Path) -> None:
    run = run_with_events(tmp_path / "runs" / "r1", "nodes/algo-1/tb/events.out.tfevents.1")
    shown = cli("tensorboard", str(run), "--runs-dir", str(tmp_path / "runs"))
    assert shown.returncode == 0 and shown.stdout == f"{run / 'nodes/algo-1/tb'}\n", shown.stderr
    bare = run_with_events(tmp_path / "runs" / "r2")
    none = cli("tensorboard", str(bare), "--runs-dir", str(tmp_path / "runs"))
    assert none.returncode == 1 and "no TensorBoard logs known for" in none.stderr and none.stdout == ""


def test_serve_without_tensorboard_is_one_clear_paragraph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_with_events(tmp_path / "runs" / "r1", "tb/events.out.tfevents.1")
    monkeypatch.setattr(tensorboard.shutil, "which", lambda name: None)
    served: Any = cli("tensorboard", str(run), "--runs-dir", str(tmp_path / "runs"), "--serve")
    assert served.returncode == 2 and "pip install tensorboard" in served.stderr and "Traceback" not in served.stderr
