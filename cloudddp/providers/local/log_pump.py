"""A node's output on its way into its log file: the job's secret values masked before anything is written.

The run folder is read later by `cloudddp logs` from any shell, which does not know the job's secrets: so the
log holds what `launch` prints (redact.redact_log_line with the job's own secret values), and nothing on disk
lets a value be recovered or checked (no digests). The runner gets the values through its stdin.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from cloudddp.launcher.failure_reason import exception_line, read_tail
from cloudddp.redact import redact_log_line

LONGEST_LINE = 1 << 20  # bytes: a longer line (a progress bar without newlines) is masked and written in pieces
DRAIN_SECONDS = 5.0  # how long the runner waits for a pump once its node has ended (a child may hold the pipe)


def pump(output: IO[bytes], log: Path, secrets: Sequence[str]) -> None:
    """Until the node's output ends. A log that can no longer be written (a full disk) is given up, but the output
    is still read: a node whose pipe nobody reads would block on its next print."""
    with output:
        try:
            written = open(log, "ab")  # noqa: SIM115 - closed below, or given up on a write error
        except OSError:
            written = None
        for line in iter(lambda: output.readline(LONGEST_LINE), b""):
            if written is None:
                continue
            try:
                written.write(redact_log_line(line.decode(errors="replace"), secrets).encode())
                written.flush()  # `logs --follow` and `launch` read the file as it grows
            except OSError:
                with contextlib.suppress(OSError):
                    written.close()
                written = None
        if written is not None:
            with contextlib.suppress(OSError):
                written.close()


def start_log_pump(output: IO[bytes], log: Path, secrets: Sequence[str]) -> threading.Thread:
    thread = threading.Thread(target=pump, args=(output, log, list(secrets)), name=f"log {log.stem}", daemon=True)
    thread.start()
    return thread


def finish_log_pumps(pumps: Sequence[threading.Thread]) -> None:
    for thread in pumps:
        thread.join(DRAIN_SECONDS)


TAIL_BYTES = 256 * 1024


def first_exception(log: Path) -> str | None:
    """The line naming the failing rank's exception near the end of a node's log, by the launcher's one rule
    (failure_reason.exception_line, which also sums up a RankError); None if none."""
    try:
        return exception_line(read_tail(log, TAIL_BYTES))
    except OSError:
        return None
