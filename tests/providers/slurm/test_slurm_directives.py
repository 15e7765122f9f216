"""What sbatch reads from the rendered script: directives it can parse (paths with spaces, '#', quotes), and a script
named like an option (values a directive cannot carry, and secrets: tests/providers/batch).

sbatch's own parser runs on each rendered script: it splits the #SBATCH lines (and rejects an invalid one) before
it contacts a controller, so a slurm.conf naming a closed port is enough; `-vvv` prints every argument it found.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import PYTHON

from cloudddp.job_spec import build_spec
from cloudddp.providers.slurm.provider import SlurmProvider

FOUND = 'sbatch: debug2: Found in script, argument "'


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sbatch_arguments(script: str, tmp_path: Path) -> list[str]:
    """The arguments the real sbatch reads from the script's #SBATCH lines; AssertionError if it rejects one."""
    if shutil.which("sbatch") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the sbatch parser tests: slurm-client is missing (see .ci/run)")
        pytest.skip("needs sbatch (apt-get install -y slurm-client)")
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        f"ClusterName=parse\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={closed_port()}\n"
        "NodeName=n1 NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=n1 Default=YES\n"
        "AuthType=auth/none\nCredType=cred/none\n"
    )
    (tmp_path / "job.sbatch").write_text(script)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    process = subprocess.Popen(["sbatch", "--parsable", "-vvv", "job.sbatch"], cwd=tmp_path, env=env, text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    found, seen = [], []
    deadline = time.monotonic() + 30
    try:  # parsing is done once sbatch tries the controller: stop there rather than wait for its retries
        for line in process.stderr:  # type: ignore[union-attr]
            seen.append(line)
            if line.startswith(FOUND):
                found.append(line.removeprefix(FOUND).rstrip().removesuffix('"'))
            if "Invalid directive" in line or "Unmatched" in line:
                raise AssertionError(line)
            if "slurm stream socket" in line or "controller" in line or time.monotonic() > deadline:
                break
    finally:
        process.kill()
        process.wait()
    assert found, "".join(seen)
    return found


def spec_data(source: Path, runs: Path, **fields: Any) -> dict[str, Any]:
    return {"name": "resnet", "entry_point": "my script.py", "source_dir": str(source), "nodes": 2,
            "slurm": {"runs_dir": str(runs)}, **fields}  # fmt: skip


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "sp ace #1"
    folder.mkdir()
    (folder / "my script.py").write_text("print(1)\n")
    return folder


def render(source: Path, runs: Path, **fields: Any) -> Any:
    return SlurmProvider().render(build_spec(spec_data(source, runs, **fields)))


@pytest.mark.network
def test_paths_with_spaces_and_hashes_reach_sbatch_whole(source: Path, tmp_path: Path) -> None:
    runs = tmp_path / 'out dir "1" 100%'
    script = render(source, runs, slurm={"runs_dir": str(runs), "partition": "gpu a#b"}).request.script
    arguments = sbatch_arguments(script, tmp_path)
    # %% is sbatch's literal %: the log lands in the folder of that name.
    assert f"--output={runs}".replace("%", "%%") + "/%x-%j.out" in arguments
    assert f"--chdir={source}" in arguments and "--partition=gpu a#b" in arguments
    assert "--signal=B:USR1@120" in arguments  # every directive after them was read too


@pytest.mark.process
def test_a_script_named_like_an_option_follows_double_dash_and_the_launcher_takes_it(tmp_path: Path) -> None:
    (tmp_path / "-x.py").write_text("print(1)\n")
    spec = build_spec({"entry_point": "-x.py", "source_dir": str(tmp_path), "args": ["a", "--b"],
                       "slurm": {"launcher": f"{PYTHON} -m cloudddp.launcher"}})  # fmt: skip
    step = next(line for line in SlurmProvider().render(spec).request.script.splitlines() if line.startswith("srun "))
    words = shlex.split(step.removesuffix(" &"))
    launcher = words[words.index(PYTHON) :]
    assert launcher[-4:] == ["--", "-x.py", "a", "--b"]
    planned = subprocess.run([launcher[0], *launcher[1:3], "--dry-run", *launcher[3:]], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    argv = json.loads(planned.stdout)["argv"]  # torchrun's command line, the script last before its arguments
    assert argv[-3] in ("-x.py", "./-x.py") and argv[-2:] == ["a", "--b"]
