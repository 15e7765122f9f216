"""Checkpoints that survive what clusters and clouds do to a job (used by train_ddp.py).

- **Atomic**: a checkpoint is written under a temporary name in the same folder, flushed to disk,
  then renamed; a process killed while writing leaves only a temporary file, never a checkpoint
  that fails to load. `checkpoint.pt` is then pointed at the newest one the same way.
- **Newest complete wins**: `load_latest` tries `checkpoint-step<N>.pt` from the highest step down
  and skips (with a warning) any file that does not load, e.g. one a sync tool copied half-way.
- **Resume at the same step**: a checkpoint records the position in the data (epoch, samples of
  that epoch already consumed, global step). `ResumableSampler` gives every epoch one seeded
  permutation of the whole data set and continues it after the consumed samples, split over the
  current world size, so the data order continues (even when an elastic job resumes on fewer nodes).
- **Stop signals**: SIGTERM (SageMaker stop and spot reclaim, Kubernetes pod deletion) and SIGUSR1
  (Slurm's `--signal` before the time limit) only set a flag; the training loop checks it at the
  next step, every rank agrees through one all-reduce, rank 0 writes a checkpoint and all exit.
"""

from __future__ import annotations

import math
import os
import re
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Sampler

NEWEST = "checkpoint.pt"
NUMBERED = re.compile(r"checkpoint-step(\d+)\.pt")
TEMPORARY_PREFIX = ".tmp-"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


@dataclass
class Position:
    """Where training stands: `epoch` being trained, `consumed` samples of it done, `step` so far."""

    epoch: int = 1
    consumed: int = 0
    step: int = 0


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_atomically(folder: Path, name: str, write: Any) -> Path:
    """Write through `write(path)` to a temporary name in `folder`, flush, then rename it to `name`."""
    tmp = folder / f"{TEMPORARY_PREFIX}{os.getpid()}-{name}"
    write(tmp)
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    final = folder / name
    os.replace(tmp, final)  # atomic within one file system: readers see the old file or the new one
    _fsync_folder(folder)
    return final


def save_checkpoint(folder: Path, state: dict[str, Any], step: int, keep: int = 2) -> Path:
    """Write `checkpoint-step<step>.pt` atomically, point `checkpoint.pt` at it, keep the newest `keep`."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(f"{TEMPORARY_PREFIX}*"):  # left by a writer that was killed (one writer: rank 0)
        stale.unlink(missing_ok=True)
    name = f"checkpoint-step{step:09d}.pt"
    saved = _replace_atomically(folder, name, lambda tmp: torch.save(state, tmp))

    def link_newest(tmp: Path) -> None:
        try:
            os.link(saved, tmp)  # no second copy on disk
        except OSError:  # file systems without hard links (some FUSE mounts)
            torch.save(state, tmp)

    _replace_atomically(folder, NEWEST, link_newest)
    for old in sorted(numbered_checkpoints(folder), reverse=True)[keep:]:
        old[1].unlink(missing_ok=True)
    return saved


def numbered_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    found = []
    for path in folder.glob("checkpoint-step*.pt"):
        match = NUMBERED.fullmatch(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def load_latest(folder: Path, map_location: Any = "cpu") -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint in `folder` that loads, with its path; None when there is none.

    Numbered checkpoints from the highest step down; `checkpoint.pt` alone (written by older
    versions of the script) when there is no numbered one.
    """
    if not folder.is_dir():
        return None
    candidates = [path for _, path in reversed(numbered_checkpoints(folder))]
    if not candidates and (folder / NEWEST).is_file():
        candidates = [folder / NEWEST]
    for path in candidates:
        try:
            return path, torch.load(path, map_location=map_location, weights_only=False)
        except Exception as exc:  # a truncated or foreign file: say so and take the next one
            print(f"checkpointing: skipping {path}: it does not load ({type(exc).__name__}: {exc})", file=sys.stderr)
    return None


def position_of(state: dict[str, Any]) -> Position:
    """The position a checkpoint records; epoch-only checkpoints resume at the next epoch's start."""
    if "position" in state:
        return Position(**state["position"])
    return Position(epoch=int(state["epoch"]) + 1)


class ResumableSampler(Sampler[int]):
    """One seeded permutation of the data per epoch, continued after `start` samples, split over ranks.

    Like `DistributedSampler(shuffle=True, drop_last=False)`: each rank gets every `world`-th index of
    the (padded) remainder, so all ranks run the same number of steps.
    """

    def __init__(self, size: int, world: int, rank: int, seed: int, epoch: int, start: int = 0) -> None:
        self.size, self.world, self.rank, self.seed, self.epoch = size, world, rank, seed, epoch
        self.start = min(start, size)

    def order(self) -> list[int]:
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.size, generator=generator).tolist()[self.start :]

    def __iter__(self) -> Iterator[int]:
        rest = self.order()
        if not rest:
            return iter([])
        total = math.ceil(len(rest) / self.world) * self.world
        padded = (rest * math.ceil(total / len(rest)))[:total]
        return iter(padded[self.rank :: self.world])

    def __len__(self) -> int:
        rest = self.size - self.start
        return math.ceil(rest / self.world) if rest else 0


class StopRequest:
    """SIGTERM/SIGUSR1 set a flag the training loop reads between steps (a handler must not checkpoint)."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def install(self) -> StopRequest:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signal = signum

    @property
    def requested(self) -> bool:
        return self.signal is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signal).name if self.signal else ""
