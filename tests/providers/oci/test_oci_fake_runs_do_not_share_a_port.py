"""Two runs on the OCI loopback service never share a rendezvous port (the fake's per-run MASTER_PORT).

On OCI every node is a host of its own and all rendezvous on port 29400. The fake puts every node of every run on
127.0.0.1, so with that one port two runs side by side (the full tier on 2 workers) joined each other's rendezvous:
test_oci_notebook hung 600 s under `-n 3`. The fake now gives each run a port of its own, free with its
neighbour (the launcher's fail-fast channel binds port + 1: providers/local free_port, whose own tests check
that). Here free_port hands out known ports, so the check is exact; run with a fixed port in its place, this test
fails."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from helpers import clean_env, oci_loopback_server
from helpers.oci_loopback_server import IMAGE_ENV, FakeOCI, ThrowawayKey

# A node that says which port its job rendezvous on.
NODE = """\
import os, pathlib, sys
pathlib.Path(sys.argv[1], f"port-{os.environ['NODE_RANK']}").write_text(os.environ["MASTER_PORT"])
"""


@pytest.mark.process
def test_two_runs_side_by_side_rendezvous_on_ports_of_their_own(
    key: ThrowawayKey, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed_out = iter([41000, 42000])
    monkeypatch.setattr(oci_loopback_server, "free_port", lambda: next(handed_out))
    runs = {f"ocid1.datasciencejobrun.oc1..port{n}": tmp_path / f"out-{n}" for n in range(2)}
    with FakeOCI(key, run_root=tmp_path / "service", node_env=clean_env(IMAGE_ENV)) as server:
        threads = []
        for run_id, out in runs.items():
            out.mkdir()
            (tmp_path / "service" / run_id).mkdir(parents=True)  # as the fake's CreateJobRun makes it
            server.runs[run_id] = {"lifecycleState": "IN_PROGRESS"}
            group = {
                "name": "group-0",
                "jobConfigurationDetails": {"environmentVariables": {}},
                "jobEnvironmentConfigurationDetails": {"entrypoint": ["python", "-c", NODE], "cmd": [str(out)]},
            }
            job = {"id": run_id.replace("jobrun", "job")}
            threads.append(threading.Thread(target=server.execute, args=(run_id, job, group, 2)))
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while sum(len(list(out.glob("port-*"))) for out in runs.values()) < 4:
            assert time.monotonic() < deadline, "the fake nodes did not start"
            time.sleep(0.05)
        for thread in threads:
            thread.join(timeout=30)
    ports = sorted(({int(p.read_text()) for p in out.glob("port-*")} for out in runs.values()), key=min)
    assert ports == [{41000}, {42000}], f"each run's nodes share one port, the runs two: {ports}"
