"""The OCI loopback service's fake nodes keep their temp files in the test's own folder (issue 34).

The nodes ran with the session's TMPDIR (`node_env=clean_env(IMAGE_ENV)`), so a node's launcher killed by the
fake's `__exit__` (SIGKILL, no cleanup) left its `cloudddp-launch-*` scratch folder outside the test's folder, in
the session's temp folder shared by every test; and where that folder is gone (tempfile falls back to /tmp when
TMPDIR does not exist), in the system temp folder the session guard (tests/_guards.py) watches: the issue saw the
OCI log-following tests' teardown error in ~3 of 8 runs. That fallback was not reproduced here; this test pins
what the fix guarantees: each node has a TMPDIR of its own, made before the node starts under the run's folder
(under the test's), and removed once the node has ended or been killed."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import pytest
from _guards import SCRATCH_NAMES, SYSTEM_TEMP
from helpers import clean_env
from helpers.oci_loopback_server import IMAGE_ENV, FakeOCI, ThrowawayKey

# A node whose launcher made its scratch folder and is killed before it can remove it.
NODE = """\
import os, pathlib, sys, tempfile, time
scratch = tempfile.mkdtemp(prefix="cloudddp-launch-")
pathlib.Path(sys.argv[1], f"scratch-{os.environ['NODE_RANK']}").write_text(scratch)
time.sleep(300)
"""


def scratch_folders(*folders: Path) -> set[Path]:
    return {entry for folder in folders if folder.is_dir() for entry in folder.iterdir()
            if entry.name.startswith(SCRATCH_NAMES)}  # fmt: skip


@pytest.mark.process
def test_a_killed_fake_nodes_scratch_folder_stays_in_the_tests_folder(key: ThrowawayKey, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    outside = (Path(tempfile.gettempdir()), SYSTEM_TEMP, Path("/tmp"))  # the session's temp folder and the system's
    before = scratch_folders(*outside)
    run_id, job = "ocid1.datasciencejobrun.oc1..scratch", {"id": "ocid1.datasciencejob.oc1..scratch"}
    (tmp_path / "service" / run_id).mkdir(parents=True)  # as the fake's CreateJobRun makes it
    group = {
        "name": "group-0",
        "jobConfigurationDetails": {"environmentVariables": {}},
        "jobEnvironmentConfigurationDetails": {"entrypoint": ["python", "-c", NODE], "cmd": [str(out)]},
    }
    with FakeOCI(key, run_root=tmp_path / "service", node_env=clean_env(IMAGE_ENV)) as server:
        server.runs[run_id] = {"lifecycleState": "IN_PROGRESS"}
        run = threading.Thread(target=server.execute, args=(run_id, job, group, 2))
        run.start()
        deadline = time.monotonic() + 60
        while len(list(out.glob("scratch-*"))) < 2:
            assert time.monotonic() < deadline, "the fake nodes did not start"
            time.sleep(0.05)
        scratch = [Path(p.read_text()) for p in sorted(out.glob("scratch-*"))]
    run.join(timeout=30)
    assert not run.is_alive()
    for folder in scratch:
        assert folder.is_relative_to(tmp_path), f"a fake node made its scratch folder {folder} outside {tmp_path}"
        assert not folder.exists(), f"{folder} was left after the node was killed"
    assert scratch_folders(*outside) - before == set()
