"""Run one child (torchrun) and make sure the whole job ends with it.

- torchrun (`python -m torch.distributed.run`) starts as a fork of this interpreter
  (`forked.py`), which saves a second interpreter's start-up; other commands are exec'd.
- The child gets its own session, so a Ctrl-C in the terminal reaches only us and we
  decide what to forward.
- SIGTERM/SIGINT go to torchrun, which passes them to its workers and waits for them
  (SageMaker stop, spot interruption, Slurm preemption: the script can checkpoint).
- SIGUSR1/SIGUSR2 go to the workers themselves (torchrun's direct children): torchrun
  does not handle them and would die of them.
- When another node has failed (the fail-fast channel), the job is lost: torchrun gets
  SIGTERM, and `abort_grace` seconds later every descendant gets SIGKILL. torchrun itself
  would wait 30 s for a worker blocked in rendezvous or a collective (a SIGTERM handler
  in the script cannot run there), and the node would outlive the failure by that much.
- torchrun puts every worker in a session of its own, so killing one process group
  is not enough. We become a child subreaper: whatever torchrun leaves behind is
  re-parented to us, and at exit we terminate every descendant, then SIGKILL it after
  a grace period.
- As the subreaper we are also the parent of every orphan that exits during the run (a
  script that runs `cmd &` each step leaves one a step): the wait loop reaps those zombies
  about once a second, or a long run would fill the pod's or cgroup's PID limit (and as a
  container's PID 1 nothing else would ever reap them). It never reaps the child we started:
  its status is Popen's (or ForkedModule's) to collect, or the exit code would be lost.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence

from cloudddp.launcher.forked import ForkedModule, forkable

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
TERMINATING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
NOTIFYING = (signal.SIGUSR1, signal.SIGUSR2)
ABORT_GRACE = 2.0  # seconds between SIGTERM and SIGKILL once another node has failed
POLL_SECONDS = 0.05  # how often the wait loop looks at deadlines; exit is noticed at once
REAP_SECONDS = 1.0  # how often the wait loop reaps exited orphans (a few small /proc reads each time)


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent() -> None:
    """In the child, before exec: get SIGTERM if its parent (the launcher, the local runner) is killed; a parent
    already gone by then (reparented) means the same."""
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, pgrp, session, ...); None where it is not there.
    The command name may hold spaces or parentheses: parsed after the last ")"."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def _children_map(zombies: set[int] | None = None) -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc; zombies are collected into `zombies`."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        fields = _stat_fields(entry) if entry.isdigit() else None
        if fields is None:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        if zombies is not None and fields[0] == b"Z":
            zombies.add(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    """Every live (non-zombie) process below `pid`, parents before children."""
    if not os.path.isdir("/proc"):
        return []
    zombies: set[int] = set()
    children = _children_map(zombies)
    found: list[int] = []
    queue = list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        if child not in zombies:
            found.append(child)
        queue.extend(children.get(child, []))
    return found


def is_running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a zombie still answers kill(0); it is done)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat_fields(pid)
    return not fields or fields[0] != b"Z"  # no /proc (not Linux): kill(0) said it exists


def _signal_all(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _reap_orphans() -> None:
    """Collect exit statuses of re-parented orphans so they don't linger as zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _own_children() -> list[int]:
    """Our child pids (zombies included). Every thread's list: an orphan goes to any live thread of ours."""
    me = os.getpid()
    if not os.path.exists(f"/proc/{me}/task/{me}/children"):  # a kernel without CONFIG_PROC_CHILDREN
        return _children_map().get(me, [])
    found: list[int] = []
    for task in os.listdir(f"/proc/{me}/task"):
        # A thread that has just ended has no file any more.
        with contextlib.suppress(OSError), open(f"/proc/{me}/task/{task}/children", "rb") as handle:
            found.extend(int(pid) for pid in handle.read().split())
    return found


def _job_zombie(pid: int, me: int, my_session: int) -> bool:
    """True for a zombie child of ours from outside our session: a process of the job's tree.

    The child we start gets a session of its own and nothing below it can ever join ours (setsid only makes
    new ones), so a zombie in our session is a process the launcher itself started (in another thread, say):
    its status belongs to whoever started it."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] == b"Z" and int(fields[1]) == me and int(fields[3]) != my_session


def reap_job_orphans(keep: Collection[int]) -> list[int]:
    """Reap the exited orphans of the job re-parented to us, never a pid in `keep`; return their pids.

    Each pid is reaped with its own waitpid, never waitpid(-1): that could take the exit status of the
    child in `keep` (the running torchrun) from Popen, which would then report 0. A zombie child of ours
    stays until we reap it, so its pid cannot be reused between the check and the waitpid."""
    if not sys.platform.startswith("linux"):
        return []  # no subreaper elsewhere (see _prctl): orphans are not ours to reap
    me, my_session = os.getpid(), os.getsid(0)
    reaped: list[int] = []
    for pid in _own_children():
        if pid in keep or not _job_zombie(pid, me, my_session):
            continue
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped.append(pid)
    return reaped


def shell_exit_code(returncode: int) -> int:
    """Shell convention: a death by signal N reads as 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class Supervisor:
    """Runs `argv` to completion with signal forwarding and full cleanup."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        grace_period: float = 30.0,
        workers_are_grandchildren: bool = True,
        abort_grace: float = ABORT_GRACE,
        prepare: Callable[[], object] | None = None,
    ) -> None:
        """`prepare`: run in a forked child just before its module (only where the child is forked)."""
        self.argv = list(argv)
        self.prepare = prepare
        self.env = dict(env) if env is not None else None
        self.grace_period = grace_period
        self.workers_are_grandchildren = workers_are_grandchildren
        self.proc: subprocess.Popen[bytes] | ForkedModule | None = None
        self.received: int | None = None
        self.kill_deadline: float | None = None
        self.abort_reason: str | None = None
        self.abort_code: int | None = None
        self.abort_grace = abort_grace

    def _on_signal(self, signum: int, _frame: object) -> None:
        proc = self.proc
        if proc is None and signum in TERMINATING and self.received is None:
            self.received = signum  # arrived while the child is being started: run() passes it on
            return
        if proc is None or proc.poll() is not None:
            return
        if signum in NOTIFYING:
            targets = self._workers() if self.workers_are_grandchildren else [proc.pid]
            _signal_all(targets, signum)
            return
        first = self.received is None
        self.received = signum
        _signal_all([proc.pid], signum)
        if first:
            self.kill_deadline = time.monotonic() + self.grace_period

    def abort(self, reason: str, code: int | None = None) -> None:
        """Stop the job because another node failed (exit code `code`, which `run` then returns). Thread-safe."""
        proc = self.proc
        if proc is None or proc.poll() is not None or self.abort_reason is not None:
            return
        if self.received is not None:
            # Already stopping on a signal of our own (the whole job is being stopped: spot reclaim,
            # cancel): keep its grace period, or rank 0's checkpoint could be killed half-written.
            return
        self.abort_reason, self.abort_code = reason, code
        _signal_all([proc.pid], signal.SIGTERM)
        self.kill_deadline = time.monotonic() + min(self.abort_grace, self.grace_period)

    def _workers(self) -> list[int]:
        assert self.proc is not None
        return _children_map().get(self.proc.pid, [])

    def run(self, on_start: Callable[[], None] | None = None) -> int:
        """Start the child, wait for it, clean up everything below us; return the exit code."""
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (*TERMINATING, *NOTIFYING)}
        try:
            if forkable(self.argv):  # `python -m torch.distributed.run`: skip a second interpreter's start-up
                self.proc = self._fork()
            else:
                self.proc = subprocess.Popen(
                    self.argv, env=self.env, start_new_session=True, preexec_fn=die_with_parent
                )
            if self.received is not None:  # a stop that came while the child was starting is not lost
                _signal_all([self.proc.pid], self.received)
                self.kill_deadline = time.monotonic() + self.grace_period
            if on_start:
                on_start()
            returncode = self._wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.cleanup()
        if self.received is not None:
            return 128 + self.received
        if self.abort_reason is not None:  # stopped on purpose: the job failed elsewhere, with that node's code
            return self.abort_code or shell_exit_code(returncode) or 1
        return shell_exit_code(returncode)

    def _fork(self) -> ForkedModule:
        """The forked child runs our Python handler until it installs its own (forked.py `_run_child`): a stop
        reaching it then was taken by that handler's copy, with no child to pass it to, and lost. Blocked over
        the fork, a stop sent to the child waits there until its handlers are the default ones and it unblocks
        them; one sent to us waits until the fork is done, and is then recorded and passed on as before (run)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, TERMINATING)
        try:
            return ForkedModule(self.argv, self.env, before=die_with_parent, prepare=self.prepare)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, TERMINATING)

    def _wait(self) -> int:
        assert self.proc is not None
        next_reap = time.monotonic() + REAP_SECONDS
        while True:
            try:
                return self.proc.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                if time.monotonic() >= next_reap:  # zombies of a long run: see the module's docstring
                    reap_job_orphans(keep={self.proc.pid})
                    next_reap = time.monotonic() + REAP_SECONDS
                if self.kill_deadline is not None and time.monotonic() > self.kill_deadline:
                    # torchrun did not stop within the grace period: stop everything now.
                    _signal_all([*descendants(os.getpid())], signal.SIGKILL)
                    self.kill_deadline = time.monotonic() + 1.0  # again later only if something survived

    def cleanup(self, term_wait: float = 5.0) -> None:
        """Terminate whatever is left below us: SIGTERM, then SIGKILL after `term_wait`."""
        me = os.getpid()
        left = descendants(me)
        if left:
            _signal_all(left, signal.SIGTERM)
            deadline = time.monotonic() + term_wait
            while time.monotonic() < deadline:
                _reap_orphans()
                left = descendants(me)
                if not left:
                    break
                time.sleep(0.05)
            _signal_all(descendants(me), signal.SIGKILL)
        _reap_orphans()
