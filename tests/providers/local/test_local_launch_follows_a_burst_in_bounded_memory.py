"""`cloudddp launch` following a live local node that prints ~50 MB at once holds a bounded amount of memory
(issue 34: a 300 MB burst held 953 MB in `launch`, against 41 MB for a quiet job).

The follower (LocalProvider.console -> node_lines -> cloudddp/providers/log_tail.py) reads the node log 1 MiB at a
time. How much output lands between two polls depends on the machine's speed, so the test makes it all land at
once: `launch` is stopped (SIGSTOP) while the node prints its 50 MB and the runner's log pump writes them, and
continued once the log holds all of it. A reader that takes every unread byte per poll then holds the 50 MB as
bytes, as text and as lines (>= 100 MB more than a quiet launch); the bounded reader holds ~1 MiB of it.
The launch process's own peak (VmHWM in /proc/self/status) is read as it exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import REPO, clean_env
from test_local_cancel_latest import job_pids, kill_tree

MEGABYTES = 50
# A quiet local launch peaks at ~45 MB here, the bounded follower of the burst at ~50 MB; the old reader at
# >= 145 MB (the burst held as bytes and as text at once, on top of the quiet launch).
PEAK_BOUND_MB = 100

BURST = f"""\
import os, pathlib, sys, time
gate = pathlib.Path(os.environ["GATE"])
(gate / "ready").write_text("")
deadline = time.monotonic() + 60
while not (gate / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
block = (b"x" * 999 + b"\\n") * 1000  # 1 MB
for _ in range({MEGABYTES}):
    sys.stdout.buffer.write(block)
sys.stdout.flush()
(gate / "done").write_text("")
"""

# `cloudddp launch` with its stdout to /dev/null (the test must not hold the 50 MB either); its own peak resident
# memory on stderr as it exits.
LAUNCH = """\
import os, resource
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
try:
    from cloudddp.console import main
    main()
finally:
    # VmHWM: this process's own peak. Not getrusage's ru_maxrss, which Linux carries across execve from the forked
    # parent's pages (a test worker of 800 MB made a 45 MB launch report 868 MB).
    peak = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    os.write(2, b"peak-rss-kib %s\\n" % peak.encode())
"""


def wait_for(condition: Callable[[], bool], seconds: float, what: str, launch: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        if launch.poll() is not None:
            err = launch.stderr.read() if launch.stderr else b""
            raise AssertionError(f"launch ended (exit {launch.returncode}) before {what}: {err!r}")
        time.sleep(0.05)


@pytest.mark.process
def test_launch_follows_a_50_mb_burst_in_bounded_memory(tmp_path: Path) -> None:
    source, gate, runs = tmp_path / "src", tmp_path / "gate", tmp_path / "runs"
    source.mkdir()
    gate.mkdir()
    (source / "burst.py").write_text(BURST)
    env = clean_env({"CLOUDDDP_RUNS_DIR": str(runs)})
    argv = [sys.executable, "-c", LAUNCH, "launch", "-p", "local", "--emulate", "none", "--nodes", "1",
            "-e", f"GATE={gate}", str(source / "burst.py")]  # fmt: skip
    launch = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (gate / "ready").exists(), 120, "the node to start", launch)
        log = next(runs.glob("*/logs/*.log"))
        launch.send_signal(signal.SIGSTOP)  # the follower reads nothing while the burst is written
        try:
            (gate / "go").write_text("")
            wait_for(
                lambda: (gate / "done").exists() and log.stat().st_size >= MEGABYTES * 1_000_000, 60,
                "the burst to be in the node log", launch,
            )  # fmt: skip
        finally:
            launch.send_signal(signal.SIGCONT)
        _, err = launch.communicate(timeout=120)
    finally:
        if launch.poll() is None:
            launch.kill()
            launch.wait()
        kill_tree(job_pids(next(runs.iterdir()), tmp_path / "none") if runs.is_dir() else [])
    text = err.decode(errors="replace")
    assert launch.returncode == 0, text
    peak_mb = int(text.rsplit("peak-rss-kib ", 1)[1].split()[0]) / 1024
    assert peak_mb < PEAK_BOUND_MB, f"launch peaked at {peak_mb:.0f} MB following a {MEGABYTES} MB burst"
    with contextlib.suppress(OSError):
        os.remove(log)  # 50 MB: not kept in pytest's folders
