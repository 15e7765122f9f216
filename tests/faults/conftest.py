"""Shared by the fault tests: a small two-class image set the tiny model learns in a few epochs."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fault_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cloudddp.demo_data import write_demo_dataset

    root = tmp_path_factory.mktemp("fault-data")
    write_demo_dataset(root, train_per_class=48, val_per_class=16)
    return root
