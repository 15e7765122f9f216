"""Running a scheduler's command-line tools (sbatch, scontrol, qsub, qstat...) with errors for people.

Used by the Slurm and PBS providers: a missing tool or a refusal becomes a `CloudDDPError`
that shows the command and the tool's own stderr (the scheduler knows best what is wrong).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping

from cloudddp.errors import CloudDDPError

TIMEOUT = 60.0


def run_tool(
    argv: list[str],
    *,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    what: str = "",
    cwd: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `argv`; with `check`, a non-zero exit raises an error naming the command and its stderr."""
    if shutil.which(argv[0], path=(env or {}).get("PATH")) is None:
        raise CloudDDPError(
            f"{argv[0]!r} was not found on PATH: run cloudddp on a login node of the cluster "
            f"(where {argv[0]} works), or load the scheduler's module first."
        )
    try:
        result = subprocess.run(
            argv, input=stdin, env=dict(env) if env is not None else None, capture_output=True, text=True,
            timeout=TIMEOUT, cwd=cwd,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise CloudDDPError(f"`{' '.join(argv)}` did not answer within {TIMEOUT:.0f} s; is the scheduler up?") from None
    if check and result.returncode != 0:
        raise tool_failure(argv, result, what)
    return result


def tool_failure(argv: list[str], result: subprocess.CompletedProcess[str], what: str = "") -> CloudDDPError:
    """The error for a tool's non-zero exit: the command and what it said."""
    detail = (result.stderr or result.stdout).strip() or f"exit code {result.returncode}"
    return CloudDDPError(f"{what or argv[0]} failed: `{' '.join(argv)}` said: {detail}")
