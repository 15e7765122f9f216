"""Metrics with SageMaker's semantics (cloudddp/metrics.py): a name and a regex searched in every log line, its
first group parsed as a float; `cloudddp metrics JOB` on a local run with the job's own definitions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import cli, run_cli

from cloudddp.job_spec import build_spec
from cloudddp.metrics import DEFAULT_METRICS, extract, render, summarize

# Two of sources/train_ddp.py's epoch lines as `cloudddp logs` prints them (its print in `end_epoch`).
TRAIN_DDP = [
    "[algo-1] epoch=0/2 loss=0.6931 train_acc=0.5000 val_acc=0.5000 images_per_sec=120.5 time=3.1s checkpoint=a",
    "[algo-2] resumed from /opt/ml/checkpoints after epoch 0; starting at epoch 1",
    "[algo-1] epoch=1/2 loss=0.4012 train_acc=0.8125 val_acc=1.0000 images_per_sec=131.0 time=6.0s checkpoint=b",
]


def test_the_defaults_read_train_ddps_epoch_lines() -> None:
    found = extract(TRAIN_DDP, DEFAULT_METRICS)
    assert [(s.metric, s.value, s.node, s.line) for s in found if s.metric == "loss"] == [
        ("loss", 0.6931, "algo-1", 1), ("loss", 0.4012, "algo-1", 3)]  # fmt: skip
    rows = {r.metric: (r.last, r.minimum, r.maximum, r.count) for r in summarize(found)}
    assert rows == {"loss": (0.4012, 0.4012, 0.6931, 2), "train_acc": (0.8125, 0.5, 0.8125, 2),
                    "val_acc": (1.0, 0.5, 1.0, 2), "images_per_sec": (131.0, 120.5, 131.0, 2)}  # fmt: skip


def test_the_first_group_is_the_value_and_what_is_no_number_is_left_out() -> None:
    lines = ["[n] step 1 lr: 1e-3 loss: 2.5", "[n] loss: nan", "[n] loss: n/a", "loss: 7"]
    found = extract(lines, {"lr": r"lr: (\S+)", "loss": r"loss: ([^ ]+)"})
    assert [(s.metric, s.value) for s in found][:2] == [("lr", 0.001), ("loss", 2.5)]
    assert [s.metric for s in found] == ["lr", "loss", "loss", "loss"]  # "n/a" is not a float: no value
    assert found[-1].node == "" and found[-1].value == 7.0


def test_json_and_csv_give_every_value_and_text_the_summary() -> None:
    found = extract(TRAIN_DDP, {"loss": DEFAULT_METRICS["loss"]})
    assert json.loads(render(found, "json")) == [
        {"metric": "loss", "value": 0.6931, "node": "algo-1", "line": 1},
        {"metric": "loss", "value": 0.4012, "node": "algo-1", "line": 3}]  # fmt: skip
    assert render(found, "csv") == "metric,value,node,line\nloss,0.6931,algo-1,1\nloss,0.4012,algo-1,3\n"
    assert render(found, "text").splitlines() == ["METRIC  LAST    MIN     MAX     COUNT",
                                                  "loss    0.4012  0.4012  0.6931  2"]  # fmt: skip


@pytest.mark.parametrize(
    ("metrics", "said"),
    [({"loss": "loss=[0-9.]+"}, "has no group"), ({"loss": "loss=([0-9.]+"}, "not a regular expression")],
)
def test_a_definition_that_cannot_give_a_value_is_refused_in_the_spec(metrics: dict[str, str], said: str) -> None:
    with pytest.raises(Exception, match=said):
        build_spec({"entry_point": "train.py", "metrics": metrics})
    refused = cli("launch", "-p", "local", "--dry-run", "--metric", f"loss={metrics['loss']}", "train.py")
    assert refused.returncode == 2 and said in refused.stderr and "Traceback" not in refused.stderr


PRINTS = """\
import os
rank = os.environ["RANK"]
for step, loss in enumerate([0.9, 0.5, 0.25]):
    print(f"rank={rank} step={step} loss: {loss}", flush=True)
"""


@pytest.mark.process
def test_metrics_of_a_local_run_use_the_definitions_it_was_launched_with(tmp_path: Path) -> None:
    (tmp_path / "prints.py").write_text(PRINTS)
    launched = run_cli("launch", "-p", "local", "--nodes", "2", "--metric", r"loss=loss: ([0-9.]+)",
                       "--runs-dir", str(tmp_path / "runs"), str(tmp_path / "prints.py"), cwd=tmp_path)  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    table = run_cli("metrics", "latest", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[1].split() == ["loss", "0.25", "0.25", "0.9", "6"]  # 3 lines on each node
    history = json.loads(run_cli("metrics", "latest", "--format", "json", cwd=tmp_path).stdout)
    assert sorted({(v["node"], v["value"]) for v in history}) == [
        (node, value) for node in ("algo-1", "algo-2") for value in (0.25, 0.5, 0.9)]  # fmt: skip
    other = run_cli("metrics", "latest", "--metric", r"step=step=([0-9]+)", "--format", "csv", cwd=tmp_path)
    assert other.stdout.count("\nstep,") == 6
