"""Each node's exit code in a shared folder, so a batch script can tell a lost node from a failed one.

With `CLOUDDDP_EXIT_DIR` set (the Slurm provider sets it for elastic jobs), every launcher writes
its exit code to `<dir>/node-<rank>` as it ends, whatever ended it (a failed script, bad input, a
stop signal). A node whose launcher never wrote one was lost (killed, its machine gone): srun's own
exit code cannot say which, it is the highest of every task's.

A node that the fail-fast channel stopped because another node failed (or went away) says so on a second
line, `stopped-by <rank>`: it exits with that node's code, so the code alone cannot tell the node that
failed from the nodes stopped because of it (the local runner names the first failing node from this).
The first line is the exit code alone, as the Slurm batch script reads it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

STOPPED_BY = "stopped-by"


def record_exit(environ: Mapping[str, str], node_rank: int | None, code: int, stopped_by: int | None = None) -> None:
    folder = environ.get("CLOUDDDP_EXIT_DIR")
    if not folder:
        return
    # Before planning (bad input) the rank is unknown: the file still says this node failed.
    name = f"node-{node_rank}" if node_rank is not None else f"unplanned-{socket.gethostname()}-{os.getpid()}"
    target = Path(folder) / name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{name}.{os.getpid()}")
        partial.write_text(f"{code}\n" + (f"{STOPPED_BY} {stopped_by}\n" if stopped_by is not None else ""))
        partial.replace(target)  # whole or absent: the batch script may read it at any time
    except OSError as exc:
        print(f"cloudddp: could not record this node's exit code in {target}: {exc}", file=sys.stderr)
        with contextlib.suppress(OSError, UnboundLocalError):
            partial.unlink()


def read_exit(path: Path) -> tuple[int | None, int | None]:
    """A record's (exit code, rank that stopped this node); (None, None) where there is none or it is unreadable."""
    try:
        lines = path.read_text().split("\n")
    except OSError:
        return None, None
    code = int(lines[0]) if lines[0].lstrip("-").isdigit() else None
    words = lines[1].split() if len(lines) > 1 else []
    cause = int(words[1]) if len(words) == 2 and words[0] == STOPPED_BY and words[1].isdigit() else None
    return code, cause
