"""The session guard of tests/_guards.py notices writes to /opt/ml, $HOME and the system temp folder (checked on
stand-in folders)."""

from __future__ import annotations

import os
from pathlib import Path

from _guards import differences, snapshot


def test_the_guard_sees_a_file_written_under_opt_ml_and_home(tmp_path: Path) -> None:
    opt_ml, home, temp = tmp_path / "opt" / "ml", tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    before = snapshot(opt_ml, home, temp)
    assert differences(before, snapshot(opt_ml, home, temp)) == []
    (opt_ml / "output").mkdir(parents=True)
    (opt_ml / "output" / "failure").write_text("boom")
    (home / ".oci").mkdir()
    (home / ".oci" / "config").write_text("[DEFAULT]")
    (home / "stray.txt").write_text("x")
    changes = differences(before, snapshot(opt_ml, home, temp))
    assert f"created {opt_ml / 'output' / 'failure'}" in changes
    assert f"created {home / '.oci' / 'config'}" in changes
    assert f"created {home / 'stray.txt'} (entry)" in changes


def test_the_guard_sees_scratch_folders_left_in_the_system_temp_folder(tmp_path: Path) -> None:
    home, temp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    (temp / "unrelated").mkdir()  # another program's: not watched
    before = snapshot(tmp_path / "no-opt-ml", home, temp)
    for name in ("cloudddp-launch-x1", "torchelastic_y2", "pymp-z3", "someone-else"):
        (temp / name).mkdir()
    (temp / "cloudddp-slurm-test-cluster.lock").touch()  # a file: the Slurm test cluster's machine-wide lock
    assert differences(before, snapshot(tmp_path / "no-opt-ml", home, temp)) == [
        f"created {temp}/{name} (entry)" for name in ("cloudddp-launch-x1", "pymp-z3", "torchelastic_y2")
    ]


def test_the_guard_sees_a_modified_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    credentials = home / ".aws" / "credentials"
    credentials.write_text("a")
    before = snapshot(tmp_path / "no-opt-ml", home, tmp_path)
    os.utime(credentials, ns=(1, 1))
    assert differences(before, snapshot(tmp_path / "no-opt-ml", home, tmp_path)) == [f"modified {credentials}"]
