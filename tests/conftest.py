"""Shared fixtures: the demo dataset. Helpers live in the `helpers` package (`from helpers import run_cli`):
never import from `conftest`, since a folder's own conftest.py would shadow this one."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3  # noqa: F401  (it binds a socket once, at import, to probe IPv6: here, before any unit test)
from _guards import nothing_written_to_opt_ml_or_home  # noqa: F401  (session guard: no test writes /opt/ml or $HOME)
from helpers.services import kube_api, moto_server, moto_service, oci_service  # noqa: F401  (shared services)
from tiers import (  # noqa: F401  (test tiers)
    guard_unit_test,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_makereport,
    pytest_xdist_make_scheduler,
)

pytest_plugins = ("pytester",)  # tests/test_test_tiers.py runs the guard in a session of its own

# Every server the tests talk to is on 127.0.0.1: a proxy configured for this machine must not carry
# those requests (botocore and cloudddp's staging both honour NO_PROXY), nor subprocesses' (inherited).
for _name in ("NO_PROXY", "no_proxy"):
    os.environ[_name] = ",".join(filter(None, ["127.0.0.1,localhost", os.environ.get(_name)]))


@pytest.fixture(scope="session", autouse=True)
def session_temp_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Temp files of the tests and of every process they start (tempfile honours TMPDIR) go under pytest's own
    temp folder, which pytest prunes: the scratch folder of a launcher or stage a test kills with SIGKILL, or
    torchrun's, stays there, not in /tmp (tests/_guards.py fails the session on a new one in /tmp)."""
    folder = tmp_path_factory.mktemp("tmp")
    with pytest.MonkeyPatch.context() as patch:  # restores both at the end of the session
        patch.setenv("TMPDIR", str(folder))
        patch.setattr(tempfile, "tempdir", str(folder))
        # cloudddp's job index (job_index.py) too; each test gets one of its own below.
        patch.setenv("XDG_STATE_HOME", str(folder / "state"))
        yield folder


@pytest.fixture(autouse=True)
def own_job_index(session_temp_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test its own job index (`latest` is the newest job in it), never the developer's. A name only: the
    folder is made by the first launch that records a job (mktemp per test listed a growing folder each time)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(session_temp_folder / "state" / uuid.uuid4().hex))
    # and no contexts (cloudddp/config.py) but those it writes itself
    monkeypatch.setenv("XDG_CONFIG_HOME", str(session_temp_folder / "config" / uuid.uuid4().hex))
    monkeypatch.delenv("CLOUDDDP_CONTEXT", raising=False)


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cloudddp.demo_data import write_demo_dataset

    root = tmp_path_factory.mktemp("demo-data")
    write_demo_dataset(root)
    return root


@pytest.fixture(scope="session")
def small_demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cloudddp.demo_data import write_demo_dataset

    root = tmp_path_factory.mktemp("small-demo-data")
    write_demo_dataset(root, train_per_class=32, val_per_class=8)
    return root
