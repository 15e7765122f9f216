"""torchrun started as a fork of the launcher (cloudddp/launcher/forked.py) behaves as `python -m` would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_launcher

from cloudddp.launcher.forked import ForkedModule, forkable, worker_exit_code


def test_only_this_interpreters_modules_are_forked() -> None:
    assert forkable([sys.executable, "-m", "torch.distributed.run", "x.py"])
    assert not forkable([sys.executable, "x.py"])
    assert not forkable(["/usr/bin/python3-other", "-m", "torch.distributed.run"])


@pytest.mark.process
def test_a_forked_module_gets_its_argv_environment_session_and_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "probe_mod.py"
    module.write_text(
        "import os, sys\n"
        "open(os.environ['OUT'], 'w').write(repr((sys.argv[1:], os.getsid(0) == os.getpid(), __name__)))\n"
        "sys.exit(7)\n"
    )
    monkeypatch.chdir(tmp_path)  # found as `python -m` finds it: in the current folder
    child = ForkedModule([sys.executable, "-m", "probe_mod", "a", "b"], {"OUT": str(tmp_path / "out")}, lambda: None)
    assert child.wait(timeout=30) == 7
    assert (tmp_path / "out").read_text() == "(['a', 'b'], True, '__main__')"
    assert "OUT" not in os.environ  # the parent's environment is untouched


@pytest.mark.process
def test_prepare_runs_in_the_child_just_before_its_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """How the launcher patches torchrun's exit barrier (exit_barrier.install): in the forked torchrun only, with
    the child's environment already in place, before the module runs."""
    module = tmp_path / "probe_prepared.py"
    module.write_text("import os, sys\nsys.exit(0 if os.environ.get('PREPARED') == os.environ['OUT'] else 5)\n")
    monkeypatch.chdir(tmp_path)

    def prepare() -> None:
        os.environ["PREPARED"] = os.environ["OUT"]  # the child's environment, not ours

    child = ForkedModule([sys.executable, "-m", "probe_prepared"], {"OUT": "x"}, lambda: None, prepare=prepare)
    assert child.wait(timeout=30) == 0
    assert "PREPARED" not in os.environ


def test_worker_exit_code_reads_torchruns_first_failure() -> None:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    failure = ProcessFailure(local_rank=0, pid=1, exitcode=3, error_file="/nonexistent")
    assert worker_exit_code(ChildFailedError("train.py", {0: failure})) == 3
    killed = ProcessFailure(local_rank=0, pid=1, exitcode=-9, error_file="/nonexistent")
    assert worker_exit_code(ChildFailedError("train.py", {0: killed})) == 137
    assert worker_exit_code(RuntimeError("not torchrun's")) is None


@pytest.mark.slow
def test_a_failing_script_gives_the_launcher_its_own_exit_code(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text("import sys\nprint('failing', flush=True)\nsys.exit(5)\n")
    result = run_launcher("--provider", "standalone", str(script), cwd=tmp_path, timeout=120)
    assert result.returncode == 5, result.stdout + result.stderr
    assert "failing" in result.stdout
    assert "cloudddp/launcher/forked.py" not in result.stderr  # the traceback is torchrun's, not ours


@pytest.mark.process
def test_the_console_script_runs_a_module_of_the_current_folder_on_the_direct_path(tmp_path: Path) -> None:
    """Under an outer torchrun (TORCHELASTIC_RUN_ID set) `cloudddp-launch -m pkg.mod` runs the module directly, forked;
    the fork kept the launcher's sys.path, whose first entry is the console script's bin/ folder, so a package of
    the current folder, which `python -m pkg.mod` finds, was a ModuleNotFoundError."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text("import sys\nprint('module ran with', sys.argv[1:])\n")
    launcher = Path(sys.executable).parent / "cloudddp-launch"  # the console script pip installs
    env = {**os.environ, "TORCHELASTIC_RUN_ID": "outer", "RANK": "0", "PYTHONPATH": ""}
    result = subprocess.run([str(launcher), "-m", "pkg.mod", "--lr", "0.1"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "module ran with ['--lr', '0.1']" in result.stdout
