"""Supervision without torch: exit codes, signal forwarding, and nothing left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from cloudddp.launcher.supervisor import Supervisor, descendants, is_running


def test_exit_code_is_the_childs() -> None:
    assert Supervisor([sys.executable, "-c", "raise SystemExit(7)"]).run() == 7


def test_death_by_signal_reads_as_128_plus_the_signal() -> None:
    assert Supervisor([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]).run() == 137


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
