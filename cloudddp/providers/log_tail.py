"""Following a node's log file as it grows, in bounded memory: one reader for every provider that reads
log files (local, Slurm, PBS).

Each poll read every unread byte at once, so a node that printed 300 MB between two polls made `launch`
hold it all (953 MB resident against 41 MB for a quiet job). Here a poll reads at most `CHUNK` bytes at a
time and yields the lines in it before reading more, a line longer than `LONGEST_LINE` comes out in pieces,
and UTF-8 characters split across two reads are decoded whole.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Iterator
from pathlib import Path

CHUNK = 1 << 20  # bytes read at a time
LONGEST_LINE = 1 << 20  # characters held while waiting for a newline


class LogTail:
    """The lines of one growing log file, each yielded once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.position = 0
        self.partial = ""  # the last line read, not ended by a newline yet
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def new_lines(self) -> Iterator[str]:
        """The complete lines written since the last call (none while the file does not exist)."""
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below, after the last chunk
        except FileNotFoundError:
            return
        with handle:
            handle.seek(self.position)
            while chunk := handle.read(CHUNK):
                self.position += len(chunk)
                *lines, self.partial = (self.partial + self.decoder.decode(chunk)).split("\n")
                yield from lines
                while len(self.partial) > LONGEST_LINE:
                    yield self.partial[:LONGEST_LINE]
                    self.partial = self.partial[LONGEST_LINE:]

    def rest(self) -> Iterator[str]:
        """The last line when the file does not end with a newline: for when the writer has finished."""
        rest, self.partial = self.partial + self.decoder.decode(b"", final=True), ""
        if rest:
            yield rest


def folder_lines(folder: Path, done: Callable[[], bool], period: float) -> Iterator[tuple[str, str]]:
    """(node, line) for each line of the `*.log` files in `folder`, the node being the file's stem: a round every
    `period` seconds until `done()`, asked before each round, says the job has ended; then the last lines."""
    tails: dict[Path, LogTail] = {}
    while True:
        finished = done()
        for log in sorted(folder.glob("*.log")):
            tail = tails.setdefault(log, LogTail(log))
            yield from ((log.stem, line) for line in tail.new_lines())
        if finished:
            for log, tail in tails.items():
                yield from ((log.stem, line) for line in tail.rest())
            return
        time.sleep(period)
