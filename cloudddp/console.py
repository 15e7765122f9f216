"""The `cloudddp` console script.

`cloudddp stage` imports only the staging package (~0.2 s less start-up than the whole CLI,
which reads every provider's options): a no-op re-stage or a small dataset is over in about
a second, so start-up is a large part of it (benchmarks/RESULTS-staging.md, run 6).
Everything else is `cloudddp.cli`.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["stage"]:
        from cloudddp.staging.cli import main as stage_main

        stage_main(sys.argv[2:])
        exit_now()
    else:
        from cloudddp.cli import main as cli_main

        cli_main()


def exit_now() -> None:
    """End a finished stage without tearing the interpreter down, as mypy does (mypy/util.py, hard_exit).

    Tearing down the modules of a stage costs ~25 ms here (medians of 25: 119 -> 90 ms for a process that
    imports what a stage does and exits), a twentieth of a one-shard stage, and nothing is left to
    finalize: the uploads are done, the shard folder removed, the hash cache written and closed, no
    thread still runs. A flush that fails raises, and the interpreter reports it as any error."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
