"""What sbatch reads from the rendered script: directives it can parse (paths with spaces, '#', quotes), values it
cannot carry refused by name, no URL password anywhere in the script, and a script named like an option.

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
from helpers import PYTHON, cli

from cloudddp import session
from cloudddp.errors import CloudDDPError
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


def render_checked(source: Path, runs: Path, **fields: Any) -> Any:
    """As every door renders: the secrets policy first (cloudddp/secrets_policy.py), then the provider."""
    return session.render(SlurmProvider(), build_spec(spec_data(source, runs, **fields)))


@pytest.mark.network
def test_paths_with_spaces_and_hashes_reach_sbatch_whole(source: Path, tmp_path: Path) -> None:
    runs = tmp_path / 'out dir "1" 100%'
    script = render(source, runs, slurm={"runs_dir": str(runs), "partition": "gpu a#b"}).request.script
    arguments = sbatch_arguments(script, tmp_path)
    # %% is sbatch's literal %: the log lands in the folder of that name.
    assert f"--output={runs}".replace("%", "%%") + "/%x-%j.out" in arguments
    assert f"--chdir={source}" in arguments and "--partition=gpu a#b" in arguments
    assert "--signal=B:USR1@120" in arguments  # every directive after them was read too


@pytest.mark.parametrize(
    ("slurm", "message"),
    [
        ({"partition": "gpu\necho INJECTED"}, "slurm.partition='gpu\\necho INJECTED': a newline or control"),
        ({"account": "a\tb"}, "slurm.account='a\\tb': a newline or control character"),
        ({"sbatch_args": ["--exclusive", "--comment=x\nrm -rf ~"]}, "slurm.sbatch_args[1]='--comment=x\\nrm -rf ~'"),
        ({"mem": "64 G"}, "slurm.mem: Value error, must be a Slurm size"),
        ({"mem": "64G\n"}, "slurm.mem: Value error, must be a Slurm size"),
        ({"time": "1:00:00\n"}, "slurm.time: Value error, must be a Slurm time"),
        ({"runs_dir": "/tmp/a\\b"}, "slurm.runs_dir='/tmp/a\\\\b': sbatch reads a backslash"),
    ],
)
def test_values_a_directive_cannot_carry_are_refused_by_name(
    source: Path, tmp_path: Path, slurm: dict[str, Any], message: str
) -> None:
    with pytest.raises(CloudDDPError) as caught:
        render(source, tmp_path / "runs", slurm={"runs_dir": str(tmp_path / "runs"), **slurm})
    assert message in str(caught.value)


def test_a_newline_in_a_directive_from_the_cli_exits_2_without_a_script(source: Path) -> None:
    result = cli("render", "-p", "slurm", "--partition", "gpu\necho INJECTED", "my script.py", cwd=source)
    assert result.returncode == 2 and "slurm.partition=" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_password_in_a_variable_travels_by_name_and_never_reaches_the_script(source: Path, tmp_path: Path) -> None:
    environment = {"URL": "https://user:pw@host/x", "MODE": "fast"}
    request = render(source, tmp_path / "runs", environment=environment)
    assert request.request.secret_names == ["URL"]
    assert "pw@" not in request.request.script and "pw@" not in request.to_yaml()
    assert "export MODE=fast" in request.request.script and "URL=" not in request.request.script


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({"hyperparameters": {"db": "postgres://u:hunter2@db/x"}}, "hyperparameters.db='postgres://u:***@db/x'"),
        ({"args": ["https://ghp_tok@github.com/x"]}, "args[0]='https://***@github.com/x'"),
        ({"slurm": {"setup": ["pip install git+https://ghp_tok@github.com/x"]}}, "pip install git+https://***@"),
    ],
)
def test_a_password_in_an_argument_or_setup_line_is_refused_without_showing_it(
    source: Path, tmp_path: Path, fields: dict[str, Any], shown: str
) -> None:
    slurm = {"runs_dir": str(tmp_path / "runs"), **fields.pop("slurm", {})}
    with pytest.raises(CloudDDPError) as caught:
        render_checked(source, tmp_path / "runs", slurm=slurm, **fields)
    assert shown in str(caught.value) and "hunter2" not in str(caught.value) and "ghp_tok" not in str(caught.value)


def test_the_cli_render_of_url_passwords_prints_none_of_them(source: Path) -> None:
    result = cli("render", "-p", "slurm", "-e", "URL=https://user:pw@host/x", "my script.py", cwd=source)
    assert result.returncode == 0, result.stderr
    assert "pw@" not in result.stdout and "export URL" not in result.stdout
    refused = cli("render", "-p", "slurm", "-H", "db=postgres://u:hunter2@db/x", "my script.py", cwd=source)
    assert refused.returncode == 2 and "hyperparameters.db" in refused.stderr
    assert "hunter2" not in refused.stdout + refused.stderr and "Traceback" not in refused.stderr


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
