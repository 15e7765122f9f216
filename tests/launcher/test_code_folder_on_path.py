"""An entry point in a subfolder imports modules at the top of source_dir, on every SageMaker path.

Upstream: aws/sagemaker-training-toolkit 33839372faf8017edb7dafc6290c1ef63557b404,
src/sagemaker_training/entry_point.py `install` (sys.path.insert(0, code_dir)) and environment.py
`write_env_vars` (PYTHONPATH = ":".join(sys.path)): the toolkit puts its code folder on PYTHONPATH, so
`source_dir/sub/train.py` can `import common` from `source_dir/common.py`. Python alone puts only `sub/` on
sys.path. Bring-your-own images (no toolkit), `-p local --emulate sagemaker` and the drop-in's local mode run
cloudddp's launcher in the code folder; the launcher gives the workers the same PYTHONPATH.
"""

from __future__ import annotations

import os
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

import pytest
from helpers import sagemaker_host

from cloudddp.launcher import cli as launcher


def code_folder(root: Path) -> Path:
    code = root / "code"
    (code / "sub").mkdir(parents=True)
    (code / "common.py").write_text("VALUE = 1\n")
    (code / "sub" / "train.py").write_text("import common\n")
    return code


def workers_env(monkeypatch: pytest.MonkeyPatch, code: Path, environ: dict[str, str]) -> dict[str, str]:
    """The environment the launcher hands torchrun's workers, run in the code folder (torchrun not started)."""
    seen: dict[str, Any] = {}

    def supervise(plan: Any, command: list[str], env: dict[str, str], *rest: Any) -> int:
        seen["env"] = env
        return 0

    monkeypatch.setattr(launcher, "supervise", supervise)
    monkeypatch.chdir(code)
    argv = ["--host-map", "algo-1=127.0.0.1", "--nproc-per-node", "1", "sub/train.py"]
    assert launcher.run(argv, environ=environ) == 0
    return seen["env"]


def importable_from_script(module: str, script: Path, env: dict[str, str]) -> bool:
    """Whether `python SCRIPT` could import `module`: sys.path is the script's folder, then PYTHONPATH."""
    path = [str(script.parent), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return PathFinder.find_spec(module, path) is not None


@pytest.mark.parametrize("inherited", ["", "/somewhere/else"])
def test_subfolder_entry_point_imports_top_of_source_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inherited: str
) -> None:
    code = code_folder(tmp_path)
    environ = {**sagemaker_host(tmp_path), **({"PYTHONPATH": inherited} if inherited else {})}
    env = workers_env(monkeypatch, code, environ)
    assert importable_from_script("common", code / "sub" / "train.py", env)
    parts = env["PYTHONPATH"].split(os.pathsep)
    assert parts[0] == str(code)  # first, as the toolkit's sys.path.insert(0, code_dir)
    assert parts[1:] == ([inherited] if inherited else [])  # what was there stays, after it


def test_code_folder_already_on_path_is_not_repeated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On AWS's image the toolkit exported PYTHONPATH with /opt/ml/code in it already."""
    code = code_folder(tmp_path)
    environ = {**sagemaker_host(tmp_path), "PYTHONPATH": f"/lib/x:{code}"}
    env = workers_env(monkeypatch, code, environ)
    assert env["PYTHONPATH"] == f"/lib/x:{code}"


@pytest.mark.slow
def test_local_sagemaker_emulation_runs_a_subfolder_entry_point(tmp_path: Path) -> None:
    """End to end: `cloudddp launch -p local --emulate sagemaker` (the path the drop-in's local mode takes too)."""
    from helpers import run_cli

    code = code_folder(tmp_path)
    (code / "sub" / "train.py").write_text("import common\nprint('imported', common.VALUE, flush=True)\n")
    result = run_cli("launch", "-p", "local", "--emulate", "sagemaker", "--nodes", "1", "--source-dir", str(code),
                     "sub/train.py", cwd=tmp_path, env={"OMP_NUM_THREADS": "1"}, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "imported 1" in result.stdout + result.stderr
