"""The `cloudddp` console script.

`cloudddp stage` imports only the staging package (~0.2 s less start-up than the whole CLI,
which reads every provider's options): a no-op re-stage or a small dataset is over in about
a second, so start-up is a large part of it (benchmarks/RESULTS-staging.md, run 6).
Everything else is `cloudddp.cli`.
"""

from __future__ import annotations

import sys

from cloudddp import terminal


def main() -> None:
    if sys.argv[1:2] == ["stage"]:
        from cloudddp.stage_cli import main as stage_main

        stage_main(sys.argv[2:])
        terminal.exit_now()
    else:
        from cloudddp.cli import main as cli_main

        cli_main()
