"""Fault 5: spot interruption, stop, preemption. SIGTERM (SageMaker stop and spot reclaim) and
SIGUSR1 (Slurm's `--signal` warning) reach sources/train_ddp.py, which writes a checkpoint and
exits; the next launch with the same checkpoint folder resumes at the same step, with the data
order continuing: the final weights equal those of a run that was never interrupted.

The signals are sent at a step the test chose (it waits for the step's log line), so nothing
depends on timing. `--interrupt-after` (the SageMaker emulation's managed spot cycle) is tested
for its whole cycle; where in training the interruption lands varies, and every claim checked
holds wherever it lands.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from faults.jobs import log_text, run_folder, state, wait_for
from helpers import SOURCES, run_cli

TRAIN = str(SOURCES / "train_ddp.py")
STEPS_PER_EPOCH = 6  # 96 images, 2 nodes x 1 process, 8 per batch
SCRIPT = ["--arch", "tiny", "--epochs", "3", "--image-size", "16", "--batch-size", "8", "--lr", "0.05", "--log-steps"]


@pytest.fixture(scope="module")
def data(fault_data: Path) -> Path:
    return fault_data


def launch(tmp_path: Path, data: Path, ckpt: Path, *extra: str, script: tuple[str, ...] = ()) -> tuple[int, str]:
    result = run_cli("launch", "--nodes", "2", "--runs-dir", str(tmp_path / "runs"), "-i", f"train={data}",
                     "--checkpoint", str(ckpt), *extra, TRAIN, "--", *SCRIPT, *script)  # fmt: skip
    return result.returncode, result.stdout + result.stderr


def fingerprints(run: Path) -> set[str]:
    return {p.read_text().strip() for p in run.glob("nodes/*/model/fingerprint-rank*.txt")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, data: Path) -> set[str]:
    """The weights of the same job never interrupted."""
    tmp_path = tmp_path_factory.mktemp("reference")
    code, out = launch(tmp_path, data, tmp_path / "ckpt")
    assert code == 0, out[-3000:]
    prints = fingerprints(run_folder(out))
    assert len(prints) == 1  # both replicas identical
    return prints


def steps_trained(log: str) -> list[int]:
    return [int(n) for n in re.findall(r"^(?:\[\S+\] )?step=(\d+) ", log, re.M)]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1], ids=["SIGTERM-stop", "SIGUSR1-slurm-warning"])
def test_a_signal_checkpoints_mid_epoch_and_the_next_launch_resumes_at_that_step(
    tmp_path: Path, data: Path, reference: set[str], sig: signal.Signals
) -> None:
    ckpt = tmp_path / "ckpt"
    # A second per step: the signal, sent as step 7 ends, lands well before epoch 2's end (step 12).
    code, out = launch(tmp_path, data, ckpt, "--no-wait", script=("--step-sleep", "1.0"))
    assert code == 0, out
    run = run_folder(out)
    wait_for(lambda: "step=7 " in log_text(run), 240, "step 7 (the first of epoch 2)", poll=0.05)
    if sig == signal.SIGTERM:
        # What `cloudddp cancel` does (StopTrainingJob): the runner sends SIGTERM to every host's launcher.
        os.kill(state(run)["runner_pid"], signal.SIGTERM)
    else:
        for record in state(run)["nodes"].values():  # srun passes Slurm's warning to each node's launcher
            os.kill(int(record["pid"]), signal.SIGUSR1)
    wait_for(lambda: state(run)["state"] not in ("RUNNING", "STOPPING", "PENDING"), 120, "the job to end")
    first = log_text(run)
    saved = int(re.search(r"stop requested \((\w+)\): checkpoint at step (\d+)", first).group(2))  # type: ignore[union-attr]
    assert f"stop requested ({sig.name})" in first
    assert 7 <= saved < 3 * STEPS_PER_EPOCH and saved % STEPS_PER_EPOCH != 0  # mid-epoch, not an epoch's end
    assert max(steps_trained(first)) == saved  # the stop came at the next step boundary

    code, out = launch(tmp_path, data, ckpt)
    assert code == 0, out[-3000:]
    second = log_text(run_folder(out))
    assert f"at step {saved} (epoch {saved // STEPS_PER_EPOCH + 1}," in second
    assert steps_trained(second) == list(range(saved + 1, 3 * STEPS_PER_EPOCH + 1))  # nothing twice, nothing skipped
    assert fingerprints(run_folder(out)) == reference  # same steps, same data order, same weights


@pytest.mark.slow
def test_interrupt_after_stops_every_host_and_restarts_from_the_checkpoint_folder(
    tmp_path: Path, data: Path, reference: set[str]
) -> None:
    # No shared checkpoint folder: the emulation keeps each host's /opt/ml/checkpoints apart and
    # copies them through its stand-in for CheckpointConfig.S3Uri, as SageMaker does.
    # 18 steps x 2 s of sleep = 36 s of training at least, so the interruption at 25 s lands before
    # the end however fast the machine is (with 0.7 s a quiet machine had finished by then).
    result = run_cli("launch", "--nodes", "2", "--runs-dir", str(tmp_path / "runs"), "-i", f"train={data}",
                     "--interrupt-after", "25", TRAIN, "--", *SCRIPT, "--step-sleep", "2.0",
                     "--checkpoint-every", "1")  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    run = run_folder(result.stdout)
    final = state(run)
    assert final["state"] == "SUCCEEDED" and len(final["interruptions"]) == 1
    log = log_text(run)
    # Only the restart's own line counts: the stop message at an epoch's end also says "after epoch N;".
    resumed = re.search(r"^(?:\[\S+\] )?resumed from \S+ (?:at step \d+ \(epoch|after epoch \d+;)", log, re.M)
    trained = steps_trained(log)
    if resumed:  # the interruption came after the first checkpoint: training continued from it
        # Mid-epoch ("checkpoint at step N") or, if the signal lands as an epoch ends, "checkpoint after epoch N".
        assert "stop requested (SIGTERM): checkpoint " in log
        assert trained.count(3 * STEPS_PER_EPOCH) == 1 and len(trained) == len(set(trained))
    assert (run / "checkpoint-store").is_dir()  # what the hosts uploaded before they were stopped
    assert fingerprints(run) == reference
