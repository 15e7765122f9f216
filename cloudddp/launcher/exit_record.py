"""Each node's exit code in a shared folder, so a batch script can tell a lost node from a failed one.

With `CLOUDDDP_EXIT_DIR` set (the Slurm provider sets it for elastic jobs), every launcher writes
its exit code to `<dir>/node-<rank>` as it ends, whatever ended it (a failed script, bad input, a
stop signal). A node whose launcher never wrote one was lost (killed, its machine gone): srun's own
exit code cannot say which, it is the highest of every task's.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path


def record_exit(environ: Mapping[str, str], node_rank: int | None, code: int) -> None:
    folder = environ.get("CLOUDDDP_EXIT_DIR")
    if not folder:
        return
    # Before planning (bad input) the rank is unknown: the file still says this node failed.
    name = f"node-{node_rank}" if node_rank is not None else f"unplanned-{socket.gethostname()}-{os.getpid()}"
    target = Path(folder) / name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{name}.{os.getpid()}")
        partial.write_text(f"{code}\n")
        partial.replace(target)  # whole or absent: the batch script may read it at any time
    except OSError as exc:
        print(f"cloudddp: could not record this node's exit code in {target}: {exc}", file=sys.stderr)
        with contextlib.suppress(OSError, UnboundLocalError):
            partial.unlink()
