"""What cloudddp-launch costs over bare torchrun: a 2-node loopback all-reduce, both ways.

Runs the same job (sources/allreduce_check.py on 2 nodes x 1 process, gloo on 127.0.0.1)
through `python -m torch.distributed.run` and through `python -m cloudddp.launcher`,
alternating so drift hits both alike; reports the median wall time of each, the ratio, and
the fixed cost per job in seconds (median difference of the paired runs). A busy machine
makes every figure noisy: run it on a quiet one and look at the spread.

    .venv/bin/python benchmarks/launcher_overhead.py --runs 7
    .venv/bin/python benchmarks/launcher_overhead.py --runs 0 --fail-fast 5   # only the stop latency

`--fail-fast N` also measures how long node 0 outlives node 1 when node 1's script fails before
`init_process_group` (node 0 is then blocked in rendezvous): bare torchrun would wait for its
rendezvous timeout, cloudddp's fail-fast channel stops it within seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cloudddp.providers.local.provider import free_port

REPO = Path(__file__).resolve().parents[1]
CHECK = str(REPO / "sources" / "allreduce_check.py")


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SLURM_", "PET_", "CLOUDDDP_"))}
    env["OMP_NUM_THREADS"] = "1"  # the same for both: torchrun would set 1 anyway
    return env


def bare_torchrun(rank: int, port: int, out: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={rank}", "--nproc-per-node=1",
            "--master-addr=127.0.0.1", f"--master-port={port}", CHECK, "--out-dir", out]  # fmt: skip


def through_cloudddp(rank: int, port: int, out: str) -> list[str]:
    return [sys.executable, "-m", "cloudddp.launcher", "--provider", "standalone", "--nnodes=2", f"--node-rank={rank}",
            "--master-addr=127.0.0.1", f"--master-port={port}", CHECK, "--out-dir", out]  # fmt: skip


def timed_job(make_argv) -> float:  # type: ignore[no-untyped-def]
    port = free_port()
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        procs = [subprocess.Popen(make_argv(rank, port, out), env=base_env(), cwd=REPO,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for rank in range(2)]  # fmt: skip
        codes = [p.wait(timeout=300) for p in procs]
        elapsed = time.perf_counter() - started
    if codes != [0, 0]:
        raise SystemExit(f"a run failed with exit codes {codes}")
    return elapsed


def stop_latency() -> float:
    """Seconds between node 1's failure (its launcher exits) and node 0's launcher exiting."""
    port = free_port()
    with tempfile.TemporaryDirectory() as out:
        argv = [[*through_cloudddp(rank, port, out), "--fail-rank", "1"] for rank in range(2)]
        procs = [subprocess.Popen(a, env=base_env(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for a in argv]  # fmt: skip
        ended: dict[int, float] = {}
        deadline = time.monotonic() + 300
        while len(ended) < 2 and time.monotonic() < deadline:
            for rank, proc in enumerate(procs):
                if rank not in ended and proc.poll() is not None:
                    ended[rank] = time.monotonic()
            time.sleep(0.01)
    if len(ended) < 2 or procs[1].returncode == 0:
        raise SystemExit(f"the fail-fast run did not end as expected: {[p.returncode for p in procs]}")
    return ended[0] - ended[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--fail-fast", type=int, default=0, metavar="N", help="also measure the stop latency N times")
    args = parser.parse_args()
    if args.fail_fast:
        latencies = [stop_latency() for _ in range(args.fail_fast)]
        print(f"fail-fast stop latency (node 0 after node 1 failed before init), {args.fail_fast} runs: "
              f"median {statistics.median(latencies):.2f} s (min {min(latencies):.2f}, max {max(latencies):.2f})")  # fmt: skip
    if args.runs < 1:
        return
    timed_job(bare_torchrun)  # warm the page cache for torch's import
    bare, ours = [], []
    for _ in range(args.runs):
        bare.append(timed_job(bare_torchrun))
        ours.append(timed_job(through_cloudddp))
    median_bare, median_ours = statistics.median(bare), statistics.median(ours)
    print(f"runs each: {args.runs} (alternating)")
    print(f"bare torchrun:    median {median_bare:.3f} s  (min {min(bare):.3f}, max {max(bare):.3f})")
    print(f"cloudddp-launch:  median {median_ours:.3f} s  (min {min(ours):.3f}, max {max(ours):.3f})")
    print(f"ratio cloudddp/bare: {median_ours / median_bare:.3f}")
    paired = [o - b for o, b in zip(ours, bare, strict=True)]
    print(
        f"fixed cost per job: median {statistics.median(paired):+.3f} s (min {min(paired):+.3f}, max {max(paired):+.3f})"
    )
    imports = subprocess.run([sys.executable, "-X", "importtime", "-c", "import cloudddp.launcher"],
                             capture_output=True, text=True, cwd=REPO).stderr  # fmt: skip
    roots = {line.split("|")[-1].strip().split(".")[0] for line in imports.splitlines() if "|" in line}
    sdks = sorted(roots & {"boto3", "botocore", "sagemaker", "oci", "kubernetes", "torch"})
    total_us = next(int(line.split("|")[1]) for line in imports.splitlines()
                    if "|" in line and line.split("|")[-1].strip() == "cloudddp.launcher")  # fmt: skip
    print(
        f"import cloudddp.launcher: cloud SDK / torch modules loaded: {sdks or 'none'}; "
        f"cloudddp's own cumulative import time {total_us / 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
