"""Start `python -m MODULE ARGS` by forking this interpreter instead of starting a new one.

torchrun is `python -m torch.distributed.run`: a fresh interpreter first pays its start-up and
`site` (about 0.1 s, more in a virtual environment) before torchrun's own imports. The launcher
is already a running interpreter of the same Python, so it forks and runs the module in the
child with `runpy`, exactly as `python -m` would (`__main__`, `sys.argv`, exit code, traceback).
The child gets a session of its own, default signal handlers, the parent-death signal and the
given environment. One difference on purpose: when torchrun fails because a worker failed, the
child exits with that worker's exit code (torchrun's ChildFailedError knows it) instead of 1, so a
job's exit code is the failing script's. `ForkedModule` offers the part of `subprocess.Popen` the supervisor uses.
Only safe before the launcher starts any thread (the supervisor starts it first).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import runpy
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

RESET_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# Warnings meant for the training processes (Slurm's `--signal=USR1@120`). Slurm signals every process
# of the step (proctrack/cgroup), torchrun included, whose default action would be to die: torchrun
# gets a handler that does nothing. A handler, not SIG_IGN, so the workers it starts (exec resets
# handlers, not ignored signals) keep the default disposition unless the script sets its own.
WARNING_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)


def _ignore_warning(_signum: int, _frame: object) -> None:
    """torchrun has nothing to do on a warning; its workers got it too."""


def forkable(argv: Sequence[str]) -> bool:
    """`[sys.executable, "-m", MODULE, ...]`: a module of this very interpreter."""
    return len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m" and hasattr(os, "fork")


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # what the interpreter does with sys.exit("message")
    return 1


def worker_exit_code(exc: BaseException) -> int | None:
    """The first failed worker's exit code from torchrun's ChildFailedError (128+N for signal N)."""
    first_failure = getattr(exc, "get_first_failure", None)
    if first_failure is None:
        return None
    try:
        code = int(first_failure()[1].exitcode)
    except (AttributeError, IndexError, TypeError, ValueError):
        return None
    return 128 - code if code < 0 else (code or None)


def _run_child(
    module: str,
    args: list[str],
    env: Mapping[str, str],
    before: Callable[[], None],
    prepare: Callable[[], object] | None,
) -> NoReturn:
    code = 1
    try:
        os.setsid()
        before()
        for sig in RESET_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        for sig in WARNING_SIGNALS:
            signal.signal(sig, _ignore_warning)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # The supervisor forks with stops blocked (supervisor.py `_fork`): one sent meanwhile acts now, by default.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, (*RESET_SIGNALS, signal.SIGINT))
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = python_m_path(sys.path, env)
        sys.argv = [module, *args]
        if prepare is not None:
            prepare()  # in the child only, as the module is about to run (exit_barrier.install for torchrun)
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        atexit._run_exitfuncs()
    except BaseException as exc:  # as an uncaught exception in `python -m`: traceback, exit code 1
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
        code = worker_exit_code(exc) or 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream must not keep the child alive
                stream.flush()
        os._exit(code)


def python_m_path(path: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """`sys.path` as `python -m` starts with it: the current folder first, in place of the launcher's own first
    entry (the folder of the script that started it: `bin/` for the console script); neither with safe paths
    (`-P` / PYTHONSAFEPATH, 3.11+), as the docs of sys.path and -m say. Without this, `cloudddp-launch -m pkg.mod`
    on the direct path could not import a package of the current folder, which `python -m` finds."""
    rest = list(path if getattr(sys.flags, "safe_path", False) else path[1:])
    return rest if env.get("PYTHONSAFEPATH") and sys.version_info >= (3, 11) else [os.getcwd(), *rest]


def exit_code(status: int) -> int:
    """Popen's returncode for a wait status: os.waitstatus_to_exitcode is 3.9+, and images may have 3.8."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


class ForkedModule:
    """The forked child, with Popen's `pid`, `returncode`, `poll()` and `wait(timeout)`."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None,
        before: Callable[[], None],
        prepare: Callable[[], object] | None = None,
    ) -> None:
        module, args = argv[2], list(argv[3:])
        environment = dict(os.environ if env is None else env)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # or the child would print our buffered lines a second time
        pid = os.fork()
        if pid == 0:
            _run_child(module, args, environment, before, prepare)
        self.pid = pid
        self.args = list(argv)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return self.returncode
            if pid == self.pid:
                self.returncode = exit_code(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            delay = min(delay * 2, 0.02)
            time.sleep(delay)
        assert self.returncode is not None
        return self.returncode
