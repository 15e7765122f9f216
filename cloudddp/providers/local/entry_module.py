"""`-m MODULE` is looked for before any node starts: the nodes are this machine's processes, so the question
"would `python -m MODULE` find it there?" can be asked exactly, and a typo ends in one line instead of every
node's torchrun failure report.

Asked of the nodes' own interpreter in their own folder and environment (a subprocess: `python -m` puts the
working folder first on sys.path, PYTHONPATH follows, then site-packages and any editable installs' finders).
Only the top-level package is looked for: finding `pkg.train` would import `pkg`, running the user's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cloudddp.errors import CloudDDPError

FIND = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)"
NOT_FOUND = 3


def require_module(module: str, cwd: Path, environment: dict[str, str]) -> None:
    """Refuse `module` if the nodes' `python -m` would not find its top-level package (exit code 2's error)."""
    top = module.split(".")[0]
    if not top:  # `python -m` takes any file name (`-m my-train` runs my-train.py), but no relative name
        raise CloudDDPError(f"entry_point {module!r}: with -m it names a module, and a relative name names none.")
    try:
        found = subprocess.run(
            [sys.executable, "-c", FIND, top], cwd=cwd, env={**os.environ, **environment},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return  # could not ask: the nodes will say
    if found.returncode == NOT_FOUND:
        path = environment.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        raise CloudDDPError(
            f"entry_point {module!r} (-m): no module {top!r} is found by {sys.executable} from source_dir "
            f"{str(cwd)!r} (PYTHONPATH={path!r}), so no node could start it. Check the name, run from the folder "
            f"holding it (or pass --source-dir), or install it in this environment."
        )
