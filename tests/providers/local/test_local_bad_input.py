"""`cloudddp launch -p local` with folders it cannot use or sizes it cannot run: exit 2, one paragraph naming
the option and the value, and nothing left in the runs folder (before, a checkpoint that was a file ended in a
FileExistsError traceback and left a run folder with no state.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import cli, run_cli, run_launcher


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text("print('hi')\n")
    return path


@pytest.mark.parametrize(
    ("option", "where", "named"),
    [
        ("--checkpoint", "job.py", "checkpoint (--checkpoint)"),  # an existing file
        ("--output", "job.py/model", "output (--output)"),  # below a file: cannot be made
        ("--runs-dir", "job.py", "the runs folder (--runs-dir)"),
    ],
)
def test_a_folder_that_cannot_be_one_is_exit_2_and_leaves_no_run(
    script: Path, tmp_path: Path, option: str, where: str, named: str
) -> None:
    runs = tmp_path / "runs"
    args = ["launch", "-p", "local", "--emulate", "none", "--runs-dir", str(runs), option, str(tmp_path / where)]
    result = cli(*args, str(script), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{named}: '{tmp_path / where}' cannot be used as a folder" in result.stderr
    assert "Traceback" not in result.stderr
    assert not runs.exists() or list(runs.iterdir()) == []
    assert script.read_text() == "print('hi')\n"


@pytest.mark.parametrize(
    ("option", "uri", "shown"),
    [("--checkpoint", "s3://bucket/ck", "s3://bucket/ck"), ("--output", "s3://bucket/out", "s3://bucket/out"),
     ("--checkpoint", "https://user:pw123@host/ck", "https://user:***@host/ck")],
)  # fmt: skip
def test_a_uri_for_the_output_or_checkpoint_is_refused_not_made_a_folder(
    script: Path, tmp_path: Path, option: str, uri: str, shown: str
) -> None:
    # It became the folder ./s3:/bucket/out (and https://user:pw123@host/ck a path with the password in it).
    for command in ("render", "launch"):
        result = cli(command, "-p", "local", option, uri, str(script), cwd=tmp_path)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
        name = option.removeprefix("--")
        assert f"{name}='{shown}': the local provider writes the {name} to a local folder" in result.stderr
        assert "pw123" not in result.stdout + result.stderr
    assert not (tmp_path / "s3:").exists() and not (tmp_path / "https:").exists()


def test_nproc_per_node_below_one_is_refused_before_anything_is_rendered(script: Path, tmp_path: Path) -> None:
    for provider in ("local", "slurm", "sagemaker"):
        result = cli("render", "-p", provider, "--nproc-per-node", "0", str(script), cwd=tmp_path)
        assert result.returncode == 2, result.stdout
        assert "nproc_per_node: Value error, must be at least 1 (or gpu, cpu, auto) (got 0)" in result.stderr
        assert "Traceback" not in result.stderr


def test_more_processes_than_the_local_emulation_takes_is_refused_at_once(script: Path, tmp_path: Path) -> None:
    result = cli("render", "-p", "local", "--nodes", "100000", str(script), cwd=tmp_path)
    assert result.returncode == 2, result.stdout[-500:]
    assert "nodes=100000 x nproc_per_node=1 is 100000 training processes on this machine" in result.stderr


@pytest.mark.slow
def test_cancelling_a_finished_run_says_it_already_ended(script: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    launched = run_cli("launch", "-p", "local", "--emulate", "none", "--runs-dir", str(runs), str(script), cwd=tmp_path)
    assert launched.returncode == 0, launched.stdout[-1000:] + launched.stderr
    (run,) = runs.iterdir()
    result = run_cli("cancel", str(run), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"the local run {run.name} already ended (SUCCEEDED); nothing to stop." in " ".join(result.stderr.split())
    assert "asked local to stop" not in result.stdout


@pytest.mark.process
def test_a_script_named_like_an_option_reaches_the_launcher_after_double_dash(tmp_path: Path) -> None:
    """`cloudddp launch -- -x.py a`: the node's launcher gets `-- -x.py a`, and its own dry run plans that script."""
    (tmp_path / "-x.py").write_text("print(1)\n")
    result = run_cli("render", "-p", "local", "--emulate", "none", "--", "-x.py", "a", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    node = yaml.safe_load(result.stdout)["request"]["nodes"][0]
    assert node["command"][-3:] == ["--", "-x.py", "a"]
    planned = run_launcher("--dry-run", *node["command"][3:], cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["argv"][-2:] == ["./-x.py", "a"]
