"""The one exception type cloudddp raises for problems a person must fix.

The CLIs turn it into a one-paragraph message and exit code 2 in exactly one place
(`cloudddp.cli` and `cloudddp.launcher.cli`); Python callers catch it like any other.
"""

from __future__ import annotations

from cloudddp.redact import redact_text

USAGE_EXIT_CODE = 2


class CloudDDPError(Exception):
    """A problem with the user's input or environment, explained for people."""

    exit_code: int = USAGE_EXIT_CODE

    def __init__(self, message: str, *, exit_code: int = USAGE_EXIT_CODE) -> None:
        message = redact_text(message)  # messages quote the user's values, and a URL may hold a password
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


def print_error(exc: CloudDDPError) -> None:
    """The CLIs' one-paragraph report on stderr (rich imported here: the job side never calls this)."""
    from rich.console import Console
    from rich.text import Text

    # The message may hold brackets (JSON, hostlists): print it as plain text, not markup.
    Console(stderr=True, highlight=False, soft_wrap=True).print(Text.assemble(("error: ", "bold red"), str(exc)))
