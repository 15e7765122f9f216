"""Test tiers: every collected test gets exactly one, assigned here at collection (docs/contributing.md).

- unit: in-process only. `guard_unit_test` fails a unit test that starts a process or binds a socket.
- component: one real local part (a service such as moto or SeaweedFS, or one child process of ours),
  named by a component marker (COMPONENTS), started once per session where the part allows it.
- smoke: the short, explicit SMOKE list of multi-process system tests.
- full: everything else that is marked `slow` (multi-process); only `make test-all` runs it.

`make test-fast` = unit; `make test` = unit + component + smoke; `make test-all` = every tier.
A test's tier follows from, in order: the SMOKE list, the `slow` marker, its component markers (given in
the test file, or implied by a fixture it uses: FIXTURE_COMPONENTS), and otherwise unit. The tier and
the components go into the junit report as properties, where `tests/tier_report.py` reads them.
"""

from __future__ import annotations

import _posixsubprocess
import functools
import os
import socket
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

TIERS = ("unit", "component", "smoke", "full")

# Each real part the tests run, by marker. `make test` and `make test-all` fail (tier_report.py) when one of
# these had no test executed: a skip does not count.
COMPONENTS = {
    "process": "a child process of ours: the cloudddp CLI, the job-side launcher or a training script",
    "torchrun": "real torchrun with gloo on 127.0.0.1 (a local multi-node run)",
    "training": "a training run checked for a correct model",
    "elastic": "an elastic (c10d or etcd rendezvous) run",
    "moto": "a moto server on 127.0.0.1 (SageMaker, S3, CloudWatch Logs, STS)",
    "seaweedfs": "SeaweedFS's S3 server on 127.0.0.1",
    "oci_service": "the OCI loopback service, called through the real oci SDK",
    "kube_api": "the Kubernetes API fake, called through the real kubernetes client",
    "etcd": "Debian's etcd (torchrun's etcd rendezvous)",
    "slurm": "a real Slurm cluster from Debian's packages (slurmctld, slurmd, munge)",
    "notebook": "a notebook executed by nbclient in a Jupyter kernel",
    "sagemaker_sdk": "the real SageMaker SDK (v2 in .venv-sdk2, v3 in .venv-sdk), built by make test-all",
    "network": "sockets on 127.0.0.1: the launcher's own listeners, or endpoints that refuse, hang up or never answer",
}

# A fixture that is one of the real parts implies its marker.
FIXTURE_COMPONENTS = {
    "moto_server": "moto",
    "seaweed": "seaweedfs",
    "oci_service": "oci_service",
    "kube_api": "kube_api",
    "etcd": "etcd",
    "slurm_cluster": "slurm",
}

# The smoke tier: multi-process system tests `make test` runs, chosen so every real part runs at least once
# (torchrun/gloo on each emulated platform, an elastic run, a training to a correct model). Node ids without
# parameters take every case of the test.
SMOKE: tuple[str, ...] = (
    # torchrun/gloo under each emulated platform's environment; SageMaker's in the training test below
    "tests/providers/local/test_local_provider.py::test_every_emulated_platform_runs_a_two_node_all_reduce",
    # a training to a correct model: two nodes learn the task and hold identical weights
    "tests/providers/local/test_local_provider.py::test_two_nodes_learn_and_hold_identical_weights",
    # an elastic run, on Debian's etcd
    "tests/faults/test_elastic_mode.py::test_a_local_elastic_job_runs_on_a_real_etcd_v2_rendezvous",
    # a real Slurm submit and cancel
    "tests/providers/slurm/test_slurm_provider_real.py::test_a_running_job_is_cancelled_and_gone",
)


def base_id(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def components_of(markers: Iterable[str], fixtures: Iterable[str]) -> set[str]:
    found = {name for name in markers if name in COMPONENTS}
    found |= {FIXTURE_COMPONENTS[name] for name in fixtures if name in FIXTURE_COMPONENTS}
    return found


def tier_of(nodeid: str, markers: Iterable[str], fixtures: Iterable[str], smoke: Iterable[str] = SMOKE) -> str:
    markers = set(markers)
    if nodeid in smoke or base_id(nodeid) in smoke:
        return "smoke"
    if "slow" in markers:
        return "full"
    if components_of(markers, fixtures):
        return "component"
    return "unit"


def pytest_configure(config: pytest.Config) -> None:
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: test tier (assigned by tests/tiers.py, never by hand)")
    for name, what in COMPONENTS.items():
        config.addinivalue_line("markers", f"{name}: uses {what}")


@pytest.hookimpl
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        markers = {mark.name for mark in item.iter_markers()}
        fixtures = getattr(item, "fixturenames", ())
        tier = tier_of(item.nodeid, markers, fixtures)
        components = components_of(markers, fixtures)
        item.add_marker(tier)
        for name in components - markers:
            item.add_marker(name)
        item.user_properties.append(("tier", tier))
        item.user_properties.append(("components", ",".join(sorted(components))))


# One Slurm test cluster at a time on this host (fixed ports; helpers/slurm_cluster.py holds a lock for its life),
# so the test files that start one run on one xdist worker: otherwise a second worker waits on the lock for as long
# as the first keeps its cluster (160 s in one fresh-clone full tier). xdist's own grouping (--dist loadgroup and
# xdist_group marks) does nothing under pytest 9.2: xdist renames item._nodeid, which pytest's nodeid no longer
# reads. The controller never collects, so the group is told from the file itself.
SLURM_CLUSTER_CALL = "slurm_cluster("


@functools.cache
def starts_slurm_cluster(file: Path) -> bool:
    try:
        return SLURM_CLUSTER_CALL in file.read_text()
    except OSError:
        return False


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` with the test files that start the Slurm cluster as one group; every other test its own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class SlurmGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = config.rootpath / nodeid.split("::", 1)[0]
            return "slurm-cluster" if starts_slurm_cluster(file) else super()._split_scope(nodeid)

    return SlurmGroupScheduling(config, log)


# Libraries ask the machine about itself through these, once per process (the oci SDK's user agent runs
# `uname -p` through platform.processor(); torch's ctypes look-ups run `ldconfig -p`): not the test's doing,
# and which test comes first would otherwise decide which one fails.
MACHINE_PROBES = ("uname", "ldconfig")


class InProcessOnly(AssertionError):
    """A unit test started a process or bound a socket."""


@contextmanager
def in_process_only(what: str) -> Iterator[list[str]]:
    """While inside, starting a process or binding a socket raises InProcessOnly; yields what was tried.

    The list is kept as well as the exception raised, since the code under test may catch the exception
    (an `except Exception` that prints one paragraph) and the test must fail all the same."""
    tried: list[str] = []

    def refuse(kind: str, detail: object) -> None:
        tried.append(f"{kind} {detail}"[:200])
        raise InProcessOnly(
            f"{what} is a unit test and {kind} ({detail}). Unit tests run in process: call the code, or "
            f"mark the test with the component it needs (tests/tiers.py COMPONENTS)."
        )

    def execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any) -> Any:
        argv = [args] if isinstance(args, str) else list(args)
        if Path(str(argv[0])).name in MACHINE_PROBES:
            return original_execute_child(self, args, *rest)
        refuse("started a process", argv[:4])

    def fork_exec(args: Any, executables: Any, *rest: Any) -> Any:
        refuse("started a process", list(args or executables or [])[:4])

    def no_fork(*args: Any, **kwargs: Any) -> Any:
        refuse("forked", "os.fork")

    def no_spawn(path: Any, *args: Any, **kwargs: Any) -> Any:
        refuse("started a process", path)

    def no_bind(self: socket.socket, address: Any) -> None:
        refuse("bound a socket", address)

    original_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    patches = [
        (subprocess.Popen, "_execute_child", execute_child),  # fork_exec or posix_spawn, bound at import
        (_posixsubprocess, "fork_exec", fork_exec),  # multiprocessing's spawn and forkserver
        (os, "fork", no_fork),
        (os, "posix_spawn", no_spawn),
        (os, "posix_spawnp", no_spawn),
        (os, "system", no_spawn),
        (socket.socket, "bind", no_bind),
    ]
    with pytest.MonkeyPatch.context() as patch:
        for owner, name, replacement in patches:
            patch.setattr(owner, name, replacement)
        yield tried


CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.when == "call":  # type: ignore[attr-defined]
        item.stash[CALL_FAILED] = report.failed  # type: ignore[attr-defined]
    return report


@pytest.fixture(autouse=True)
def guard_unit_test(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    with in_process_only(request.node.nodeid) as tried:
        yield
    if tried and not request.node.stash.get(CALL_FAILED, False):  # swallowed by the code under test: fail it here
        pytest.fail(f"unit test {request.node.nodeid} left the process: {'; '.join(tried)}", pytrace=False)
