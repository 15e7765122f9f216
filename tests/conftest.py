"""Shared fixtures: the demo dataset. Helpers live in the `helpers` package (`from helpers import run_cli`):
never import from `conftest`, since a folder's own conftest.py would shadow this one."""

from __future__ import annotations

from pathlib import Path

import pytest
from _guards import nothing_written_to_opt_ml_or_home  # noqa: F401  (session guard: no test writes /opt/ml or $HOME)


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
