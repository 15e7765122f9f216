"""A test's command that times out leaves none of its processes behind (helpers.run_tree, behind run_cli too)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from helpers import clean_env, run_tree

from cloudddp.launcher.supervisor import is_running

pytestmark = pytest.mark.process


def test_a_timed_out_command_takes_the_processes_it_started_with_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "background.pid"
    # The shell starts a sleeper in the background (as a job script starts its launchers), then outlives the timeout.
    script = f"sleep 300 & echo $! > {pid_file}; sleep 300"
    with pytest.raises(subprocess.TimeoutExpired):
        run_tree(["bash", "-c", script], cwd=tmp_path, env=clean_env(), timeout=2)
    background = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    # SIGKILL is delivered at once. A zombie counts as gone: its reaper may be slow, or be this pytest worker, made a
    # subreaper by an in-process launcher test, which never reaps it.
    while time.monotonic() < deadline:
        if not is_running(background):
            return
        time.sleep(0.05)
    pytest.fail(f"the background process {background} outlived its command's timeout")
