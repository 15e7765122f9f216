"""Helpers shared by the tests: running cloudddp and its launcher as a user does, in a clean environment.

`from helpers import run_cli` (tests/ is on sys.path through its conftest.py); `conftest`
re-exports these names until every test imports them from here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from unittest import mock

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "sources"
PYTHON = sys.executable
PLATFORM_PREFIXES = ("SM_", "SLURM_", "PBS_", "PET_", "OCI__", "AWS_BATCH_", "SKYPILOT_", "TORCHELASTIC_", "CLOUDDDP_")
PLATFORM_NAMES = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "NODE_RANK", "INITIAL_CLUSTER_SIZE",
                  "CLUSTER_NODES_METADATA_FILE", "LOCAL_RANK", "OMP_NUM_THREADS"}  # fmt: skip
# `cloudddp` for a test that presses Ctrl-C (sends SIGINT): Python's own SIGINT handler installed first, as Python
# installs it in a terminal's foreground job. A background job of a non-interactive shell (`.ci/run ... &`) starts
# with SIGINT ignored (POSIX), children inherit that, and Python then never raises KeyboardInterrupt: the CLI
# would sleep through the test's SIGINT (reproduced: the test timed out exactly so).
CLI_FOR_CTRL_C = ["-c", "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                  "from cloudddp.console import main; main()"]  # fmt: skip


# The test's own sandbox (tests/conftest.py): its job index and contexts, and its temp folder. A run given an exact
# environment (inherit_env=False) keeps them all the same, or it would read and write the user's job index.
SANDBOX_VARIABLES = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "TMPDIR")


def exact_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """`env` as given, on top of the test's sandbox variables only (for tests that remove a variable, a credential or
    a role, to see what the user sees without it)."""
    return {**{k: os.environ[k] for k in SANDBOX_VARIABLES if k in os.environ}, **(env or {})}


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without any platform's variables leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PLATFORM_PREFIXES) and k not in PLATFORM_NAMES}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def sagemaker_host(root: Path, **extra: str) -> dict[str, str]:
    """One host's /opt/ml under `root` as a bring-your-own image sees it (the config files only, one host
    algo-1): the variables that point the launcher at it, and `extra`."""
    config = root / "input" / "config"
    config.mkdir(parents=True)
    (root / "output").mkdir()
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    (config / "hyperparameters.json").write_text("{}")
    return {"SM_INPUT_CONFIG_DIR": str(config), "SM_NUM_GPUS": "0", "SM_NUM_NEURONS": "0", **extra}


def require_environment(python: Path, build: str) -> None:
    """Skip the calling test unless `python` (a SageMaker SDK virtual env's) exists; in CI (`CI` set) fail instead:
    CI builds these environments (make test-all), and a part it does not test must not pass quietly."""
    if python.exists():
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run this test: no {python} (`{build}` builds it)")
    pytest.skip(f"no {python}: `{build}` builds it")


def run_tree(
    argv: list[str], *, timeout: float, cwd: Path | str, env: Mapping[str, str], **popen: object
) -> subprocess.CompletedProcess[str]:
    """subprocess.run for a command that starts processes of its own (launchers, torchrun, nodes), text output.

    It runs in a session of its own, and on timeout the whole session's process group is killed: subprocess.run
    kills only the first process, and the rest went on holding ports and files into later tests.
    """
    process = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, **popen)  # type: ignore[call-overload]  # fmt: skip
    with process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):  # a process that left the group may hold the pipes
                out, err = process.communicate(timeout=10)
            raise subprocess.TimeoutExpired(argv, timeout) from None
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def run_python(
    argv: list[str], env: Mapping[str, str] | None, cwd: Path | str, timeout: float, inherit_env: bool = True
) -> subprocess.CompletedProcess[str]:
    """`python ARGV`, output captured as text; `.elapsed` holds its wall time in seconds.

    inherit_env: ENV on top of this process's environment less any platform's variables; False: ENV exactly (and the
    test's sandbox, exact_env), for tests that remove a variable (a credential, a role) to see what the user sees.
    """
    started = time.monotonic()
    environment = clean_env(env) if inherit_env else exact_env(env)
    result = run_tree([PYTHON, *argv], cwd=cwd, env=environment, timeout=timeout)
    result.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return result


def run_cli(
    *args: str,
    cwd: Path | str = REPO,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    inherit_env: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`cloudddp ARGS` in a subprocess, as a user runs it (the one CLI runner of the tests)."""
    return run_python(["-c", "from cloudddp.console import main; main()", *args], env, cwd, timeout, inherit_env)


def cli(
    *args: str,
    cwd: Path | str = REPO,
    env: Mapping[str, str] | None = None,
    inherit_env: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`cloudddp ARGS` in this process, through the console script's entry function, as `run_cli` runs it in a
    child: the same environment rules, working folder, captured stdout/stderr and exit code; `.elapsed` too.

    For unit tests of what the CLI prints and refuses. A command that starts processes (a local launch) needs
    `run_cli`. The environment, working folder, sys.argv and the stop signals' handlers are restored after."""
    return _in_process(["cloudddp", *args], _console_main, env, cwd, inherit_env)


def launcher(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str = REPO,
    inherit_env: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`cloudddp-launch ARGS` in this process (its `main`), as `run_launcher` runs it in a child; for what it plans,
    prints and refuses (`--dry-run`, bad input). A launch that starts torchrun needs `run_launcher`."""
    from cloudddp.launcher.cli import main

    return _in_process(["cloudddp-launch", *args], lambda: sys.exit(main(list(args))), env, cwd, inherit_env)


def _in_process(
    argv: list[str], entry: Callable[[], None], env: Mapping[str, str] | None, cwd: Path | str, inherit_env: bool
) -> subprocess.CompletedProcess[str]:
    """Run a console script's `entry` as if it were `argv` in a child of this process: run_python's environment
    rules, `cwd`, stdout and stderr captured as text, the exit code; `.elapsed` holds its wall time in seconds."""
    environment = clean_env(env) if inherit_env else exact_env(env)
    stdout, stderr = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with (
        _as_console_script(argv, environment, cwd),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        code = _exit_code_of(entry)
    result = subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())
    result.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return result


def _console_main() -> None:
    from cloudddp import console, terminal

    # A finished `stage` or `list` leaves through os._exit (terminal.exit_now), which would end the test process.
    with mock.patch.object(terminal, "exit_now", lambda: sys.exit(0)):
        console.main()


def _exit_code_of(entry: Callable[[], None]) -> int:
    try:
        entry()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)  # sys.exit("message"), as the interpreter prints it
        return 1
    return 0


@contextlib.contextmanager
def _as_console_script(argv: list[str], environment: Mapping[str, str], cwd: Path | str) -> Iterator[None]:
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    previous_cwd = os.getcwd()
    try:
        with mock.patch.dict(os.environ, environment, clear=True), mock.patch.object(sys, "argv", argv):
            os.chdir(cwd)
            yield
    finally:
        os.chdir(previous_cwd)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` every 0.1 s until it holds; fail naming `what` after `timeout` seconds (a wait for an
    event, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.1)


def run_launcher(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | str = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`cloudddp-launch ARGS` in a subprocess."""
    return run_python(["-m", "cloudddp.launcher", *args], env, cwd, timeout)


def private_jupyter(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Notebooks run by nbclient get this venv's Python as their kernel and keep Jupyter's files in `folder`.

    The kernelspec goes in a private prefix (JUPYTER_PATH); the IPython profile a kernel creates on its first
    start (IPYTHONDIR, else ~/.ipython: reproduced on a machine without one) and the kernels' connection
    files (JUPYTER_RUNTIME_DIR) stay out of $HOME too."""
    prefix = folder / "jupyter"
    monkeypatch.setenv("IPYTHONDIR", str(folder / "ipython"))  # first: `ipykernel install` creates it too
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(folder / "jupyter-runtime"))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    subprocess.run([PYTHON, "-m", "ipykernel", "install", "--prefix", str(prefix), "--name", "python3"],
                   check=True, capture_output=True)  # fmt: skip
