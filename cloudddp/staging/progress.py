"""The progress display of `cloudddp stage`: a bar on a terminal, nothing in logs and CI."""

from __future__ import annotations

import sys
from typing import Any

from cloudddp.staging.engine import Progress


class RichProgress(Progress):
    """Objects, bytes, rate and time left, on stderr (stdout stays clean for the published URI)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as Bar

        self.console = Console(stderr=True)
        self.bar = Bar(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[files]}"), DownloadColumn(),
            TransferSpeedColumn(), TimeRemainingColumn(), console=self.console, transient=False,
        )  # fmt: skip
        self.task: Any = None
        self.done_files = self.total_files = self.done_bytes = self.total_bytes = 0

    def phase(self, text: str) -> None:
        self.console.print(f"cloudddp: {text}", highlight=False)

    def start(self, files: int, total_bytes: int) -> None:
        # "objects": with --shards the objects sent are shards (and their index), not the files staged
        self.total_files, self.total_bytes, self.done_bytes = files, total_bytes, 0
        self.bar.start()
        self.task = self.bar.add_task("upload", total=total_bytes, files=f"0/{files} objects")

    def advance(self, size: int) -> None:
        self.done_files += 1
        self.done_bytes += size
        # An object the total left out (the --shards index: its size is known only once the last shard is
        # built) grows the total, so the bar never ends above 100% (32.5/32.3 MB).
        self.total_bytes = max(self.total_bytes, self.done_bytes)
        self.total_files = max(self.total_files, self.done_files)
        self.bar.update(self.task, advance=size, total=self.total_bytes,
                        files=f"{self.done_files}/{self.total_files} objects")  # fmt: skip

    def finish(self) -> None:
        self.bar.stop()


def for_stream(enabled: bool | None = None) -> Progress:
    """A bar when stderr is a terminal (or `enabled`), else the silent default."""
    show = sys.stderr.isatty() if enabled is None else enabled
    return RichProgress() if show else Progress()
