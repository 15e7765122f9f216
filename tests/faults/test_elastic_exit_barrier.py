"""A node of an elastic job lost after the others' last collective: the survivors end soon after their work.

Their workers never notice the loss (no collective is left to fail), no new round forms, and torchrun's agent waits
in its exit barrier for every node of the round: before cloudddp/launcher/exit_barrier.py the two survivors waited
torchrun's full 300 s after finishing. Now they leave once the lost node is known dead to the rendezvous (no
heartbeat for keep_alive_interval 5 s x keep_alive_max_attempt 3 x MARGIN 1.5 = 22.5 s): ending within 10 s of the
last surviving worker (measured: about 0.5 s), exit 0, the job SUCCEEDED with the lost node listed, and the
trained model as the elastic node-loss test wants it.

Three nodes train the tiny model to the end (world size 3), each rank then holds on a file the test owns; node 2
(node 0 hosts the c10d store) loses every process to kill -9; once its last heartbeat is older than the limit the
test lets the survivors' workers end, and times the survivors' launchers from there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest
from faults.jobs import alive, job_processes, kill_node, log_text, node_pid, run_folder, state, still_running
from helpers import SOURCES, run_cli, wait_until

from cloudddp.launcher.exit_barrier import MARGIN

# torch's defaults (dynamic_rendezvous.py: keep_alive_interval=5, keep_alive_max_attempt=3), which the job keeps.
LOST_AFTER = 5 * 3 * MARGIN
ACCURACY_BAND = 0.75  # as tests/faults/test_elastic_node_loss.py: an undisturbed run reaches 0.84-0.94
ENDED = ("SUCCEEDED", "FAILED")
ENDS_WITHIN = 10.0  # issue 34: the survivors end at most 10 s after their last worker (torch alone: 300 s)

# The job's script: train_ddp.py to the end (model saved, process group destroyed), then wait on the test's file.
TRAIN_THEN_HOLD = """\
import os, sys, time
from pathlib import Path

sources, hold = sys.argv[1], Path(sys.argv[2])
sys.argv = [os.path.join(sources, "train_ddp.py"), *sys.argv[3:]]
sys.path.insert(0, sources)
import train_ddp

train_ddp.main()
(hold.parent / ("trained-rank" + os.environ["RANK"])).write_text(str(os.getpid()))
while hold.exists():
    time.sleep(0.05)
sys.stdout.flush()
os._exit(0)  # as train_ddp.py leaves (pytorch/pytorch#190489)
"""


@pytest.mark.slow
def test_survivors_end_soon_after_their_last_worker_when_a_node_was_lost_at_the_end(
    tmp_path: Path, fault_data: Path
) -> None:
    code, hold = tmp_path / "code", tmp_path / "signals" / "hold"
    code.mkdir()
    hold.parent.mkdir()
    hold.write_text("")
    (code / "train_then_hold.py").write_text(TRAIN_THEN_HOLD)
    started = run_cli("launch", "--emulate", "none", "--nodes", "2:3", "--runs-dir", str(tmp_path / "runs"),
                      "-i", f"train={fault_data}", "--no-wait", str(code / "train_then_hold.py"), "--",
                      str(SOURCES), str(hold), "--arch", "tiny", "--epochs", "4", "--image-size", "16",
                      "--batch-size", "8", "--lr", "0.05")  # fmt: skip
    assert started.returncode == 0, started.stderr
    run = run_folder(started.stdout)
    trained = [hold.parent / f"trained-rank{rank}" for rank in range(3)]
    try:
        wait_until(lambda: all(p.exists() for p in trained) or state(run)["state"] in ENDED, 300,
                   "every rank to finish training")  # fmt: skip
        assert all(p.exists() for p in trained), (state(run), log_text(run)[-3000:])
        workers = [int(p.read_text()) for p in trained]
        launchers = [node_pid(run, node) for node in ("node-0", "node-1")]
        killed = kill_node(run, "node-2")
        lost_at = time.monotonic()
        survivors = [pid for pid in workers if pid not in killed]
        assert len(survivors) == 2 and all(alive(pid) for pid in survivors + launchers), still_running(run)
        # Let time pass until node-2's last heartbeat is older than the limit (it is younger than the kill): the
        # survivors' agents can tell it is lost from then on. What is measured starts when their workers end.
        time.sleep(max(0.0, lost_at + LOST_AFTER + 1.0 - time.monotonic()))
        hold.unlink()
        wait_until(lambda: not any(alive(pid) for pid in survivors), 30, "the survivors' workers to end")
        last_worker = time.monotonic()
        with contextlib.suppress(AssertionError):
            wait_until(lambda: not any(alive(pid) for pid in launchers), ENDS_WITHIN, "the survivors' launchers")
        ended = time.monotonic() - last_worker
        assert not any(alive(pid) for pid in launchers), f"{ended:.1f} s after the last worker\n{still_running(run)}"
        print(f"last surviving worker ended -> both survivors' launchers gone: {ended:.1f} s")
        wait_until(lambda: state(run)["state"] in ENDED, 60, "the job to end")
    finally:
        for pid in job_processes(run):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    final, log = state(run), log_text(run)
    assert final["state"] == "SUCCEEDED", (final, log[-3000:])
    assert final["lost_nodes"] == ["node-2"] and final["nodes"]["node-2"]["exit_code"] == 137
    assert [final["nodes"][node]["exit_code"] for node in ("node-0", "node-1")] == [0, 0]
    assert log.count("cloudddp: leaving torchrun's exit barrier: rank(s) ") >= 1, log[-3000:]
    metrics = json.loads((run / "model" / "metrics.json").read_text())
    assert metrics["epoch"] == 4 and metrics["world_size"] == 3 and metrics["val_acc"] >= ACCURACY_BAND
    prints = [(run / "model" / f"fingerprint-rank{rank}.txt").read_text() for rank in range(3)]
    assert prints[0] == prints[1] == prints[2]  # every replica, the lost node's included, held the same weights
    assert not job_processes(run)
