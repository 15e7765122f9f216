"""Supervision without torch: exit codes, signal forwarding, and nothing left behind."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import PYTHON, REPO, clean_env

from cloudddp.launcher import supervisor
from cloudddp.launcher.supervisor import Supervisor, descendants, is_running

# A training script that runs `cmd &` on every step: each backgrounded command is orphaned when its shell exits,
# re-parented to the launcher (the child subreaper), and exits soon after.
SPAWN_ORPHANS = textwrap.dedent("""
    import subprocess
    def orphans(count):
        shell = "sleep 0.01 >/dev/null 2>&1 & echo $!"
        return [int(subprocess.run(shell, shell=True, capture_output=True, text=True).stdout) for _ in range(count)]
""")


@pytest.mark.process
def test_exit_code_is_the_childs() -> None:
    assert Supervisor([sys.executable, "-c", "raise SystemExit(7)"]).run() == 7


@pytest.mark.process
def test_death_by_signal_reads_as_128_plus_the_signal() -> None:
    assert Supervisor([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]).run() == 137


@pytest.mark.process
def test_orphans_in_their_own_session_are_terminated_when_the_child_exits(tmp_path: Path) -> None:
    # Like torchrun's workers: a grandchild in a new session, outliving its parent.
    pidfile = tmp_path / "grandchild.pid"
    code = textwrap.dedent(f"""
        import subprocess, sys
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        open({str(pidfile)!r}, "w").write(str(p.pid))
    """)
    assert Supervisor([sys.executable, "-c", code]).run() == 0
    grandchild = int(pidfile.read_text())
    assert not is_running(grandchild)
    assert descendants(os.getpid()) == []


@pytest.mark.process
def test_sigterm_reaches_the_child_and_the_launcher_exits_143(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent(f"""
        import signal, sys, time
        def stop(signum, frame):
            open({str(marker)!r}, "w").write(str(signum))
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(60)
    """)
    )
    runner = textwrap.dedent(f"""
        import sys
        from cloudddp.launcher.supervisor import Supervisor
        sys.exit(Supervisor([sys.executable, {str(script)!r}], workers_are_grandchildren=False).run())
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert marker.read_text() == str(int(signal.SIGTERM))


@pytest.mark.process
def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    runner = textwrap.dedent("""
        import sys
        from cloudddp.launcher.supervisor import Supervisor
        child = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"
        sys.exit(Supervisor([sys.executable, "-c", child], grace_period=1.0, workers_are_grandchildren=False).run())
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert time.monotonic() - started < 10


def zombie_children(pid: int) -> int:
    """How many zombies `pid` has as children right now, from /proc."""
    count = 0
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state, ppid, ...
        count += fields[0] == b"Z" and int(fields[1]) == pid
    return count


def assert_zombies_go_while_running(launcher: subprocess.Popen[str], timeout: float = 20.0) -> None:
    """The launcher's zombie children drop to none while its job still runs (reaped every second or so)."""
    deadline = time.monotonic() + timeout
    while (zombies := zombie_children(launcher.pid)) > 0:
        assert time.monotonic() < deadline, f"{zombies} zombie children of the launcher after {timeout} s"
        time.sleep(0.2)
    assert launcher.poll() is None, "the job ended before its orphans were reaped: nothing was tested"


def read_until(proc: subprocess.Popen[str], text: str, timeout: float = 120.0) -> str:
    """Output lines of `proc` until one holds `text` (a deadline, not a blocking read, if it never comes)."""
    assert proc.stdout is not None
    seen, deadline = "", time.monotonic() + timeout
    while text not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen
        if select.select([proc.stdout], [], [], 1)[0]:
            seen += proc.stdout.readline()
    return seen


def stop(proc: subprocess.Popen[str]) -> None:
    """After a failed assertion: SIGTERM lets the launcher clean up its job (SIGKILL would leave it running)."""
    if proc.poll() is None:
        proc.terminate()
        proc.communicate(timeout=60)


@pytest.mark.process
def test_reaping_takes_exited_job_processes_but_never_the_kept_child_nor_one_of_our_session() -> None:
    kept = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"], start_new_session=True)  # torchrun
    job = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)  # an orphan
    ours = subprocess.Popen([sys.executable, "-c", "raise SystemExit(5)"])  # started by the launcher itself
    deadline = time.monotonic() + 20
    while any(map(is_running, (kept.pid, job.pid, ours.pid))):  # all three zombies, statuses not yet collected
        assert time.monotonic() < deadline
        time.sleep(0.05)
    reaped = supervisor.reap_job_orphans(keep={kept.pid})
    assert job.pid in reaped and kept.pid not in reaped and ours.pid not in reaped
    assert kept.wait(timeout=5) == 7 and ours.wait(timeout=5) == 5  # their statuses are intact
    assert job.wait(timeout=5) == 0  # Popen's answer when someone else took the status: why torchrun is kept


@pytest.mark.process
def test_orphans_that_exit_during_the_run_are_reaped_while_it_goes_on(tmp_path: Path) -> None:
    script = tmp_path / "background_steps.py"
    script.write_text(SPAWN_ORPHANS + "orphans(100)\nprint('ready', flush=True)\ninput()\nraise SystemExit(7)\n")
    runner = textwrap.dedent(f"""
        import sys
        from cloudddp.launcher.supervisor import Supervisor
        sys.exit(Supervisor([sys.executable, {str(script)!r}], workers_are_grandchildren=False).run())
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        read_until(proc, "ready", timeout=60)
        assert_zombies_go_while_running(proc)
        proc.communicate("go\n", timeout=30)  # the script exits 7 now
        assert proc.returncode == 7
    finally:
        stop(proc)


@pytest.mark.process
@pytest.mark.parametrize("started", ["exec", "fork"])  # Popen, or ForkedModule as for torchrun (`python -m`)
def test_the_exit_code_is_kept_while_orphans_are_reaped_up_to_the_end(tmp_path: Path, started: str) -> None:
    # The script waits until the launcher has reaped its first orphans (exit 99 if it never does), then makes
    # more that exit around its own exit: the launcher must still report exactly the script's 7.
    (tmp_path / "background_steps.py").write_text(
        SPAWN_ORPHANS
        + textwrap.dedent("""
        import os, sys, time
        def zombie_of_launcher(pid):
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                return False
            return fields[0] == "Z" and int(fields[1]) == os.getppid()
        first, deadline = orphans(50), time.monotonic() + 20
        while any(map(zombie_of_launcher, first)):
            if time.monotonic() > deadline:
                sys.exit(99)
            time.sleep(0.1)
        orphans(20)
        sys.exit(7)
    """)
    )
    argv = [sys.executable, "-m", "background_steps"] if started == "fork" else [sys.executable, "background_steps.py"]
    runner = f"import sys; from cloudddp.launcher.supervisor import Supervisor; sys.exit(Supervisor({argv!r}).run())"
    result = subprocess.run([sys.executable, "-c", runner], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                            timeout=60)  # fmt: skip
    assert result.returncode == 7


@pytest.mark.slow
def test_the_real_launcher_reaps_the_orphans_of_a_script_while_it_runs(tmp_path: Path) -> None:
    release = tmp_path / "release"
    script = tmp_path / "background_steps.py"
    script.write_text(
        SPAWN_ORPHANS
        + textwrap.dedent(f"""
        import pathlib, sys, time
        orphans(200)
        print("ready", flush=True)
        deadline = time.monotonic() + 120
        while not pathlib.Path({str(release)!r}).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        sys.exit(7)
    """)
    )
    proc = subprocess.Popen([PYTHON, "-m", "cloudddp.launcher", "--nproc-per-node", "1", str(script)], cwd=REPO,
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        read_until(proc, "ready")
        assert_zombies_go_while_running(proc)
        release.touch()
        output = proc.communicate(timeout=60)[0]
        assert proc.returncode == 7, output
    finally:
        stop(proc)
