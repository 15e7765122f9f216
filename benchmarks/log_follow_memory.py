"""Memory of `cloudddp launch` and `cloudddp logs` following a large node log: they read it 1 MiB at a time
(cloudddp/providers/log_tail.py).

Two cases, each reported as peak resident memory (ru_maxrss) and wall time, medians and spread over `--rounds`
runs, beside the same command over a quiet node (1 MB):

- `launch` (the issue's case): `cloudddp launch -p local --emulate none --nodes 1` of a script that prints
  `--megabytes` MB of 100-character lines as fast as it can, `launch` following the live node to its end with its
  stdout to /dev/null; the peak is the launch process's own (RUSAGE_SELF, read as it exits), not the runner's or
  the node's. Before the bounded reader, 300 MB held 953 MB in `launch` against 41 MB for a quiet job.
- `logs`: a finished local run written by hand with one node log of `--megabytes` MB; `cloudddp logs RUN` prints
  it to /dev/null in a fresh child.

    .venv/bin/python benchmarks/log_follow_memory.py --megabytes 300 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_run(root: Path, megabytes: int) -> Path:
    run = root / "runs" / "big"
    (run / "logs").mkdir(parents=True)
    (run / "state.json").write_text(json.dumps({"state": "SUCCEEDED", "launched": time.time_ns(), "nodes": {}}))
    line = ("x" * 99 + "\n").encode()
    block = line * 10_000  # 1 MB
    with open(run / "logs" / "algo-1.log", "wb") as log:
        for _ in range(megabytes):
            log.write(block)
    (run / "logs" / "algo-2.log").write_bytes(block)
    return run


def measure(run: Path) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of one `cloudddp logs RUN > /dev/null` in a fresh child."""
    code = (
        "import resource, subprocess, sys, time; started = time.monotonic(); "
        "subprocess.run([sys.executable, '-c', 'from cloudddp.console import main; main()', 'logs', sys.argv[1]], "
        "stdout=subprocess.DEVNULL, check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, time.monotonic() - started)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, check=True)
    rss, seconds = out.stdout.split()
    return float(rss), float(seconds)


PRINTER = """\
import sys
block = (b"x" * 99 + b"\\n") * 10_000  # 1 MB
for _ in range(int(sys.argv[1])):
    sys.stdout.buffer.write(block)
sys.stdout.flush()
"""

# `cloudddp launch` with its stdout to /dev/null; its own peak resident memory (KiB) on stderr as it exits.
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


def measure_launch(root: Path, megabytes: int) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of one `cloudddp launch` following a live node that prints `megabytes` MB."""
    source = root / "src"
    source.mkdir(parents=True, exist_ok=True)
    (source / "printer.py").write_text(PRINTER)
    env = {**os.environ, "CLOUDDDP_RUNS_DIR": str(root / "runs")}
    argv = [sys.executable, "-c", LAUNCH, "launch", "-p", "local", "--emulate", "none", "--nodes", "1",
            str(source / "printer.py"), str(megabytes)]  # fmt: skip
    started = time.monotonic()
    out = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False)
    seconds = time.monotonic() - started
    err = out.stderr.decode(errors="replace")
    if out.returncode != 0 or "peak-rss-kib " not in err:
        raise SystemExit(f"launch failed (exit {out.returncode}):\n{err}")
    for log in (root / "runs").glob("*/logs/*.log"):
        log.unlink()  # the next round's disk
    return int(err.rsplit("peak-rss-kib ", 1)[1].split()[0]) / 1024, seconds


def report(label: str, results: list[tuple[float, float]]) -> None:
    rss, seconds = [r[0] for r in results], [r[1] for r in results]
    print(
        f"{label}: peak RSS median {statistics.median(rss):.0f} MB (min {min(rss):.0f}, max {max(rss):.0f}); "
        f"time median {statistics.median(seconds):.1f} s (min {min(seconds):.1f}, max {max(seconds):.1f})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", choices=("launch", "logs", "both"), default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        # cloudddp's job index and contexts in the scratch folder: the benchmark's runs are not the user's jobs
        os.environ["XDG_STATE_HOME"], os.environ["XDG_CONFIG_HOME"] = f"{folder}/state", f"{folder}/config"
        if args.case in ("launch", "both"):
            for megabytes in (args.megabytes, 1):
                root = Path(folder) / f"launch-{megabytes}"
                results = [measure_launch(root, megabytes) for _ in range(args.rounds)]
                report(f"launch following a live node printing {megabytes} MB", results)
        if args.case in ("logs", "both"):
            big = write_run(Path(folder) / "big", args.megabytes)
            quiet = write_run(Path(folder) / "quiet", 1)
            for label, run in ((f"logs of a finished {args.megabytes} MB log", big), ("logs of a 1 MB log", quiet)):
                report(label, [measure(run) for _ in range(args.rounds)])


if __name__ == "__main__":
    main()
