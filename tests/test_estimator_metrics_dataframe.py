"""`Estimator.metrics()`: the latest job's values as a pandas DataFrame, from the job side's history where it can be
read here, else from the logs; a clear error without pandas."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudddp import Estimator
from cloudddp.errors import CloudDDPError
from cloudddp.metrics import DEFAULT_METRICS, DEFINITIONS_FILE
from cloudddp.providers import JobHandle

pandas = pytest.importorskip("pandas")

LINES = ["[algo-1] epoch=0/2 loss=0.6931 train_acc=0.5", "[algo-2] epoch=1/2 loss=0.4012 train_acc=0.8125"]


class LogsOnly:
    """A provider whose logs are read from elsewhere (no run folder here)."""

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        assert job_id == "job-1"
        yield from LINES


class RunFolder(LogsOnly):
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find_run(self, job_id: str) -> Path:
        return self.folder


def estimator(provider: object, **kwargs: object) -> Estimator:
    est = Estimator(provider="local", entry_point="train.py", **kwargs)  # type: ignore[arg-type]
    est._providers["local"], est.latest_job = provider, JobHandle("local", "job-1")  # type: ignore[assignment]
    return est


def test_the_values_in_the_logs_come_as_a_frame_with_node_and_line() -> None:
    frame = estimator(LogsOnly()).metrics()
    assert list(frame.columns) == ["metric", "value", "node", "line"]
    loss = frame[frame.metric == "loss"]
    assert loss.value.tolist() == [0.6931, 0.4012] and loss.node.tolist() == ["algo-1", "algo-2"]
    assert frame[frame.metric == "train_acc"].line.tolist() == [1, 2]


def test_the_estimators_own_definitions_are_used() -> None:
    frame = estimator(LogsOnly(), metrics={"epoch": r"epoch=([0-9]+)/"}).metrics()
    assert frame.metric.tolist() == ["epoch", "epoch"] and frame.value.tolist() == [0.0, 1.0]


def test_a_history_the_job_side_wrote_with_the_same_definitions_comes_with_time_and_rank(tmp_path: Path) -> None:
    (tmp_path / DEFINITIONS_FILE).write_text(json.dumps(DEFAULT_METRICS))
    (tmp_path / "metrics-algo-1.jsonl").write_text(
        json.dumps({"timestamp": 10.5, "metric": "loss", "value": 0.5, "node": "algo-1", "rank": 0}) + "\n"
    )
    frame = estimator(RunFolder(tmp_path)).metrics()
    assert list(frame.columns) == ["timestamp", "metric", "value", "node", "rank"]
    assert frame.to_dict("records") == [
        {"timestamp": 10.5, "metric": "loss", "value": 0.5, "node": "algo-1", "rank": 0}
    ]


def test_no_values_is_an_empty_frame_and_no_job_says_so() -> None:
    frame = estimator(LogsOnly(), metrics={"lr": r"lr=([0-9.]+)"}).metrics()
    assert frame.empty and list(frame.columns) == ["metric", "value", "node", "line"]
    with pytest.raises(CloudDDPError, match="no job yet"):
        Estimator(provider="local", entry_point="train.py").metrics()


def test_without_pandas_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(CloudDDPError, match=r"pandas is not installed: pip install pandas \(or 'cloudddp\[plot\]'\)"):
        estimator(LogsOnly()).metrics()
