"""What every `notebooks/build_<name>.py` shares: the notebook around its cells, written as `<name>.ipynb` beside it."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_notebook


def notebook_of(cells: list[nbformat.NotebookNode]) -> nbformat.NotebookNode:
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    return notebook


def write_beside(builder: str, notebook: nbformat.NotebookNode) -> None:
    """`notebooks/build_x.py` writes `notebooks/x.ipynb`."""
    target = Path(builder).with_name(Path(builder).stem.removeprefix("build_") + ".ipynb")
    nbformat.write(notebook, target)
    print(f"wrote {target}")
