"""A run folder whose state.json is damaged, or whose runner never started, is reported as it is and stays
cancellable: `latest` never falls back to an older run (a `cancel latest` stopped an older job so).

Upstream: none. Issue 34 names torchrun and systemd as the references for local runs, but what is tested here
(which run is `latest`, the state file's shape and its damage as one paragraph, a runner that never started) is
about cloudddp's own run folders, which neither has. The stop itself, once the runner is signalled, is the one
test_local_cancel_latest.py traces to systemd and torchrun.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers import cli, run_cli
from test_local_cancel_latest import job_pids, kill_tree, script_pids, state_of, wait_until

from cloudddp.launcher.supervisor import is_running
from cloudddp.providers.local import provider as local

DAMAGED = {
    "not JSON": "{not json",
    "a list": "[]",
    "no state": json.dumps({"nodes": {}}),
    "a state of the wrong type": json.dumps({"state": 3}),
    "nodes as a list": json.dumps({"state": "RUNNING", "nodes": []}),
    "a node record that is a number": json.dumps({"state": "RUNNING", "nodes": {"algo-1": 5}}),
    "a runner pid that is text": json.dumps({"state": "RUNNING", "runner_pid": "x", "nodes": {}}),
}


def make_run(runs: Path, name: str, state: str, launched_s: int) -> Path:
    run = runs / name
    run.mkdir(parents=True)
    (run / "request.yaml").write_text("provider: local\n")  # written once, at launch
    os.utime(run / "request.yaml", (launched_s, launched_s))
    (run / "state.json").write_text(state)
    return run


@pytest.mark.parametrize("damage", DAMAGED, ids=list(DAMAGED))
def test_the_newest_run_is_latest_and_its_damage_is_one_paragraph(tmp_path: Path, damage: str) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "older", json.dumps({"state": "RUNNING", "launched": 1_000 * 10**9, "nodes": {}}), 1_000)
    newest = make_run(runs, "newest", DAMAGED[damage], 2_000)
    assert local.LocalProvider(runs).find_run("latest") == newest
    result = cli("status", "latest", env={"CLOUDDDP_RUNS_DIR": str(runs)})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert f"the local run newest has a damaged state file, {newest / 'state.json'}" in result.stderr
    assert "older" not in result.stdout + result.stderr


def test_cancel_of_a_damaged_run_without_a_runner_says_nothing_is_known_to_stop(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = make_run(runs, "newest", "{not json", 2_000)
    result = cli("cancel", "latest", env={"CLOUDDDP_RUNS_DIR": str(runs)})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert f"cannot cancel the local run newest: its state file {run / 'state.json'} is damaged" in result.stderr


def test_a_pending_run_whose_runner_never_started_is_reported_so_and_not_cancelled(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    launched = time.time_ns() - int(local.RUNNER_START_GRACE * 2e9)
    make_run(runs, "stuck", json.dumps({"state": "PENDING", "launched": launched, "nodes": {}}), 2_000)
    status = local.LocalProvider(runs).status("latest")
    assert (status.state, status.reason) == ("FAILED", "the local runner never started")
    result = cli("cancel", "latest", env={"CLOUDDDP_RUNS_DIR": str(runs)})
    assert result.returncode == 2 and "nothing to stop" in result.stderr, result.stdout + result.stderr


def test_a_run_just_launched_is_pending_until_its_runner_records_itself(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "new", json.dumps({"state": "PENDING", "launched": time.time_ns(), "nodes": {}}), 2_000)
    assert local.LocalProvider(runs).status("latest").state == "PENDING"


def recorded_state(run: Path) -> str | None:
    try:
        return str(state_of(run)["state"])
    except ValueError:  # still the damaged file
        return None


@pytest.mark.slow
def test_a_damaged_run_whose_runner_runs_is_cancelled_by_its_runner(tmp_path: Path) -> None:
    runs, out, source = tmp_path / "runs", tmp_path / "out", tmp_path / "src"
    source.mkdir()
    (source / "sleeper.py").write_text(
        "import os, pathlib, time\nout = pathlib.Path(os.environ['SLEEPER_OUT'])\nout.mkdir(exist_ok=True)\n"
        "(out / f'pid-{os.getpid()}').write_text('')\ntime.sleep(300)\n"
    )
    launched = run_cli("launch", "-p", "local", "--emulate", "none", "--no-wait", "--runs-dir", str(runs),
                       "-e", f"SLEEPER_OUT={out}", str(source / "sleeper.py"))  # fmt: skip
    assert launched.returncode == 0, launched.stdout + launched.stderr
    run = next(runs.iterdir())
    pids = []
    try:
        wait_until(lambda: len(script_pids(out)) == 1, 120, "the script to start")
        pids = job_pids(run, out)
        (run / "state.json").write_text("{damaged")
        result = run_cli("cancel", "latest", env={"CLOUDDDP_RUNS_DIR": str(runs)})
        assert result.returncode == 0, result.stdout + result.stderr
        wait_until(lambda: not [pid for pid in script_pids(out) if is_running(pid)], 60, "the script to end")
        wait_until(lambda: recorded_state(run) == "STOPPED", 30, "the runner to record the stop")
    finally:
        kill_tree(pids)
