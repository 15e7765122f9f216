"""A stop (SIGTERM) that reaches the launcher while it is starting torchrun is passed on, and acts at once.

Before: the forked child kept the launcher's Python handler until it installed its own, so the SIGTERM the
supervisor passed on right after the fork was taken by that handler's copy (no child of its own to pass it to)
and lost: torchrun and the workers ran on, no checkpoint was written, and the SIGKILL after the grace period
ended them (reproduced 3 of 3 by an exploratory tester; here, the script ran to its end)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SLEEPER = """
import pathlib, time
time.sleep(5)
pathlib.Path("finished").write_text("ran to its end")
"""
DRIVER = """
import os, signal, sys
from cloudddp.launcher.supervisor import Supervisor
supervisor = Supervisor([sys.executable, "-m", "sleeper"], dict(os.environ, PYTHONPATH=os.getcwd()), grace_period=60)
supervisor._on_signal(signal.SIGTERM, None)  # as a SIGTERM arriving while the child is being started does
print(supervisor.run(), flush=True)
"""


@pytest.mark.process
def test_a_stop_while_torchrun_starts_stops_it(tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text(textwrap.dedent(SLEEPER))
    for trial in range(3):
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER)], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.stdout.strip() == "143", (trial, result.stdout, result.stderr)
        assert not (tmp_path / "finished").exists(), f"trial {trial}: the script was not stopped"
