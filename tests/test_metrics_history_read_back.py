"""The job side's metric history read back (cloudddp/metrics.py): `cloudddp metrics` reads it where it was written
with the job's definitions, else the logs; its rows carry the time and the rank; CLOUDDDP_METRICS gives the job
the spec's definitions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from cloudddp.metrics import DEFAULT_METRICS, DEFINITIONS_FILE, history_in, job_environment, read_history, render

LOSS = {"loss": r"loss=([0-9.]+)"}


def write_history(
    folder: Path, node: str, rows: list[tuple[float, str, float, int]], definitions: dict[str, str]
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / DEFINITIONS_FILE).write_text(json.dumps(definitions))
    lines = [json.dumps({"timestamp": t, "metric": m, "value": v, "node": node, "rank": r}) for t, m, v, r in rows]
    (folder / f"metrics-{node}.jsonl").write_text("\n".join(lines) + "\n")


def test_the_spec_definitions_reach_the_job_as_cloudddp_metrics() -> None:
    assert json.loads(job_environment(LOSS)["CLOUDDDP_METRICS"]) == LOSS
    assert job_environment(None) == {} and job_environment({}) == {}  # the launcher's defaults


def test_the_nodes_histories_are_read_in_time_order_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    write_history(tmp_path / "nodes/a", "a", [(2.0, "loss", 0.5, 0), (4.0, "loss", 0.25, 0)], LOSS)
    write_history(tmp_path / "nodes/b", "b", [(3.0, "loss", 0.6, 1)], LOSS)
    with open(tmp_path / "nodes/b/metrics-b.jsonl", "a") as handle:
        handle.write('{"timestamp": 5.0, "metric": "lo')  # the job died mid-write
    found = history_in(tmp_path, LOSS)
    assert found is not None
    assert [(s.timestamp, s.value, s.node, s.rank) for s in found] == [
        (2.0, 0.5, "a", 0), (3.0, 0.6, "b", 1), (4.0, 0.25, "a", 0)]  # fmt: skip
    assert read_history([]) == []


def test_a_history_written_with_other_definitions_is_not_taken_for_these(tmp_path: Path) -> None:
    write_history(tmp_path / "a", "a", [(1.0, "loss", 0.5, 0)], DEFAULT_METRICS)
    assert history_in(tmp_path, LOSS) is None  # the client reads the logs instead
    assert history_in(tmp_path, DEFAULT_METRICS) is not None
    write_history(tmp_path / "b", "b", [(1.0, "loss", 0.5, 1)], LOSS)
    assert history_in(tmp_path, DEFAULT_METRICS) is None  # the nodes disagree
    assert history_in(tmp_path / "none", LOSS) is None


def test_a_historys_json_and_csv_carry_its_time_and_rank(tmp_path: Path) -> None:
    write_history(tmp_path, "algo-1", [(1.5, "loss", 0.5, 0)], LOSS)
    found = history_in(tmp_path, LOSS) or []
    assert json.loads(render(found, "json")) == [
        {"timestamp": 1.5, "metric": "loss", "value": 0.5, "node": "algo-1", "rank": 0}]  # fmt: skip
    assert render(found, "csv") == "timestamp,metric,value,node,rank\n1.5,loss,0.5,algo-1,0\n"
    assert render(found, "text").splitlines()[1].split() == ["loss", "0.5", "0.5", "0.5", "1"]


PRINTS = """\
import os
rank = int(os.environ["RANK"])
for epoch, loss in enumerate([0.9, 0.5]):
    print(f"epoch={epoch}/2 loss={loss + rank / 100}", flush=True)
"""


@pytest.mark.process
@pytest.mark.torchrun
def test_each_node_of_a_local_run_keeps_its_ranks_values_and_metrics_reads_and_plots_them(tmp_path: Path) -> None:
    (tmp_path / "prints.py").write_text(PRINTS)
    quiet = run_cli("launch", "-p", "local", "--runs-dir", str(tmp_path / "quiet"), str(tmp_path / "prints.py"),
                    cwd=tmp_path)  # fmt: skip  # a job that does not ask keeps no history
    assert quiet.returncode == 0 and not list((tmp_path / "quiet").rglob("metric*")), quiet.stderr
    launched = run_cli("launch", "-p", "local", "--nodes", "2", "--runs-dir", str(tmp_path / "runs"),
                       "--metric", "loss=loss=([0-9.]+)", str(tmp_path / "prints.py"), cwd=tmp_path)  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    # --metric reached each node's launcher (CLOUDDDP_METRICS, set by session.render): a history per node with it
    files = sorted((tmp_path / "runs").rglob("metrics-*.jsonl"))
    assert [f.name for f in files] == ["metrics-algo-1.jsonl", "metrics-algo-2.jsonl"]
    for rank, file in enumerate(files):
        rows = [json.loads(line) for line in file.read_text().splitlines()]
        assert [(r["metric"], r["value"], r["node"], r["rank"]) for r in rows] == [
            ("loss", 0.9 + rank / 100, f"algo-{rank + 1}", rank), ("loss", 0.5 + rank / 100, f"algo-{rank + 1}", rank)]  # fmt: skip
    assert {json.loads(f.with_name("metric-definitions.json").read_text())["loss"] for f in files} == {"loss=([0-9.]+)"}
    shown = json.loads(run_cli("metrics", "latest", "--format", "json", cwd=tmp_path).stdout)  # the history: ranks
    assert sorted((v["rank"], v["value"]) for v in shown) == [(0, 0.5), (0, 0.9), (1, 0.51), (1, 0.91)]
    drawn = run_cli("metrics", "latest", "--plot", str(tmp_path / "metrics.png"), cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / "metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "1 chart(s)" in drawn.stderr


@pytest.mark.slow
@pytest.mark.parametrize("emulate", ["oci", "kubeflow", "slurm", "none"])
def test_every_emulated_platform_keeps_the_history_its_metrics_asked_for(emulate: str, tmp_path: Path) -> None:
    """The same --metric on each platform the local provider emulates (sagemaker: the 2-node test above): the node's
    history beside the run's output, named as the platform names the node, its rows read back by metrics."""
    (tmp_path / "prints.py").write_text(PRINTS)
    launched = run_cli("launch", "-p", "local", "--emulate", emulate, "--runs-dir", str(tmp_path / "runs"),
                       "--metric", "loss=loss=([0-9.]+)", str(tmp_path / "prints.py"), cwd=tmp_path)  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    (history,) = (tmp_path / "runs").rglob("metrics-*.jsonl")
    rows = [json.loads(line) for line in history.read_text().splitlines()]
    assert [(r["metric"], r["value"], r["rank"]) for r in rows] == [("loss", 0.9, 0), ("loss", 0.5, 0)]
    assert history.name == f"metrics-{rows[0]['node']}.jsonl" and all(isinstance(r["timestamp"], float) for r in rows)
    shown = json.loads(run_cli("metrics", "latest", "--format", "json", cwd=tmp_path).stdout)
    assert [(v["value"], v["rank"]) for v in shown] == [(0.9, 0), (0.5, 0)]  # the history, not the logs
