"""A session-wide check that no test wrote to /opt/ml, the user's home folder or the system temp folder.

Tests must write only under their tmp folders; SageMaker's /opt/ml and $HOME belong to the
machine. The check snapshots both before the session and compares after it; any difference
fails the run, naming the paths. In the system temp folder (taken before conftest points TMPDIR
at the session's own) it watches the folders named as cloudddp, torchrun and multiprocessing name their
scratch folders, and in /tmp the unix sockets SeaweedFS makes there whatever TMPDIR says. What is watched
in $HOME: its top-level entries (added or removed) and, recursively, the folders cloud SDKs, notebooks and
caches write to (WATCHED_IN_HOME).
Registered by tests/conftest.py. HOME is taken when this module is imported, before any test
can redirect it.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

OPT_ML = Path("/opt/ml")
HOME = Path(os.environ.get("HOME") or Path.home())
WATCHED_IN_HOME = (".oci", ".aws", ".sagemaker", ".kube", ".cache", ".config", ".local", ".jupyter",
                   ".ipython", ".torch", ".netrc", "cloudddp-runs")  # fmt: skip
SYSTEM_TEMP = Path(tempfile.gettempdir())
SCRATCH_NAMES = ("cloudddp-", "torchelastic_", "pymp-")  # mkdtemp prefixes of cloudddp, torchrun, multiprocessing
SOCKET_FOLDER = Path("/tmp")  # SeaweedFS's sockets, whatever TMPDIR says (tests/helpers/seaweedfs.py)
MAX_ENTRIES = 20000  # a guard, not an indexer: stop walking huge caches


def tree(root: Path, max_depth: int = 6) -> dict[str, int]:
    """Path -> mtime (ns) for `root` and everything below it (a missing root is empty)."""
    found: dict[str, int] = {}
    if not root.exists() and not root.is_symlink():
        return found
    found[str(root)] = root.lstat().st_mtime_ns
    base_depth = len(root.parts)
    for folder, dirs, files in os.walk(root):
        depth = len(Path(folder).parts) - base_depth
        if depth >= max_depth:
            dirs[:] = []
        for name in dirs + files:
            path = Path(folder) / name
            try:
                found[str(path)] = path.lstat().st_mtime_ns
            except OSError:
                continue
        if len(found) > MAX_ENTRIES:
            break
    return found


def snapshot(
    opt_ml: Path = OPT_ML, home: Path = HOME, temp: Path = SYSTEM_TEMP, sockets: Path = SOCKET_FOLDER
) -> dict[str, int]:
    state = tree(opt_ml)
    # Folders only: the Slurm test cluster's lock file (helpers/slurm_cluster.py) is machine-wide on purpose.
    scratch = [e.name for e in os.scandir(temp) if e.name.startswith(SCRATCH_NAMES) and e.is_dir(follow_symlinks=False)]
    state.update({f"{temp}/{name} (entry)": 0 for name in scratch})
    state.update({f"{sockets}/{name} (entry)": 0 for name in seaweed_sockets(sockets)})
    if home.is_dir():
        state.update({f"{home}/{entry.name} (entry)": 0 for entry in home.iterdir()})
        for name in WATCHED_IN_HOME:
            state.update(tree(home / name, max_depth=3))
    return state


def seaweed_sockets(folder: Path) -> list[str]:
    """SeaweedFS's sockets that no server listens on: left behind. A live one belongs to a server another xdist
    worker is running now (its fixture removes them when it stops), which this worker's session may outlast."""
    named = [e.name for e in os.scandir(folder) if e.name.startswith("seaweedfs-") and e.name.endswith(".sock")]
    return [name for name in named if not listening(folder / name)]


def listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


def differences(before: dict[str, int], after: dict[str, int]) -> list[str]:
    changes = [f"created {p}" for p in sorted(after.keys() - before.keys())]
    changes += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    changes += [f"modified {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return changes


@pytest.fixture(scope="session", autouse=True)
def nothing_written_to_opt_ml_or_home() -> Iterator[None]:
    before = snapshot()
    yield
    changes = differences(before, snapshot())
    if changes:
        shown = "\n  ".join(changes[:20])
        pytest.fail(
            f"tests wrote outside their tmp folders (/opt/ml, {HOME} or {SYSTEM_TEMP}):\n  {shown}", pytrace=False
        )
