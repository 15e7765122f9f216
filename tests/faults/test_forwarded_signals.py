"""A warning signal passed on to the workers does not change the job's outcome.

Slurm's `--signal=B:USR1@120` (the time-limit warning) reaches every node's launcher, which passes
SIGUSR1 to the training processes; with proctrack/cgroup Slurm signals every process of the step,
torchrun included. A script that handles it and ends normally ends the job with exit 0: neither
the launcher nor torchrun may die of, or report 128+10 for, a warning.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from faults.jobs import process_tree, wait_for
from helpers import PYTHON, SOURCES, clean_env

from cloudddp.providers.local.provider import free_port


@pytest.mark.slow
def test_sigusr1_to_every_process_of_a_node_whose_script_exits_0_leaves_exit_code_0(tmp_path: Path) -> None:
    out = tmp_path / "out"
    launcher = subprocess.Popen(
        [PYTHON, "-m", "cloudddp.launcher", "--provider", "standalone", "--master-port", str(free_port()),
         str(SOURCES / "allreduce_check.py"), "--out-dir", str(out), "--sleep", "8"],
        env=clean_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: (out / "rank0.json").exists(), 120, "the all-reduce")
        for pid in process_tree(launcher.pid):  # every process of the node, as Slurm's cgroup tracking does
            os.kill(pid, signal.SIGUSR1)
        wait_for(lambda: (out / "usr1-rank0.txt").exists(), 10, "SIGUSR1 to reach the script")
        output, _ = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    assert launcher.returncode == 0, output


@pytest.mark.process
def test_a_node_stopping_on_its_own_sigterm_keeps_its_grace_period_when_a_peer_aborts() -> None:
    # The whole job is stopped (every node gets SIGTERM); a peer that ended first reports a failure.
    # The node must not cut its own grace period to the 2 s fail-fast kill: rank 0 may be checkpointing.
    from cloudddp.launcher.supervisor import Supervisor

    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    supervisor = Supervisor([PYTHON, "-c", stubborn], clean_env(), grace_period=60)
    supervisor.proc = subprocess.Popen([PYTHON, "-c", stubborn])  # type: ignore[assignment]
    try:
        supervisor._on_signal(signal.SIGTERM, None)
        deadline = supervisor.kill_deadline
        supervisor.abort("node 1 failed (exit code 143)", 143)
        assert supervisor.abort_reason is None and supervisor.kill_deadline == deadline
    finally:
        supervisor.proc.kill()
        supervisor.proc.wait()
