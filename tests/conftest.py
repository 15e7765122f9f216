"""Shared fixtures: the demo dataset. The helpers live in the `helpers` package (re-exported here
for tests that still write `from conftest import ...`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _guards import nothing_written_to_opt_ml_or_home  # noqa: F401  (session guard: no test writes /opt/ml or $HOME)
from helpers import PYTHON, REPO, SOURCES, clean_env, run_cli, run_launcher, run_python

__all__ = ["PYTHON", "REPO", "SOURCES", "clean_env", "run_cli", "run_launcher", "run_python"]


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
