"""A full disk under the runs folder: the runner stops the nodes and `status` names the full file system (it
died with an empty log, and status said only "the local runner process died").

Upstream (issue 34 names torchrun and systemd as the references for local runs), only where the behaviour is
theirs: a node's log that can no longer be written is given up while the node's output is still read, as journald
drops what it cannot write and goes on reading its streams (systemd/systemd commit
e150e82097211f09b911c7784a89ef9efed713ca, src/journal/journald-server.c `write_to_journal`: an entry that fails
to be written even after rotating and vacuuming is logged, "Failed to write entry ... despite vacuuming,
ignoring", and dropped). The runner's stop on a run folder it cannot write and status's naming of the full file
system are cloudddp's own.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import clean_env, run_cli
from test_local_cancel_latest import job_pids, kill_tree, script_pids, wait_until

from cloudddp.launcher.supervisor import is_running
from cloudddp.providers.local import provider as local
from cloudddp.providers.local import runner as local_runner


def test_status_of_a_dead_runner_names_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "runs" / "full"
    run.mkdir(parents=True)
    (run / "runner.pid").write_text("999999999")  # no such process
    (run / "state.json").write_text(json.dumps({"state": "RUNNING", "launched": time.time_ns(), "nodes": {}}))
    monkeypatch.setattr(local.os, "statvfs", lambda _: SimpleNamespace(f_bavail=3, f_frsize=4096))
    reason = local.LocalProvider(tmp_path / "runs").status("latest").reason
    assert reason == f"the local runner process died: the file system holding {run} is full (12288 bytes free)"


class Node:
    """A node process as the runner holds it: never ends by itself; records the signals it is sent."""

    def __init__(self) -> None:
        self.pid, self.signals, self.waited = 4242, [], False

    def poll(self) -> None:
        return None

    def wait(self) -> int:
        self.waited = True
        return -15


def test_a_runner_that_cannot_write_its_run_folder_stops_the_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = local_runner.Runner(tmp_path, {"nodes": [], "launched": 1})
    node = Node()
    runner.procs["algo-1"] = node  # type: ignore[assignment]

    def no_space(*_: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(local_runner, "write_state", no_space)
    monkeypatch.setattr(local_runner.os, "kill", lambda pid, sig: node.signals.append((pid, sig)))
    monkeypatch.setattr(local_runner.signal, "signal", lambda *_: None)
    assert runner.run() == 1
    assert node.signals == [(4242, local_runner.signal.SIGTERM)] and node.waited
    assert "No space left on device; stopped the nodes" in capsys.readouterr().err


FILL_OR_SLEEP = """\
import os, pathlib, sys, time
if os.environ["GROUP_RANK"] == "0":  # fills the runs folder's file system, then fails: the runner must record it
    handle = open(os.environ["FILL"], "wb", buffering=0)
    try:
        while True:
            handle.write(b"x" * 65536)
    except OSError:
        os._exit(3)
else:
    out = pathlib.Path(os.environ["SLEEPER_OUT"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"pid-{os.getpid()}").write_text("")
    time.sleep(300)
"""


@pytest.mark.process
def test_a_full_disk_stops_the_job_and_status_says_so(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    disk, out, source = tmp_path / "disk", tmp_path / "out", tmp_path / "src"
    disk.mkdir()
    source.mkdir()
    (source / "fill_or_sleep.py").write_text(FILL_OR_SLEEP)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    runs, pids = disk / "runs", []
    try:
        env = {"CLOUDDDP_RUNS_DIR": str(runs)}
        launched = run_cli("launch", "-p", "local", "--emulate", "none", "--nodes", "2", "--no-wait",
                           "-e", f"FILL={disk / 'filler'}", "-e", f"SLEEPER_OUT={out}",
                           str(source / "fill_or_sleep.py"), env=env)  # fmt: skip
        assert launched.returncode == 0, launched.stdout + launched.stderr
        run = next(runs.iterdir())
        wait_until(lambda: len(script_pids(out)) == 1, 120, "node 1's script to start")
        pids = job_pids(run, out)
        wait_until(lambda: not [pid for pid in script_pids(out) if is_running(pid)], 120, "node 1 to be stopped")
        status = run_cli("status", "latest", env=env)
        assert "FAILED" in status.stdout, status.stdout + status.stderr
        assert f"the local runner process died: the file system holding {run} is full" in status.stdout
    finally:
        kill_tree(pids)
        subprocess.run(["umount", "-l", str(disk)], env=clean_env(), check=False)


def test_a_log_that_cannot_be_written_is_given_up_but_the_nodes_output_is_still_read(tmp_path: Path) -> None:
    """A full disk must not block a printing node on a pipe nobody reads: the pump drains the output to its end."""
    import io

    from cloudddp.providers.local import log_pump

    class FullDisk(io.BytesIO):
        def write(self, data: Any) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    output = io.BytesIO(b"".join(b"line %d\n" % n for n in range(10_000)))
    real_open = open

    def opened(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        return FullDisk() if str(path).endswith("node.log") else real_open(path, mode, *args, **kwargs)

    import builtins

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builtins, "open", opened)
        log_pump.pump(output, tmp_path / "node.log", [])
    assert output.closed  # read to its end, then closed: the node was never left blocked
