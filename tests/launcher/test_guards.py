"""The session guard of tests/_guards.py notices writes to /opt/ml and $HOME (checked on stand-in folders)."""

from __future__ import annotations

import os
from pathlib import Path

from _guards import differences, snapshot


def test_the_guard_sees_a_file_written_under_opt_ml_and_home(tmp_path: Path) -> None:
    opt_ml, home = tmp_path / "opt" / "ml", tmp_path / "home"
    home.mkdir()
    before = snapshot(opt_ml, home)
    assert differences(before, snapshot(opt_ml, home)) == []
    (opt_ml / "output").mkdir(parents=True)
    (opt_ml / "output" / "failure").write_text("boom")
    (home / ".oci").mkdir()
    (home / ".oci" / "config").write_text("[DEFAULT]")
    (home / "stray.txt").write_text("x")
    changes = differences(before, snapshot(opt_ml, home))
    assert f"created {opt_ml / 'output' / 'failure'}" in changes
    assert f"created {home / '.oci' / 'config'}" in changes
    assert f"created {home / 'stray.txt'} (entry)" in changes


def test_the_guard_sees_a_modified_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    credentials = home / ".aws" / "credentials"
    credentials.write_text("a")
    before = snapshot(tmp_path / "no-opt-ml", home)
    os.utime(credentials, ns=(1, 1))
    assert differences(before, snapshot(tmp_path / "no-opt-ml", home)) == [f"modified {credentials}"]
