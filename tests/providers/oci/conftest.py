"""Fixtures every OCI test module shares: a throwaway API key (one per module) and a config file naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.oci_loopback_server import ThrowawayKey


@pytest.fixture(scope="module")
def key() -> ThrowawayKey:
    return ThrowawayKey.generate()


@pytest.fixture
def config(tmp_path: Path, key: ThrowawayKey) -> Path:
    return key.write_config(tmp_path / ".oci")
