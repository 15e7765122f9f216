"""A node's output on its way into its log file: the job's secret values masked before anything is written.

The run folder is read later by `cloudddp logs` from any shell, which does not know the job's secrets: so the
log holds what `launch` prints (redact.redact_log_line with the job's own secret values), and nothing on disk
lets a value be recovered or checked (no digests). The runner gets the values through its stdin.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

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


# A Python exception's last line, as a worker prints it (torch prefixes an uncaught one's lines with `[rank<N>]:`,
# torchrun's --tee with `[default<N>]:`, both where both apply); torchrun's exceptions about it are not the cause.
EXCEPTION_LINE = re.compile(
    r"^(?:\[(?:rank|default)\d+\]:\s*)*(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): "
)
NOT_THE_CAUSE = ("ChildFailedError", "SignalException")
TEE_PREFIX = re.compile(r"^\[default\d+\]:")
TAIL_BYTES = 256 * 1024
LONGEST_SHOWN = 300


def first_exception(log: Path) -> str | None:
    """The first exception line in the end of a node's log (the failing rank's error), shortened; None if none."""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - TAIL_BYTES))
            lines = handle.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        match = EXCEPTION_LINE.match(line)
        if match and not match["name"].endswith(NOT_THE_CAUSE):
            return TEE_PREFIX.sub("", line).strip()[:LONGEST_SHOWN]  # `[rank1]: ValueError: ...` says which rank
    return None
