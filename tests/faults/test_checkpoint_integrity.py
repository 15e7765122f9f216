"""Fault 6: a process killed while writing a checkpoint never leaves one that fails to load.

The writer is really killed (SIGKILL) in the middle of `torch.save`: the object being pickled
announces that the first part of the file is written, then blocks. The same kill against a plain
`torch.save` to the final name (the control) leaves a file that does not load, so the test can fail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import PYTHON, SOURCES

sys.path.insert(0, str(SOURCES))
# sources/ is the training script's folder (shipped as is to the nodes), not a package.
from checkpointing import (
    Position,
    ResumableSampler,
    load_latest,
    position_of,
    save_checkpoint,
)

WRITER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {sources!r})
import torch
from checkpointing import save_checkpoint

class Stall:
    '''Pickled in the middle of the state: says so, then blocks until the test kills this process.'''
    def __reduce__(self):
        Path({marker!r}).write_text("writing")
        time.sleep(600)
        return (int, ())

folder = Path({folder!r})
big = torch.arange(1_000_000, dtype=torch.float32)
save_checkpoint(folder, {{"weights": big, "position": {{"epoch": 1, "consumed": 8, "step": 1}}, "epoch": 0}}, step=1)
state = {{"weights": big + 1, "stall": Stall(), "position": {{"epoch": 1, "consumed": 16, "step": 2}}, "epoch": 0}}
if {atomic!r}:
    save_checkpoint(folder, state, step=2)
else:
    torch.save(state, folder / "checkpoint-step000000002.pt")  # the unsafe way
"""


def kill_while_writing(tmp_path: Path, atomic: bool) -> Path:
    folder, marker = tmp_path / "ckpt", tmp_path / "marker"
    code = WRITER.format(sources=str(SOURCES), marker=str(marker), folder=str(folder), atomic=atomic)
    writer = subprocess.Popen([PYTHON, "-c", code])
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():  # step 1 is saved and step 2 is half-written now
            assert writer.poll() is None and time.monotonic() < deadline, "the writer never reached step 2"
            time.sleep(0.05)
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        writer.wait()
    return folder


def every_checkpoint_loads(folder: Path) -> bool:
    for path in folder.glob("checkpoint*.pt"):
        try:
            torch.load(path, weights_only=False)
        except Exception:
            return False
    return True


@pytest.mark.slow
def test_a_writer_killed_mid_save_leaves_only_complete_checkpoints(tmp_path: Path) -> None:
    folder = kill_while_writing(tmp_path, atomic=True)
    leftovers = [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")]
    assert leftovers, "the kill did not land inside the write"  # the half-written file exists, under a temp name
    assert every_checkpoint_loads(folder)
    path, state = load_latest(folder)  # type: ignore[misc]
    assert path.name == "checkpoint-step000000001.pt" and position_of(state) == Position(1, 8, 1)
    # The next save clears what the killed writer left.
    save_checkpoint(folder, {"position": {"epoch": 1, "consumed": 16, "step": 2}, "epoch": 0}, step=2)
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]
    assert load_latest(folder)[0].name == "checkpoint-step000000002.pt"  # type: ignore[index]


@pytest.mark.slow
def test_control_the_same_kill_breaks_a_plain_torch_save(tmp_path: Path) -> None:
    folder = kill_while_writing(tmp_path, atomic=False)
    assert not every_checkpoint_loads(folder)


def test_resume_picks_the_newest_complete_checkpoint_and_says_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for step in (3, 6):
        save_checkpoint(tmp_path, {"position": {"epoch": 1, "consumed": step * 8, "step": step}, "epoch": 0}, step)
    # A newer file that a sync tool copied half-way (S3 sync, rsync without --partial-dir).
    whole = (tmp_path / "checkpoint-step000000006.pt").read_bytes()
    (tmp_path / "checkpoint-step000000009.pt").write_bytes(whole[: len(whole) // 2])
    path, state = load_latest(tmp_path)  # type: ignore[misc]
    assert path.name == "checkpoint-step000000006.pt" and position_of(state).step == 6
    err = capsys.readouterr().err
    assert "skipping" in err and "checkpoint-step000000009.pt" in err


def test_only_the_newest_checkpoints_are_kept_and_checkpoint_pt_is_the_newest(tmp_path: Path) -> None:
    for step in range(1, 6):
        save_checkpoint(tmp_path, {"position": {"epoch": 1, "consumed": 0, "step": step}, "epoch": 0}, step, keep=2)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["checkpoint-step000000004.pt", "checkpoint-step000000005.pt", "checkpoint.pt"]
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=False)["position"]["step"] == 5


def test_an_epoch_only_checkpoint_of_the_old_script_still_resumes(tmp_path: Path) -> None:
    torch.save({"epoch": 2, "model": {}}, tmp_path / "checkpoint.pt")
    path, state = load_latest(tmp_path)  # type: ignore[misc]
    assert path.name == "checkpoint.pt" and position_of(state) == Position(epoch=3, consumed=0, step=0)


def test_the_data_order_continues_after_the_consumed_samples_on_any_world_size() -> None:
    size, seed, epoch = 50, 7, 3
    full = ResumableSampler(size, world=1, rank=0, seed=seed, epoch=epoch).order()
    assert sorted(full) == list(range(size))
    # Two ranks consumed 20 samples, then the job resumes on three ranks: together they see the rest, in order.
    ranks = [list(ResumableSampler(size, world=3, rank=r, seed=seed, epoch=epoch, start=20)) for r in range(3)]
    assert len({len(r) for r in ranks}) == 1  # every rank runs the same number of steps
    interleaved = [ranks[r][i] for i in range(len(ranks[0])) for r in range(3)][: size - 20]
    assert interleaved == full[20:]
    assert ResumableSampler(size, 1, 0, seed, epoch + 1).order() != full  # each epoch its own order
