"""Memory of `cloudddp logs` over a large node log: it reads 1 MiB at a time (cloudddp/providers/log_tail.py).

A finished local run is written by hand with one node log of `--megabytes` MB (100-character lines) and a quiet
one of 1 MB; `cloudddp logs RUN` prints them to /dev/null in a child process, whose peak resident memory
(ru_maxrss) and wall time are reported, medians and spread over `--rounds` runs. Before the bounded reader, a
300 MB burst held 953 MB in `launch` against 41 MB for a quiet job.

    .venv/bin/python benchmarks/log_follow_memory.py --megabytes 300 --rounds 3
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        big = write_run(Path(folder) / "big", args.megabytes)
        quiet = write_run(Path(folder) / "quiet", 1)
        for label, run in ((f"{args.megabytes} MB log", big), ("1 MB log", quiet)):
            results = [measure(run) for _ in range(args.rounds)]
            rss, seconds = [r[0] for r in results], [r[1] for r in results]
            print(
                f"{label}: peak RSS median {statistics.median(rss):.0f} MB (min {min(rss):.0f}, max {max(rss):.0f}); "
                f"time median {statistics.median(seconds):.1f} s (min {min(seconds):.1f}, max {max(seconds):.1f})"
            )


if __name__ == "__main__":
    main()
