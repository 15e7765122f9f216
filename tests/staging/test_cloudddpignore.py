"""`.cloudddpignore` follows git's rules (the README promises gitignore syntax): what ships in the source archive."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from cloudddp.staging.archive import pack_source, source_files

FILES = ["train.py", "notes.log", "keep.log", "data/big.bin", "pkg/data/x.bin", "pkg/model.py",
         "out/a/tmp/t.txt", "top.txt", "pkg/top.txt", "cloudddp-runs/r/state.json", "pkg/__pycache__/m.pyc"]  # fmt: skip
IGNORE = """\
# logs, but not the one we keep
*.log
!keep.log
/data/
**/tmp/
/top.txt
"""


def project(root: Path) -> Path:
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    (root / ".cloudddpignore").write_text(IGNORE)
    return root


def test_negation_double_star_anchoring_and_directories_follow_git(tmp_path: Path) -> None:
    shipped = sorted(name for _, name in source_files(project(tmp_path / "src")))
    # data/ is anchored (pkg/data/ ships), /top.txt too, **/tmp/ at any depth, !keep.log re-included.
    assert shipped == [".cloudddpignore", "keep.log", "pkg/data/x.bin", "pkg/model.py", "pkg/top.txt", "train.py"]


def test_the_archive_holds_exactly_the_chosen_files_plus_the_job_side(tmp_path: Path) -> None:
    source = project(tmp_path / "src")
    report = pack_source(source, tmp_path / "sourcedir.tar.gz", {"entry_point": "train.py"})
    with tarfile.open(report.path) as tar:
        names = set(tar.getnames())
    assert {"train.py", "keep.log", "pkg/data/x.bin"} <= names
    assert not names & {"notes.log", "data/big.bin", "out/a/tmp/t.txt", "top.txt", "cloudddp-runs/r/state.json"}


@pytest.mark.process
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git, the reference for gitignore rules")
def test_what_ships_is_what_git_would_track_with_the_same_file_as_gitignore(tmp_path: Path) -> None:
    source = project(tmp_path / "src")
    shipped = {name for _, name in source_files(source)}
    (source / ".gitignore").write_text(IGNORE)
    subprocess.run(["git", "init", "-q"], cwd=source, check=True)
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=source, check=True,
                            capture_output=True, text=True).stdout.split()  # fmt: skip
    # cloudddp always leaves out run folders and bytecode, whatever the ignore file says.
    expected = {n for n in listed if n != ".gitignore" and "cloudddp-runs" not in n and "__pycache__" not in n}
    assert shipped == expected
