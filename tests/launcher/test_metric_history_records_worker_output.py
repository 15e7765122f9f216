"""The job side's metric history (cloudddp/launcher/metric_history.py): each worker's output passes through
unchanged while the job's definitions' values go, with the node and the worker's rank, into a JSON-lines file
beside the job's output."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from cloudddp.cluster.plan import ClusterPlan
from cloudddp.launcher import metric_history
from cloudddp.metrics import DEFAULT_METRICS, DEFINITIONS_FILE, definitions_from_environment


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_byte_passes_through_and_each_lines_values_are_recorded(tmp_path: Path) -> None:
    history = metric_history.History(tmp_path / "metrics-n.jsonl", {"loss": r"loss=([0-9.]+)"}, "n", io.StringIO())
    written = (
        b"epoch 1 loss=0.5\nbar 10%\rbar 20% loss=0.4\r\n\xff not text\nlast line loss=0.3"  # no newline at the end
    )
    source, sink = os.pipe()
    os.write(sink, written)
    os.close(sink)
    with open(tmp_path / "console", "wb") as console:
        metric_history.copy(source, console.fileno(), history, 3)
    assert (tmp_path / "console").read_bytes() == written  # as it came: \r, bytes that are no text, no newline
    found = records(tmp_path / "metrics-n.jsonl")
    assert [(r["metric"], r["value"], r["node"], r["rank"]) for r in found] == [
        ("loss", 0.5, "n", 3), ("loss", 0.4, "n", 3), ("loss", 0.3, "n", 3)]  # fmt: skip
    assert all(isinstance(r["timestamp"], float) for r in found)


def test_the_history_goes_beside_the_jobs_output() -> None:
    assert metric_history.history_folder({"CLOUDDDP_METRICS_DIR": "/m", "SM_OUTPUT_DATA_DIR": "/o"}) == Path("/m")
    assert metric_history.history_folder({"SM_OUTPUT_DATA_DIR": "/opt/ml/output/data", "CLOUDDDP_MODEL_DIR": "/x/model"}) == Path("/opt/ml/output/data")  # fmt: skip
    assert metric_history.history_folder({"CLOUDDDP_MODEL_DIR": "/runs/7/model"}) == Path("/runs/7")
    assert metric_history.history_folder({}) is None


def test_the_node_is_named_as_the_platform_names_it() -> None:
    plan = ClusterPlan("slurm", node_rank=1, nnodes=2, hosts=["node1", "node2"])
    assert metric_history.node_name(plan, {}) == "node2"
    assert metric_history.node_name(plan, {"SM_CURRENT_HOST": "algo-2"}) == "algo-2"
    pod = ClusterPlan("kubeflow", rdzv_backend="c10d")  # no host list: the pod's name
    assert metric_history.node_name(pod, {"HOSTNAME": "job-worker-0"}) == "job-worker-0"


def test_the_definitions_come_from_cloudddp_metrics_and_a_bad_one_is_left_out_with_a_line() -> None:
    assert definitions_from_environment({}) == (DEFAULT_METRICS, [])
    kept, problems = definitions_from_environment(
        {"CLOUDDDP_METRICS": json.dumps({"lr": r"lr=(\S+)", "bad": "no group", "worse": 3})}
    )
    assert kept == {"lr": r"lr=(\S+)"}
    assert [p.split(";")[0] for p in problems] == [
        "CLOUDDDP_METRICS: the regex of metric 'bad' has no group: its first group (...) is the value, as SageMaker reads it",
        "CLOUDDDP_METRICS: metric 'worse' has no regex"]  # fmt: skip
    assert definitions_from_environment({"CLOUDDDP_METRICS": "{"})[0] == {}


def test_start_writes_the_definitions_beside_the_history_or_says_why_there_is_none(tmp_path: Path) -> None:
    plan, said = ClusterPlan("sagemaker"), io.StringIO()
    environ = {"SM_OUTPUT_DATA_DIR": str(tmp_path / "data"), "SM_CURRENT_HOST": "algo-1",
               "CLOUDDDP_METRICS": '{"loss": "loss: ([0-9.]+)"}'}  # fmt: skip
    history = metric_history.start(plan, environ, said)
    assert history is not None and history.path == tmp_path / "data" / "metrics-algo-1.jsonl"
    assert json.loads((tmp_path / "data" / DEFINITIONS_FILE).read_text()) == {"loss": "loss: ([0-9.]+)"}
    assert metric_history.start(plan, {"CLOUDDDP_METRICS": "default"}, said) is None  # no output folder
    (tmp_path / "file").write_text("")
    asked = {"CLOUDDDP_METRICS_DIR": str(tmp_path / "file"), "CLOUDDDP_METRICS": "default"}
    assert metric_history.start(plan, asked, said) is None
    assert "no metric history in" in said.getvalue()
    unasked = {"SM_OUTPUT_DATA_DIR": str(tmp_path / "quiet"), "SM_CURRENT_HOST": "algo-1"}
    assert metric_history.start(plan, unasked, said) is None and not (tmp_path / "quiet").exists()  # opt-in
    history = metric_history.start(plan, {**unasked, "CLOUDDDP_METRICS": "default"}, said)
    assert history is not None and json.loads((tmp_path / "quiet" / DEFINITIONS_FILE).read_text()) == DEFAULT_METRICS


@pytest.mark.process
def test_a_worker_torch_starts_is_piped_and_its_values_recorded_with_its_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from torch.distributed.elastic.multiprocessing.subprocess_handler.subprocess_handler import SubprocessHandler

    monkeypatch.setattr(SubprocessHandler, "_popen", SubprocessHandler._popen)  # put back after the test
    history = metric_history.History(tmp_path / "metrics-n.jsonl", DEFAULT_METRICS, "n", sys.stderr)
    assert metric_history.install(history)
    code = "import sys; print('epoch=0/1 loss=0.75', flush=True); print('warn loss=0.5', file=sys.stderr)"
    handler = SubprocessHandler(sys.executable, ("-c", code), {"RANK": "5"}, None, None, 0, None)
    assert handler.proc.wait(timeout=30) == 0
    metric_history._drain([t for t in threading.enumerate() if t.name.startswith("cloudddp output")])
    out, err = capfd.readouterr()
    assert "epoch=0/1 loss=0.75\n" in out and "warn loss=0.5\n" in err
    assert sorted((r["value"], r["rank"]) for r in records(tmp_path / "metrics-n.jsonl")) == [(0.5, 5), (0.75, 5)]
