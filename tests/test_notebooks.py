"""Every notebook that has a builder (`notebooks/build_<name>.py`) is exactly what its builder writes, so a notebook
is edited in one reviewable Python file and never drifts from it. Running each notebook is tested per provider."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest
from helpers import REPO

BUILDERS = sorted((REPO / "notebooks").glob("build_*.py"))


def test_every_builder_has_its_notebook() -> None:
    assert BUILDERS, "no notebooks/build_*.py found"
    for builder in BUILDERS:
        assert (builder.parent / f"{builder.stem.removeprefix('build_')}.ipynb").is_file(), builder


@pytest.mark.parametrize("builder", BUILDERS, ids=[b.stem for b in BUILDERS])
def test_notebook_is_generated_from_its_builder(builder: Path) -> None:
    spec = importlib.util.spec_from_file_location(builder.stem, builder)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(builder.parent))  # a builder may import its neighbours
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    saved = nbformat.read(builder.parent / f"{builder.stem.removeprefix('build_')}.ipynb", as_version=4)
    assert [c.source for c in saved.cells] == [c.source for c in module.build().cells]
