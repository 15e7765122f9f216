"""The job page's parts of `cloudddp ui` (cloudddp/ui): the log tail that keeps each node's last lines whatever
the burst, the timeline a local run records, the elastic re-forms read from torchrun's lines, and the request as
its dry run printed it. In-process, over a run folder written here as the local runner writes it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

from cloudddp.providers.base import JobEvent
from cloudddp.providers.local.events import run_events
from cloudddp.ui.log_stream import LINGER, Follower, Followers, reform
from cloudddp.ui.server import job_page


def follow(lines: list[str], keep: int = 3) -> Follower:
    follower = Follower(lambda: iter(lines), keep=keep, watchers=1)
    follower.run()
    return follower


def test_the_tail_keeps_each_nodes_last_lines_and_counts_what_it_skipped() -> None:
    follower = follow([f"[n1] line {i}" for i in range(10)] + ["[n2] only", "no prefix"])
    seen: dict[str, int] = {}
    lines, skipped = follower.since(seen)
    assert lines == {"n1": ["line 7", "line 8", "line 9"], "n2": ["only"], "": ["no prefix"]}
    assert skipped == {"n1": 7}
    assert follower.since(seen) == ({}, {})  # nothing new: nothing sent twice
    assert follower.ended and follower.error == ""


def test_a_burst_of_100k_lines_holds_only_the_kept_ones() -> None:
    follower = follow([f"[n1] {i}" for i in range(100_000)], keep=200)
    assert len(follower.tails["n1"]) == 200 and follower.counts["n1"] == 100_000
    lines, skipped = follower.since({"n1": 99_990})  # a page that had all but the last 10
    assert lines == {"n1": [str(i) for i in range(99_990, 100_000)]} and skipped == {}


def test_lines_are_masked_as_cloudddp_logs_masks_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_s3cr3tvalue")
    lines, _ = follow(["[n1] token is hf_s3cr3tvalue"]).since({})
    assert "hf_s3cr3tvalue" not in lines["n1"][0] and "***" in lines["n1"][0]


def test_a_follower_nobody_watches_stops_at_its_next_line() -> None:
    def endless() -> Iterator[str]:
        while True:
            yield "[n1] again"

    follower = Follower(endless, watchers=0)
    follower.asked -= LINGER + 1  # no stream, and the job page last asked longer ago than LINGER
    follower.run()  # returns: an endless log is not read for nobody
    assert follower.ended and follower.counts == {"n1": 1} and not follower.complete


def test_a_log_that_cannot_be_read_ends_the_tail_with_why() -> None:
    def broken() -> Iterator[str]:
        yield "[n1] first"
        raise OSError("the log went away")

    follower = Follower(broken, watchers=1)
    follower.run()
    assert follower.ended and follower.error == "the log went away" and follower.counts == {"n1": 1}


def test_pages_of_one_job_share_one_follower_and_a_finished_one_is_forgotten() -> None:
    followers = Followers()
    first = followers.watch(("local", "job"), lambda: iter(["[n1] a"]), {})
    second = followers.watch(("local", "job"), lambda: iter(["[n1] b"]), {})
    assert first is second  # joined while running, or kept once it had read the whole log
    wait_until(lambda: followers.running == {}, 10, "the follower done once its log ended")
    assert followers.done == {("local", "job"): first} and first.since({}) == ({"n1": ["a"]}, {})


# -- a local run's folder, as the runner writes it (providers/local/runner.py) ------------------------------------------
REQUEST = "provider: local\nname: trained\nrequest:\n  nodes: []"


def run_folder(tmp_path: Path, state: dict[str, object], logs: dict[str, str], exits: dict[int, float]) -> Path:
    run_dir = tmp_path / "cloudddp-runs" / "trained-20261129-050000"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "exits").mkdir()
    (run_dir / "state.json").write_text(json.dumps(state))
    (run_dir / "request.yaml").write_text(REQUEST + "\n")
    for node, text in logs.items():
        (run_dir / "logs" / f"{node}.log").write_text(text)
    for rank, when in exits.items():
        (run_dir / "exits" / f"node-{rank}").write_text("{}")
        os.utime(run_dir / "exits" / f"node-{rank}", (when, when))
    return run_dir


T0 = 1_800_000_000.0


def finished(state: str, nodes: dict[str, Any], **more: object) -> dict[str, object]:
    return {"state": state, "launched": int((T0 - 1) * 1e9), "started": T0, "ended": T0 + 60, "nodes": nodes,
            "exit_code": 0, **more}  # fmt: skip


def test_a_local_runs_timeline_names_each_nodes_end(tmp_path: Path) -> None:
    nodes = {"node-0": {"exit_code": 1}, "node-1": {"exit_code": 1, "stopped_by": "node-0"}}
    run_dir = run_folder(tmp_path, finished("FAILED", nodes, reason="node(s) node-0 exited with code(s) 1"), {},
                         {0: T0 + 30, 1: T0 + 40})  # fmt: skip
    assert run_events(run_dir, json.loads((run_dir / "state.json").read_text())) == [
        JobEvent(T0 - 1, "", "submitted"),
        JobEvent(T0, "node-0", "started"),
        JobEvent(T0, "node-1", "started"),
        JobEvent(T0 + 30, "node-0", "failed (exit 1)"),
        JobEvent(T0 + 40, "node-1", "stopped because node-0 failed (exit 1)"),
        JobEvent(T0 + 60, "", "failed: node(s) node-0 exited with code(s) 1"),
    ]


def test_a_stopped_an_interrupted_and_an_elastic_run(tmp_path: Path) -> None:
    nodes = {"node-0": {"exit_code": 0}, "node-1": {"exit_code": 137}}
    state = finished("SUCCEEDED", nodes, lost_nodes=["node-1"], interruptions=[{"at": T0 + 10, "exit_codes": {}}])
    events = run_events(run_folder(tmp_path, state, {}, {0: T0 + 50}), state)
    assert [(e.node, e.what) for e in events] == [
        ("", "submitted"), ("node-0", "started"), ("node-1", "started"),
        ("", "interrupted (managed spot's reclaim); nodes restarted"), ("node-0", "succeeded"),
        ("node-1", "lost (exit 137); the others re-formed"), ("", "succeeded"),
    ]  # fmt: skip
    running = {"state": "RUNNING", "launched": int(T0 * 1e9), "started": T0, "nodes": {"node-0": {"exit_code": None}}}
    assert [e.what for e in run_events(tmp_path, running)] == ["submitted", "started"]  # no end yet
    stopped = finished("STOPPED", {"node-0": {"exit_code": 143}}, reason="stopped on request")
    assert [e.what for e in run_events(tmp_path, stopped)][-2:] == ["stopped (exit 143)", "stopped: stopped on request"]


# torch 2.14.1's own lines (elastic/rendezvous/dynamic_rendezvous.py next_rendezvous, agent/server/api.py)
JOINED = "INFO:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'vm_1_0' has joined round {} of the rendezvous 'job' as rank {} in a world of size {}."
RESTART = "INFO:torch.distributed.elastic.agent.server.api:[default] Worker group FAILED. 3/3 attempts left; will restart worker group"


def test_elastic_re_forms_are_read_from_torchruns_lines() -> None:
    first: dict[str, int] = {}
    assert reform("[n1] " + JOINED.format(0, 0, 2), first) is None  # the node's first round: its forming
    assert reform("[n1] epoch=1/4 loss=0.5", first) is None
    assert reform("[n1] " + JOINED.format(1, 0, 1), first) == {
        "node": "n1", "time": None, "what": "re-formed: round 1, rank 0 of 1"}  # fmt: skip
    assert reform("[n2] " + RESTART, first) == {
        "node": "n2", "time": None,
        "what": "Worker group FAILED. 3/3 attempts left: restarting the worker group"}  # fmt: skip


def test_the_job_page_has_states_timeline_metrics_and_the_dry_runs_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # ./cloudddp-runs, as for the user
    logs = {"node-0": "epoch=0/2 loss=0.5000 val_acc=0.5\n" + JOINED.format(0, 0, 2) + "\n"
            + JOINED.format(1, 0, 1) + "\nepoch=1/2 loss=0.2500 val_acc=0.75\n"}  # fmt: skip
    run_dir = run_folder(tmp_path, finished("SUCCEEDED", {"node-0": {"exit_code": 0}}), logs, {0: T0 + 50})
    page = job_page(Followers(), "local", str(run_dir))
    assert page["state"] == "SUCCEEDED" and page["nodes"] == {"node-0": "exit 0"}
    assert page["request"] == REQUEST  # request.yaml, written by the dry run's own to_yaml
    assert [s["value"] for s in page["metrics"] if s["metric"] == "loss"] == [0.5, 0.25]
    assert [(e["node"], e["what"]) for e in page["events"]][-3:] == [
        ("node-0", "succeeded"), ("node-0", "re-formed: round 1, rank 0 of 1"),
        ("", "succeeded")]  # fmt: skip


def test_a_sagemaker_jobs_timeline_is_its_secondary_status_transitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """DescribeTrainingJob's answer as the service gives it (botocore parses the times to datetimes)."""
    from datetime import datetime, timezone

    from cloudddp.providers.sagemaker.provider import SageMakerProvider

    def at(seconds: float) -> datetime:
        return datetime.fromtimestamp(T0 + seconds, timezone.utc)

    described = {
        "CreationTime": at(0), "TrainingEndTime": at(300), "TrainingJobStatus": "Stopped",
        "SecondaryStatusTransitions": [
            {"Status": "Starting", "StartTime": at(1), "StatusMessage": "Launching requested ML instances"},
            {"Status": "Training", "StartTime": at(90)},
            {"Status": "Stopped", "StartTime": at(300), "StatusMessage": "Training job stopped"},
        ],
    }  # fmt: skip
    provider = SageMakerProvider.__new__(SageMakerProvider)
    monkeypatch.setattr(provider, "describe", lambda job_id: described)
    assert provider.events("job") == [
        JobEvent(T0, "", "submitted"), JobEvent(T0 + 1, "", "Starting: Launching requested ML instances"),
        JobEvent(T0 + 90, "", "Training"), JobEvent(T0 + 300, "", "Stopped: Training job stopped"),
        JobEvent(T0 + 300, "", "stopped"),
    ]  # fmt: skip


def test_a_provider_that_cannot_give_a_timeline_leaves_the_index_course_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job its scheduler forgot (qstat no longer knows it), expired credentials: the page still has the course
    the job index saw, after one line saying why the provider's own is missing."""
    from cloudddp import job_index
    from cloudddp.errors import CloudDDPError
    from cloudddp.ui import server

    class Forgetful:
        name = "pbs"

        def status(self, job_id: str) -> Any:
            raise CloudDDPError(f"qstat -f {job_id}: Unknown Job Id")

        events = status

        def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
            return iter(())

        def dry_run(self, job_id: str) -> None:
            return None

    monkeypatch.setattr(server, "get_provider", lambda name, **options: Forgetful())
    job_index.record("pbs", "42.server", "resnet", "cloudddp launch -p pbs")
    job_index.remember_state("pbs", "42.server", "SUCCEEDED")
    page = job_page(Followers(), "pbs", "42.server")
    assert [(e["node"], e["what"]) for e in page["events"]] == [
        ("", "no timeline from pbs: qstat -f 42.server: Unknown Job Id"), ("", "submitted"), ("", "succeeded")]  # fmt: skip


def test_a_finished_local_runs_log_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    logs = {"node-0": "epoch=0/2 loss=0.5000 val_acc=0.5\n"}
    run_dir = run_folder(tmp_path, finished("SUCCEEDED", {"node-0": {"exit_code": 0}}), logs, {0: T0 + 50})
    followers = Followers()
    first = job_page(followers, "local", str(run_dir))
    (run_dir / "logs" / "node-0.log").write_text("")  # were it read again, its metrics would be gone
    assert job_page(followers, "local", str(run_dir))["metrics"] == first["metrics"] and len(first["metrics"]) == 2


def test_the_jobs_page_takes_a_followed_jobs_last_values_from_its_follower() -> None:
    followers = Followers()
    follower = followers.watch(("local", "job"), lambda: iter(["[n1] epoch=0/2 loss=0.5", "[n1] epoch=1/2 loss=0.25"]),
                               {"loss": r"loss=([0-9.]+)"})  # fmt: skip
    wait_until(lambda: follower.ended, 10, "the log read")
    assert followers.last_values(("local", "job")) == {"loss": 0.25}
    assert followers.last_values(("local", "other")) is None  # read from its log instead
