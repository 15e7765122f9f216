"""`-m MODULE` on the local provider is looked for before any node starts, as `python -m` on a node would look:
source_dir first, then PYTHONPATH (the job's own, if it sets one), then this environment's packages.

Before: a typo started every node, each printed torchrun's failure report, and the job ended FAILED."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli


def launch(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = run_cli("launch", "-p", "local", "--nodes", "2", "--runs-dir", str(tmp_path / "runs"), *args)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.process
def test_a_module_no_node_could_find_is_refused_before_anything_starts(tmp_path: Path) -> None:
    code, out, err = launch(tmp_path, "-m", "--source-dir", str(tmp_path), "trian_ddp")
    assert code == 2 and "Traceback" not in err, out + err
    assert "entry_point 'trian_ddp' (-m): no module 'trian_ddp' is found" in err and str(tmp_path) in err
    assert not (tmp_path / "runs").exists()  # no run folder, no node


@pytest.mark.process
def test_a_module_in_source_dir_or_on_the_jobs_pythonpath_is_found(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "my_train.py").write_text("print('hi')\n")
    code, out, err = launch(tmp_path, "-m", "--source-dir", str(tmp_path / "src"), "--dry-run", "my_train")
    assert code == 0, out + err
    (tmp_path / "lib" / "shared_train").mkdir(parents=True)
    (tmp_path / "lib" / "shared_train" / "__init__.py").write_text("")
    code, out, err = launch(tmp_path, "-m", "--source-dir", str(tmp_path / "src"), "--dry-run", "shared_train.main")
    assert code == 2 and "no module 'shared_train'" in err, out + err
    pythonpath = f"PYTHONPATH={tmp_path / 'lib'}"
    code, out, err = launch(tmp_path, "-m", "--source-dir", str(tmp_path / "src"), "--env", pythonpath,
                            "--dry-run", "shared_train.main")  # fmt: skip
    assert code == 0, out + err


@pytest.mark.process
def test_looking_runs_none_of_the_users_code(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    code, out, err = launch(tmp_path, "-m", "--source-dir", str(tmp_path), "--dry-run", "pkg.nosuchsub")
    assert code == 0, out + err  # the package is there; its submodule is the nodes' to find
    assert not (tmp_path / "ran").exists()


@pytest.mark.process
def test_a_module_named_as_python_m_takes_any_file_name_is_found(tmp_path: Path) -> None:
    # `python -m my-train` runs my-train.py (the name is looked up as a file, never checked as an identifier);
    # found refused by a review of 8595244.
    (tmp_path / "my-train.py").write_text("print('ran')\n")
    code, out, err = launch(tmp_path, "-m", "--source-dir", str(tmp_path), "--dry-run", "my-train")
    assert code == 0, out + err
