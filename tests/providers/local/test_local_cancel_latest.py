"""`cancel` stops what it says it stops, `latest` is the run launched last, and a run id the file system cannot
take is a clear error.

- A cancel that comes before the detached runner has recorded itself (`Estimator.fit(wait=False)` then `stop()`)
  used to do nothing: state.json had no runner_pid yet. It now leaves a request the runner reads before it starts
  any node.
- A runner killed (`kill -9`) left every node running. Its nodes now stop with it; where one outlives it (no
  PR_SET_PDEATHSIG), `cancel` stops it itself, or says it could not (exit 2).
- `latest` used to be the run whose state.json changed last (the runner rewrites it when a node exits).

Upstream (issue 34 names torchrun and systemd as the references for local runs), only where the behaviour is
theirs:
- Nodes die with their runner as systemd's forked helpers die with the manager that forked them:
  systemd/systemd commit 52b123cadb6678073f2d7211d0c99ff6ad025a5c, src/basic/process-util.c
  `pidref_safe_fork_full`: with FORK_DEATHSIG_SIGTERM the child calls prctl(PR_SET_PDEATHSIG, SIGTERM), then
  raises the signal itself if getppid() is no longer the pid it was forked from ("Parent died early"), the race a
  parent killed before prctl leaves. cloudddp.launcher.supervisor.die_with_parent, the runner's preexec_fn, does
  both.
- A cancel of nodes that outlived their runner stops them as torchrun stops its workers: pytorch/pytorch v2.14.1
  (commit 5c4886908584029761b579af026dcfb627c84070, torch.version.git_version of the 2.14.1 wheel the tests run),
  torch/distributed/elastic/multiprocessing/api.py `SubprocessContext._close`: the death signal (SIGTERM) to each
  process still running, one bounded wait, then SIGKILL to what is left and a bounded wait for it (orphans.py:
  ORPHAN_GRACE, KILL_WAIT); each worker runs in its own session
  (subprocess_handler/subprocess_handler.py `_popen`: start_new_session=True), as each node does here.
- `latest`, the cancel request left for a runner that has not recorded itself, and the run ids refused are
  cloudddp's own (a run folder has no counterpart in either).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import PYTHON, REPO, clean_env, cli, run_cli, wait_until

from cloudddp import CloudDDPError, Estimator
from cloudddp.job_spec import build_spec
from cloudddp.launcher.supervisor import descendants, is_running
from cloudddp.providers.local import provider as local
from cloudddp.providers.local import runner as local_runner

SLEEPER = """\
import os, pathlib, sys, time
out = pathlib.Path(os.environ["SLEEPER_OUT"])
out.mkdir(parents=True, exist_ok=True)
(out / f"pid-{os.getpid()}.tmp").write_text(str(os.getpid()))
os.replace(out / f"pid-{os.getpid()}.tmp", out / f"pid-{os.getpid()}")
print("sleeping", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 300)
"""


def state_of(run: Path) -> dict[str, Any]:
    return json.loads((run / "state.json").read_text())  # type: ignore[no-any-return]


def script_pids(out: Path) -> list[int]:
    return [int(p.name.removeprefix("pid-")) for p in out.glob("pid-*") if not p.name.endswith(".tmp")]


def kill_tree(pids: list[int]) -> None:
    """Test cleanup: whatever a failing test left running, SIGKILLed (children first looked up)."""
    every = [*pids, *(child for pid in pids if is_running(pid) for child in descendants(pid))]
    for pid in every:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def job_pids(run: Path, out: Path) -> list[int]:
    state = state_of(run) if (run / "state.json").is_file() else {}
    pids = [n["pid"] for n in state.get("nodes", {}).values()]
    runner = state.get("runner_pid")
    return [*([runner] if runner else []), *pids, *script_pids(out)]


@pytest.fixture
def sleeper(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    source.mkdir()
    (source / "sleeper.py").write_text(SLEEPER)
    return source


# -- 1a: a cancel before the runner has recorded itself -------------------------------------------


class HeldRunner:
    """Stands in for the runner's Popen: the run stays PENDING (no runner_pid) until the test starts the real
    runner with what it was handed. Its pid is the test's own: a live runner that has not recorded itself yet."""

    started: ClassVar[list[HeldRunner]] = []

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        self.argv, self.pid = argv, os.getpid()
        self.stdin = io.BytesIO()
        self.stdin.close = lambda: None  # type: ignore[method-assign]  # keep the bytes readable
        HeldRunner.started.append(self)


@pytest.mark.network
def test_a_cancel_before_the_runner_recorded_itself_starts_no_node(
    tmp_path: Path, sleeper: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    HeldRunner.started = []
    out = tmp_path / "out"
    spec = build_spec({"entry_point": "sleeper.py", "source_dir": str(sleeper), "nodes": 2,
                       "environment": {"SLEEPER_OUT": str(out)},
                       "local": {"runs_dir": str(tmp_path / "runs"), "emulate": "none"}})  # fmt: skip
    provider = local.LocalProvider()
    with monkeypatch.context() as patch:
        patch.setattr(local.subprocess, "Popen", HeldRunner)
        handle = provider.submit(provider.render(spec))
    run = Path(handle.job_id)
    assert state_of(run)["state"] == "PENDING" and "runner_pid" not in state_of(run)
    provider.cancel(handle.job_id)  # no runner_pid to signal yet
    runner = subprocess.Popen(
        [PYTHON, "-m", "cloudddp.providers.local.runner", str(run)], stdin=subprocess.PIPE, cwd=REPO,
        env=clean_env(), start_new_session=True,
    )  # fmt: skip
    try:
        runner.communicate(HeldRunner.started[0].stdin.getvalue(), timeout=60)
        assert runner.returncode == 143
        state = state_of(run)
        assert state["state"] == "STOPPED" and state["nodes"] == {}, state
        assert "cancelled before" in state["reason"]
        assert provider.status(str(run)).state == "STOPPED"
        assert not out.exists(), "a node ran the script after the cancel"
    finally:
        if runner.poll() is None:
            runner.kill()
        kill_tree(job_pids(run, out))


@pytest.mark.slow
def test_estimator_stop_right_after_fit_stops_the_run(tmp_path: Path, sleeper: Path) -> None:
    out = tmp_path / "out"
    est = Estimator(provider="local", entry_point="sleeper.py", source_dir=str(sleeper), emulate="none",
                    environment={"SLEEPER_OUT": str(out)}, runs_dir=str(tmp_path / "runs"))  # fmt: skip
    est.fit(wait=False)
    assert est.latest_job is not None
    run = Path(est.latest_job.job_id)
    try:
        est.stop()
        wait_until(lambda: est.status().state == "STOPPED", 60, "the stopped run to read STOPPED")
        # The runner records STOPPED once its nodes have ended, then exits: its own end may come a moment later.
        pids = job_pids(run, out)
        wait_until(lambda: not [pid for pid in pids if is_running(pid)], 30, "every process of the run to end")
    finally:
        kill_tree(job_pids(run, out))


# -- 1b: a cancel after the runner died ---------------------------------------------------------


@pytest.mark.slow
def test_nodes_die_with_a_killed_runner(tmp_path: Path, sleeper: Path) -> None:
    """kill -9 (or the OOM killer) of the detached runner: its nodes get SIGTERM (PR_SET_PDEATHSIG) and stop, as
    systemd's forked helpers do (FORK_DEATHSIG_SIGTERM, see the module docstring); they trained on with nobody to
    stop them before."""
    out = tmp_path / "out"
    result = run_cli("launch", "-p", "local", "--emulate", "none", "--nodes", "2", "--no-wait",
                     "--runs-dir", str(tmp_path / "runs"), "-e", f"SLEEPER_OUT={out}", str(sleeper / "sleeper.py"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    run = next((tmp_path / "runs").iterdir())
    try:
        wait_until(lambda: len(script_pids(out)) == 2, 120, "both nodes' scripts to start")
        launchers = [n["pid"] for n in state_of(run)["nodes"].values()]
        scripts = script_pids(out)
        os.kill(state_of(run)["runner_pid"], signal.SIGKILL)
        wait_until(lambda: not [p for p in [*launchers, *scripts] if is_running(p)], 60, "the nodes to stop")
        status = run_cli("status", str(run)).stdout
        assert "FAILED" in status and "the local runner process died" in status and "running" not in status, status
        cancelled = run_cli("cancel", str(run))
        assert cancelled.returncode == 2 and "nothing to stop" in cancelled.stderr, cancelled.stdout + cancelled.stderr
    finally:
        kill_tree(job_pids(run, out))


@pytest.mark.process
def test_cancel_stops_nodes_that_outlived_their_runner(tmp_path: Path) -> None:
    """Where a node outlives its runner (no PR_SET_PDEATHSIG: not Linux, or a run from before it), `cancel`
    stops it itself and records the run STOPPED."""
    node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "cloudddp.launcher"],
                            start_new_session=True)  # fmt: skip
    run = tmp_path / "runs" / "orphaned"
    run.mkdir(parents=True)
    record = {"pid": node.pid, "start_time": local_runner.process_start_time(node.pid), "exit_code": None}
    state = {"state": "RUNNING", "runner_pid": dead_pid(), "nodes": {"node-0": record}}
    (run / "state.json").write_text(json.dumps(state))
    try:
        assert "node-0: running" in run_cli("status", str(run)).stdout
        cancelled = run_cli("cancel", str(run))
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        assert node.wait(timeout=30) == -signal.SIGTERM
        assert state_of(run)["state"] == "STOPPED"
    finally:
        kill_tree([node.pid])
        node.wait()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.process
def test_cancel_of_a_run_whose_runner_died_with_no_node_left_says_so(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "gone-20261124-184757"
    run.mkdir(parents=True)
    state = {"state": "RUNNING", "runner_pid": dead_pid(), "nodes": {"node-0": {"pid": dead_pid(), "exit_code": None}}}
    (run / "state.json").write_text(json.dumps(state))
    result = run_cli("cancel", str(run))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "gone-20261124-184757" in result.stderr and "nothing to stop" in result.stderr


# -- 2: latest is the run launched last ---------------------------------------------------------


class NoRunner:
    """The runner's Popen, doing nothing: these runs stay PENDING, which is all `latest` needs."""

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        self.pid = os.getpid()
        self.stdin = io.BytesIO()


@pytest.fixture
def no_runner(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as patch:
        patch.setattr(local.subprocess, "Popen", NoRunner)
        yield


def submit_named(tmp_path: Path, name: str) -> Path:
    (tmp_path / "job.py").write_text("print('hi')\n")
    spec = build_spec({"name": name, "entry_point": "job.py", "source_dir": str(tmp_path),
                       "local": {"runs_dir": str(tmp_path / "runs"), "emulate": "none"}})  # fmt: skip
    provider = local.LocalProvider()
    return Path(provider.submit(provider.render(spec)).job_id)


@pytest.mark.network
def test_latest_is_the_run_launched_last_not_the_one_written_last(tmp_path: Path, no_runner: None) -> None:
    first = submit_named(tmp_path, "bbb")
    second = submit_named(tmp_path, "aaa")  # the same second, and a name that sorts first
    # The first run's runner records a node's exit after the second launch: state.json is rewritten.
    state = state_of(first)
    state.update(state="SUCCEEDED", exit_code=0)
    local.write_state(first, state)
    future = time.time() + 60
    os.utime(first / "state.json", (future, future))
    provider = local.LocalProvider(tmp_path / "runs")
    assert provider.find_run("latest") == second
    assert provider.status("latest").job_id == str(second)
    third = submit_named(tmp_path, "ccc")
    assert provider.find_run("latest") == third


def test_latest_of_runs_without_a_launch_time_goes_by_their_request(tmp_path: Path) -> None:
    """Run folders written before the launch time was recorded: request.yaml is written once, at launch."""
    runs = tmp_path / "runs"
    for name, launched in (("old-a", 1_000), ("old-b", 2_000)):
        (runs / name).mkdir(parents=True)
        (runs / name / "request.yaml").write_text("provider: local\n")
        os.utime(runs / name / "request.yaml", (launched, launched))
        (runs / name / "state.json").write_text(json.dumps({"state": "SUCCEEDED", "nodes": {}}))
    os.utime(runs / "old-a" / "state.json", (3_000, 3_000))  # written last, launched first
    (runs / "broken").mkdir()  # damaged, launched before old-b (its state.json's mtime is all there is)
    (runs / "broken" / "state.json").write_text("{not json")
    os.utime(runs / "broken" / "state.json", (1_500, 1_500))
    assert local.LocalProvider(runs).find_run("latest") == runs / "old-b"


@pytest.mark.slow
def test_status_and_cancel_latest_act_on_the_run_launched_last(tmp_path: Path, sleeper: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    env = {"CLOUDDDP_RUNS_DIR": str(runs)}
    (sleeper / "short.py").write_text("print('done')\n")
    common = ["launch", "-p", "local", "--emulate", "none", "--no-wait", "--runs-dir", str(runs)]
    assert run_cli(*common, "--name", "bbb", str(sleeper / "short.py")).returncode == 0
    assert run_cli(*common, "--name", "aaa", "-e", f"SLEEPER_OUT={out}", str(sleeper / "sleeper.py")).returncode == 0
    short = next(runs.glob("bbb-*"))
    long = next(runs.glob("aaa-*"))
    try:
        wait_until(lambda: state_of(short)["state"] == "SUCCEEDED", 120, "the short run to end")
        wait_until(lambda: len(script_pids(out)) == 1, 120, "the long run's script to start")
        status = run_cli("status", "latest", env=env)
        assert status.stdout.startswith(f"{long}: RUNNING"), status.stdout + status.stderr
        assert run_cli("cancel", "latest", env=env).returncode == 0
        wait_until(lambda: state_of(long)["state"] == "STOPPED", 60, "the long run to stop")
        wait_until(lambda: not [pid for pid in script_pids(out) if is_running(pid)], 30, "the script to end")
    finally:
        kill_tree(job_pids(long, out))


# -- 3: a run id the file system cannot take ----------------------------------------------------


@pytest.mark.parametrize("command", ["status", "logs", "cancel"])
def test_a_run_id_too_long_for_a_file_name_is_no_local_run(tmp_path: Path, command: str) -> None:
    result = cli(command, "a" * 5000, cwd=tmp_path, env={"CLOUDDDP_RUNS_DIR": str(tmp_path / "runs")})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "no local run 'aaaa" in result.stderr
    assert len(result.stderr) < 1000, "the 5000-character value is shortened in the message"


def test_a_run_id_with_a_nul_byte_is_no_local_run(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match="no local run"):
        local.LocalProvider(tmp_path).status("run\0name")
