"""The job side on the oldest Python it promises (3.8, estimator.OLDEST_IMAGE_PYTHON): images with
PyTorch <= 1.12 run it there. Each test runs the files the archive ships (archive.job_side_files) under a
real CPython 3.8 in a subprocess; the dev environment's 3.11 would not see a 3.9+ call such as
os.waitstatus_to_exitcode or str.removeprefix.

No torch is installable for 3.8 here, so the supervision test puts a minimal `torch.distributed.run` on the
path that runs the script as torchrun would (its options, then the script and its arguments). What is under
test is the launcher around it: its plan, the forked torchrun, the exit code it keeps."""

from __future__ import annotations

import ast
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cloudddp.sagemaker.estimator import OLDEST_IMAGE_PYTHON
from cloudddp.staging.archive import job_side_files

OLDEST = ".".join(map(str, OLDEST_IMAGE_PYTHON))
STAND_IN_TORCHRUN = """\
import runpy, sys
args = sys.argv[1:]
while args and args[0].startswith("-"):  # torchrun's own options come first, each as --name=value
    args.pop(0)
sys.argv = args
runpy.run_path(args[0], run_name="__main__")
"""


def oldest_python() -> str:
    """pyenv's CPython 3.8 (this machine kind has one), else a `python3.8` that runs."""
    root = (
        subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        if shutil.which("pyenv")
        else ""
    )
    candidates = sorted(glob.glob(f"{root}/versions/{OLDEST}.*/bin/python{OLDEST}")) if root else []
    candidates += [found] if (found := shutil.which(f"python{OLDEST}")) else []
    for candidate in candidates:
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
        )
        if probe.returncode == 0 and probe.stdout.strip() == str(OLDEST_IMAGE_PYTHON):
            return candidate
    pytest.skip(f"no CPython {OLDEST} runs on this machine (looked in pyenv's versions and for python{OLDEST} on PATH)")


@pytest.fixture(scope="module")
def job_side(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The job side as a node gets it: only the archive's files, and a stand-in torch.distributed.run."""
    root = tmp_path_factory.mktemp("job-side")
    for path, name in job_side_files():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, root / name)
    run = root / "torch" / "distributed" / "run.py"
    run.parent.mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("")
    (root / "torch" / "distributed" / "__init__.py").write_text("")
    run.write_text(STAND_IN_TORCHRUN)
    return root


def run_oldest(job_side: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "TMPDIR": str(cwd), "PYTHONPATH": str(job_side)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([oldest_python(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.process
def test_every_job_side_module_imports_on_the_oldest_python(job_side: Path, tmp_path: Path) -> None:
    names = sorted(
        name[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        for _, name in job_side_files()
        if name.endswith(".py") and not name.endswith("__main__.py")
    )
    code = f"import importlib\nfor name in {names!r}:\n    importlib.import_module(name)\nprint(len({names!r}))"
    result = run_oldest(job_side, "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == len(names) > 20


@pytest.mark.process
@pytest.mark.parametrize(
    ("ending", "expected"), [("sys.exit(0)", 0), ("sys.exit(3)", 3), ("os.kill(os.getpid(), 9)", 128 + 9)]
)
def test_the_launcher_keeps_the_scripts_exit_code_on_the_oldest_python(
    job_side: Path, tmp_path: Path, ending: str, expected: int
) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import os, sys\n"
        "open('ran.txt', 'w').write(' '.join(sys.argv[1:]) + ' ' + os.environ['CLOUDDDP_PROVIDER_DETECTED'])\n"
        f"{ending}\n"
    )
    result = run_oldest(job_side, "-m", "cloudddp.launcher", str(script), "--epochs", "2", cwd=tmp_path)
    assert result.returncode == expected, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert (tmp_path / "ran.txt").read_text() == "--epochs 2 standalone"


@pytest.mark.process
def test_the_stand_in_is_found_only_through_the_job_side_path(job_side: Path) -> None:
    """The interpreter found is really the oldest one, and no torch of its own hides the stand-in."""
    assert sys.version_info[:2] > OLDEST_IMAGE_PYTHON
    result = subprocess.run(
        [oldest_python(), "-c", "import torch"], capture_output=True, text=True, env={"PATH": os.environ["PATH"]}
    )
    assert result.returncode != 0 and "No module named 'torch'" in result.stderr


STUB_BOTOCORE = """\
class ClientError(Exception):
    def __init__(self, response):
        self.response = response
class EndpointConnectionError(Exception): pass
class ConnectTimeoutError(Exception): pass
class ReadTimeoutError(Exception): pass
class NoCredentialsError(Exception): pass
"""
EXPLAIN = """\
import sys, types
sys.path.insert(0, sys.argv[1])
from botocore.exceptions import ClientError, EndpointConnectionError
from cloudddp.launcher.pull_inputs import Channel, explain
client = types.SimpleNamespace(meta=types.SimpleNamespace(endpoint_url="http://s3.test"))
channel = Channel("train", "bkt", "data")
print(explain(EndpointConnectionError("down"), channel, client))
print(explain(ClientError({"Error": {"Code": "NoSuchBucket"}}), channel, client))
"""


@pytest.mark.process
def test_an_s3_failure_is_explained_on_the_oldest_python(job_side: Path, tmp_path: Path) -> None:
    """The init container's paragraph for a failed S3 call. Before: `A | B` in isinstance is 3.10+, so every S3
    error but missing credentials was a TypeError traceback on a 3.8 or 3.9 image (botocore stubbed: none here)."""
    (tmp_path / "stub" / "botocore").mkdir(parents=True)
    (tmp_path / "stub" / "botocore" / "__init__.py").write_text("")
    (tmp_path / "stub" / "botocore" / "exceptions.py").write_text(STUB_BOTOCORE)
    result = run_oldest(job_side, "-c", EXPLAIN, str(tmp_path / "stub"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    unreachable, missing = result.stdout.splitlines()
    assert unreachable.startswith("channel 'train' (s3://bkt/data) at http://s3.test: the S3 endpoint did not answer")
    assert missing.endswith("the bucket 'bkt' does not exist there.")


def unions_at_run_time(tree: ast.AST) -> list[int]:
    """Lines of `A | B` given to isinstance/issubclass: types joined by `|` at run time need 3.10."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass")
        and len(node.args) == 2 and isinstance(node.args[1], ast.BinOp) and isinstance(node.args[1].op, ast.BitOr)
    ]  # fmt: skip


def test_no_job_side_file_joins_types_with_a_bar_at_run_time() -> None:
    """Imports pass on 3.8 with such a line (it fails only when reached), so every shipped file is read for it."""
    found = {name: lines for path, name in job_side_files() if name.endswith(".py")
             if (lines := unions_at_run_time(ast.parse(Path(path).read_text())))}  # fmt: skip
    assert found == {}
