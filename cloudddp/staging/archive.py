"""Packing the user's source folder, with cloudddp's job side bundled inside.

The archive (`sourcedir.tar.gz`) holds:
- the user's files from `source_dir`, minus `.git`, `__pycache__`, virtual envs,
  `cloudddp-runs`, `*.pyc` and whatever `.cloudddpignore` lists (gitignore rules, `!` and `**` included: pathspec's
  GitIgnoreSpec);
- `cloudddp/` with only the job side (launcher, cluster detection, errors): pure
  standard library, so the container needs no `pip install` and works with network
  isolation;
- `cloudddp_bootstrap.py`, the container's entry point, and `cloudddp_job.json`, the
  job's entry point and launcher options it reads;
- any `extra_files` a provider adds at the top level (OCI: `cloudddp_node.sh`, the node
  script its short container entrypoint hands over to).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec

PACKAGE = Path(__file__).resolve().parents[1]  # the cloudddp package: its launcher is bundled with the code
ALWAYS_EXCLUDED = (
    ".git",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "cloudddp-runs",
)
EXCLUDED_SUFFIXES = (".pyc", ".pyo")
IGNORE_FILE = ".cloudddpignore"
BOOTSTRAP_NAME = "cloudddp_bootstrap.py"
JOB_CONFIG_NAME = "cloudddp_job.json"
# The job side, relative to the cloudddp package folder: everything a node needs.
JOB_SIDE = ("__init__.py", "errors.py", "redact.py", "aws_limits.py", "metrics.py", "cluster", "launcher")


@dataclass
class ArchiveReport:
    path: Path
    files: list[str] = field(default_factory=list)
    size: int = 0


def read_ignore_patterns(source_dir: Path) -> pathspec.GitIgnoreSpec:
    """`.cloudddpignore` with git's own rules (`!` re-includes, `**`, a leading `/` anchors), via pathspec."""
    path = source_dir / IGNORE_FILE
    return pathspec.GitIgnoreSpec.from_lines(path.read_text().splitlines() if path.is_file() else [])


def is_ignored(relative: str, is_dir: bool, patterns: pathspec.GitIgnoreSpec) -> bool:
    parts = relative.split("/")
    if any(part in ALWAYS_EXCLUDED for part in parts) or relative.endswith(EXCLUDED_SUFFIXES):
        return True
    return patterns.match_file(f"{relative}/" if is_dir else relative)


def is_virtualenv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


def source_files(source_dir: Path) -> list[tuple[Path, str]]:
    """(absolute path, archive name) of every file to ship, in a stable order."""
    patterns = read_ignore_patterns(source_dir)
    chosen: list[tuple[Path, str]] = []
    for root, dirs, files in os.walk(source_dir):
        root_path = Path(root)
        rel_root = root_path.relative_to(source_dir).as_posix()
        keep = []
        for d in sorted(dirs):
            rel = d if rel_root == "." else f"{rel_root}/{d}"
            if not is_ignored(rel, True, patterns) and not is_virtualenv(root_path / d):
                keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            rel = name if rel_root == "." else f"{rel_root}/{name}"
            if not is_ignored(rel, False, patterns):
                chosen.append((root_path / name, rel))
    return chosen


def job_side_files() -> list[tuple[Path, str]]:
    package = PACKAGE
    chosen: list[tuple[Path, str]] = []
    for item in JOB_SIDE:
        path = package / item
        if path.is_file():
            chosen.append((path, f"cloudddp/{item}"))
            continue
        for file in sorted(path.rglob("*.py")):
            chosen.append((file, f"cloudddp/{file.relative_to(package).as_posix()}"))
    return chosen


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def pack_source(
    source_dir: str | Path,
    destination: str | Path,
    job_config: dict[str, Any],
    extra_files: Mapping[str, bytes] | None = None,
) -> ArchiveReport:
    """Write the archive; `job_config` is what the bootstrap runs (see bootstrap.py).

    `extra_files` (top-level name -> bytes) are cloudddp's own files, like the bootstrap:
    they win over a user file of the same name.
    """
    source = Path(source_dir)
    report = ArchiveReport(path=Path(destination))
    user_files = source_files(source)
    extras = dict(extra_files or {})
    reserved = ("cloudddp", BOOTSTRAP_NAME, JOB_CONFIG_NAME, *extras)
    clashes = [name for _, name in user_files if name.split("/")[0] in reserved]
    with tarfile.open(destination, "w:gz") as tar:
        for path, name in user_files:
            if name in clashes:
                continue  # the bundled job side wins over a same-named user file
            tar.add(path, arcname=name, recursive=False)
            report.files.append(name)
        for path, name in job_side_files():
            tar.add(path, arcname=name, recursive=False)
            report.files.append(name)
        bootstrap = (PACKAGE / "launcher" / "bootstrap.py").read_bytes()
        _add_bytes(tar, BOOTSTRAP_NAME, bootstrap)
        _add_bytes(tar, JOB_CONFIG_NAME, json.dumps(job_config, indent=2).encode())
        report.files += [BOOTSTRAP_NAME, JOB_CONFIG_NAME]
        for name, data in sorted(extras.items()):
            _add_bytes(tar, name, data)
            report.files.append(name)
    report.size = report.path.stat().st_size
    return report
