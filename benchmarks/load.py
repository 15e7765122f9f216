"""Load: 8 local nodes rendezvous and all-reduce, job after job, with each rendezvous backend.

Each round is one `cloudddp launch --emulate none --nodes 8` of sources/allreduce_check.py (8 nodes x 1 process,
gloo on 127.0.0.1); static (`--nodes 8`) and c10d (`--nodes 8:8`) rounds alternate so drift hits both alike.
Every round must succeed with every rank all-reducing over 8; it reports per backend the median wall time of a
job, its spread (min-max) and the failures (none expected). It was the test suite's 8-node load test (10-20 rounds
per backend, 9-10 minutes); `tests/faults/test_eight_nodes_and_side_by_side_jobs.py` keeps one round of each.

    .venv/bin/python benchmarks/load.py --rounds 10
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

REPO = Path(__file__).resolve().parents[1]
CHECK = str(REPO / "sources" / "allreduce_check.py")
BACKENDS = {"static": "8", "c10d": "8:8"}


def clean_env() -> dict[str, str]:
    prefixes = ("SM_", "SLURM_", "PBS_", "PET_", "OCI__", "SKYPILOT_", "TORCHELASTIC_", "CLOUDDDP_")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def one_job(nodes: str, folder: Path) -> tuple[float, str | None]:
    """Wall seconds of one launch, and what went wrong (None: 8 rank files, each with the sum 1 + ... + 8 = 36)."""
    out = folder / "out"
    argv = [sys.executable, "-c", "from cloudddp.console import main; main()", "launch", "--emulate", "none",
            "--nodes", nodes, "--runs-dir", str(folder / "runs"), "--no-logs", CHECK, "--", "--out-dir", str(out)]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        return elapsed, f"exit {done.returncode}: {(done.stdout + done.stderr)[-500:]}"
    sums = {(r["world_size"], r["sum"]) for r in (json.loads(p.read_text()) for p in out.glob("rank*.json"))}
    if len(list(out.glob("rank*.json"))) != 8 or sums != {(8, 36.0)}:
        return elapsed, f"ranks reported {sorted(sums)}"
    return elapsed, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="jobs per rendezvous backend (default 10)")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in BACKENDS}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cloudddp-load-") as scratch:
        for round_ in range(args.rounds):
            for name, nodes in BACKENDS.items():
                elapsed, failure = one_job(nodes, Path(scratch) / f"{name}-{round_}")
                times[name].append(elapsed)
                if failure:
                    failures.append(f"{name} round {round_}: {failure}")
                print(f"{name:<6} round {round_ + 1}/{args.rounds}: {elapsed:6.1f} s {'FAILED' if failure else 'ok'}")
    print(f"\n{'backend':<8} {'jobs':>5} {'median s':>9} {'min-max s':>13} {'failed':>7}")
    for name, values in times.items():
        failed = sum(f.startswith(name) for f in failures)
        spread = f"{min(values):.1f}-{max(values):.1f}"
        print(f"{name:<8} {len(values):>5} {statistics.median(values):9.1f} {spread:>13} {failed:>7}")
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
