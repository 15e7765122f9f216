"""A 2-second multi-node smoke test: one gloo all-reduce across every process.

Each process contributes rank+1; the sum must be world*(world+1)/2 on every rank.
Rank-local results go to --out-dir as JSON (one file per global rank) so tests can
check every node. Exit code 3 (or any) on request to exercise failure handling:
--fail-rank R --fail-code C makes global rank R exit with C before the all-reduce.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", default=os.environ.get("CLOUDDDP_CHECK_DIR", "."))
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-code", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds to wait after the all-reduce")
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    rank = int(os.environ["RANK"])

    def on_term(signum: int, _frame: object) -> None:
        (out / f"signal-rank{rank}.txt").write_text(f"{signum}\n")
        # Not sys.exit: Python's shutdown with the process group still up can hang or abort in gloo's threads
        # (pytorch/pytorch#190489), keeping torchrun waiting for this worker after a stop.
        sys.stdout.flush()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, lambda s, f: (out / f"usr1-rank{rank}.txt").write_text("usr1\n"))
    (out / f"pid-rank{rank}.txt").write_text(f"{os.getpid()}\n")

    import torch
    import torch.distributed as dist

    if rank == args.fail_rank:
        print(f"rank {rank}: failing on purpose with exit code {args.fail_code}", flush=True)
        return args.fail_code
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    result = {
        "rank": rank,
        "world_size": world,
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "group_rank": int(os.environ.get("GROUP_RANK", -1)),
        "sum": value.item(),
        "expected": world * (world + 1) / 2,
        "master_addr": os.environ.get("MASTER_ADDR"),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    print(f"rank {rank}/{world}: all_reduce sum={value.item():g} (expected {result['expected']:g})", flush=True)
    deadline = time.monotonic() + args.sleep
    while time.monotonic() < deadline:
        time.sleep(0.1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without Python's shutdown: torch 2.14's gloo worker threads can still be releasing the last
    # collective then, and abort a finished run with SIGABRT (pytorch/pytorch#190489).
    sys.stdout.flush()
    os._exit(code)
