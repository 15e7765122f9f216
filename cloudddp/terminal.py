"""What reaches the user's terminal, and how a command that is done leaves it.

The lowest layer: providers, the session and the CLI all print through `emit`, and `exit_now` ends a finished
command without tearing the interpreter down.
"""

from __future__ import annotations

import os
import sys
from typing import Any

CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"]}  # -h at every level: subcommands inherit it
# The typer app's settings, shared by cli.py's app and `cloudddp stage`'s own (stage_cli.py): one help style.
APP_SETTINGS: dict[str, Any] = {
    "name": "cloudddp",
    "no_args_is_help": True,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": "rich",
    "context_settings": CONTEXT,
}


def emit(line: str) -> None:
    # print(), not logging: shows up in a notebook with no logging configured.
    print(line, flush=True)


def exit_now() -> None:
    """End a finished command without tearing the interpreter down, as mypy does (mypy/util.py, hard_exit).

    Tearing down the modules of a stage costs ~25 ms here (medians of 25: 119 -> 90 ms for a process that
    imports what a stage does and exits), a twentieth of a one-shard stage; `list` may leave threads waiting on a
    provider that never answered, and tearing down around them took ~0.9 s (benchmarks/list_jobs.py). Nothing is
    left to finalize. A flush that fails raises, and the interpreter reports it as any error."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
