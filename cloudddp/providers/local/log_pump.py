"""A node's output on its way into its log file: the job's secret values masked before anything is written.

The run folder is read later by `cloudddp logs` from any shell, which does not know the job's secrets: so the
log holds what `launch` prints (redact.redact_log_line with the job's own secret values), and nothing on disk
lets a value be recovered or checked (no digests). The runner gets the values through its stdin.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from cloudddp.redact import redact_log_line

LONGEST_LINE = 1 << 20  # bytes: a longer line (a progress bar without newlines) is masked and written in pieces
DRAIN_SECONDS = 5.0  # how long the runner waits for a pump once its node has ended (a child may hold the pipe)


def pump(output: IO[bytes], log: Path, secrets: Sequence[str]) -> None:
    with output, open(log, "ab") as written:
        for line in iter(lambda: output.readline(LONGEST_LINE), b""):
            written.write(redact_log_line(line.decode(errors="replace"), secrets).encode())
            written.flush()  # `logs --follow` and `launch` read the file as it grows


def start_log_pump(output: IO[bytes], log: Path, secrets: Sequence[str]) -> threading.Thread:
    thread = threading.Thread(target=pump, args=(output, log, list(secrets)), name=f"log {log.stem}", daemon=True)
    thread.start()
    return thread


def finish_log_pumps(pumps: Sequence[threading.Thread]) -> None:
    for thread in pumps:
        thread.join(DRAIN_SECONDS)
