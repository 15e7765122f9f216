"""A real Slurm test cluster (slurmctld + N slurmd + munge on 127.0.0.1) for tests, shared by test modules.

API (small and stable; other test modules import it):

    from slurm_cluster import SlurmCluster, slurm_cluster, require_slurm

    @pytest.fixture(scope="module")
    def slurm(tmp_path_factory) -> Iterator[SlurmCluster]:
        with slurm_cluster(tmp_path_factory.mktemp("slurm"), nodes=4) as cluster:
            yield cluster

    subprocess.run(["sbatch", "--wait", ...], env=cluster.env)   # SLURM_CONF set, platform variables cleaned

The cluster is `infra/slurm/test-cluster.sh`; node names are n1..nN and do not resolve, so jobs pass
`--host-map n1=127.0.0.1` (or CLOUDDDP_HOST_MAP) to cloudddp-launch. Its ports are fixed, so only one
cluster may run on the host at a time: `slurm_cluster` holds an exclusive `flock` on LOCK_FILE for the
cluster's whole life, and a second pytest process waits for it (up to `lock_timeout` seconds). Do not
nest two `slurm_cluster` contexts in one process: the inner one would wait for the outer one.

Needs Debian's slurm-wlm and munge and root (`.ci/run` installs them): elsewhere the tests are
skipped, except in CI (`CI` set), where a missing Slurm fails the run.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import REPO, clean_env

CLUSTER_SCRIPT = REPO / "infra" / "slurm" / "test-cluster.sh"
LOCK_FILE = Path("/tmp/cloudddp-slurm-test-cluster.lock")


@dataclass(frozen=True)
class SlurmCluster:
    """A running test cluster: `env` is a clean environment with SLURM_CONF pointing at it."""

    state_dir: Path
    nodes: list[str]
    env: dict[str, str] = field(repr=False)

    @property
    def conf(self) -> Path:
        return self.state_dir / "slurm.conf"


def require_slurm() -> None:
    """Skip the calling test (fail it in CI) unless a real Slurm can be started here."""
    if shutil.which("slurmctld") and shutil.which("munged") and os.geteuid() == 0:
        return
    if os.environ.get("CI"):
        pytest.fail("CI must run the real-Slurm tests: slurm-wlm/munge missing or not root (see .ci/run)")
    pytest.skip("needs slurm-wlm, munge and root (apt-get install -y slurm-wlm munge)")


@contextmanager
def _exclusive_lock(lock_timeout: float) -> Iterator[None]:
    # flock, not a pid file: the kernel drops it when the holder dies, so a crashed run never blocks the next.
    with LOCK_FILE.open("a") as handle:
        deadline = time.monotonic() + lock_timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"another process held the Slurm test cluster lock {LOCK_FILE} for {lock_timeout:.0f} s"
                    )
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def slurm_cluster(state_dir: Path, nodes: int = 2, lock_timeout: float = 900) -> Iterator[SlurmCluster]:
    """Start a cluster of `nodes` node names (n1..nN) in `state_dir`, yield it, stop it (always)."""
    require_slurm()
    with _exclusive_lock(lock_timeout):
        # Output to a file, not a pipe: the daemons it starts could hold a pipe open past the script's exit.
        log = state_dir.parent / f"{state_dir.name}-cluster.log"
        try:
            with log.open("w") as out:
                started = subprocess.run(
                    ["bash", str(CLUSTER_SCRIPT), "start", str(state_dir), str(nodes)],
                    stdout=out, stderr=subprocess.STDOUT, timeout=120,
                )  # fmt: skip
            assert started.returncode == 0, log.read_text()
            env = clean_env({"SLURM_CONF": str(state_dir / "slurm.conf")})
            yield SlurmCluster(state_dir=state_dir, nodes=[f"n{i}" for i in range(1, nodes + 1)], env=env)
        finally:  # also after a failed or timed-out start: never leave daemons behind
            subprocess.run(
                ["bash", str(CLUSTER_SCRIPT), "stop", str(state_dir)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
            )  # fmt: skip


# infra/slurm/test-cluster.sh's partitions, both over every node; the first is the default.
PARTITIONS = ("debug", "second")


@contextmanager
def partition_down(cluster: SlurmCluster, partition: str) -> Iterator[None]:
    """`partition` DOWN inside (`scontrol update PartitionName=P State=DOWN`: jobs are still accepted and wait with
    reason PartitionDown), UP again after, always, so the next test of the module finds it as it was."""

    def set_state(state: str) -> None:
        subprocess.run(["scontrol", "update", f"PartitionName={partition}", f"State={state}"], env=cluster.env,
                       check=True, capture_output=True, timeout=30)  # fmt: skip

    set_state("DOWN")
    try:
        yield
    finally:
        set_state("UP")
