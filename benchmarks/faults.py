"""What a lost node costs: time to fail (static job) and time to recover (elastic job).

- **static**: 3 nodes x 1 process (`sources/allreduce_check.py`, `--emulate none`) all-reduce, then
  every process of node 1 is SIGKILLed; measured: kill -> no process of the job left.
- **elastic**: 3 nodes of `--nodes 2:3` train the tiny model of `sources/train_ddp.py` with a
  checkpoint every step; every process of node 2 is SIGKILLed at step 6; measured: kill -> the first
  training step of the re-formed two-node job (rank 0's `step=` line after `world_size=2`).

Runs go one after the other through `cloudddp launch -p local`, as the fault tests do
(tests/faults/jobs.py finds and kills a node's processes). Prints each run, the median and the spread.

    .venv/bin/python benchmarks/faults.py --runs 5
    .venv/bin/python benchmarks/faults.py --runs 5 --only static
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def _load_fault_helpers() -> ModuleType:
    """tests/faults/jobs.py, by path: a package named `faults` would be this very script."""
    spec = importlib.util.spec_from_file_location("fault_jobs", REPO / "tests" / "faults" / "jobs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


jobs = _load_fault_helpers()
job_processes, kill_node, lines_matching = jobs.job_processes, jobs.kill_node, jobs.lines_matching
log_text, run_folder, wait_for = jobs.log_text, jobs.run_folder, jobs.wait_for

STEP_AFTER_RESUME = re.compile(r"world_size=2\n(?:.*\n)*?step=(\d+) ", re.M)


def launch(runs: Path, *args: str) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SLURM_", "PET_", "CLOUDDDP_"))}
    done = subprocess.run(
        [sys.executable, "-c", "from cloudddp.console import main; main()", "launch", "--emulate", "none",
         "--runs-dir", str(runs), "--no-wait", *args],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return run_folder(done.stdout)


def stop(run: Path) -> None:
    """Kill what is left of the job, then wait for the detached runner to record it and exit."""
    for pid in job_processes(run):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    runner = int((run / "runner.pid").read_text())
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not jobs.alive(runner), 30, "the runner to exit")


def static_time_to_fail(workdir: Path) -> float:
    run = launch(workdir / "runs", "--nodes", "3", str(REPO / "sources" / "allreduce_check.py"), "--",
                 "--out-dir", str(workdir / "out"), "--sleep", "300")  # fmt: skip
    try:
        wait_for(lambda: len(lines_matching(run, r"all_reduce sum=6 ")) == 3, 300, "the all-reduce")
        kill_node(run, "node-1")
        return wait_for(lambda: not job_processes(run), 60, "every process to end", poll=0.02)
    finally:
        stop(run)


def elastic_time_to_recover(workdir: Path, data: Path) -> float:
    run = launch(workdir / "runs", "--nodes", "2:3", "--max-restarts", "3", "-i", f"train={data}",
                 "--checkpoint", str(workdir / "ckpt"), str(REPO / "sources" / "train_ddp.py"), "--",
                 "--arch", "tiny", "--epochs", "3", "--image-size", "16", "--batch-size", "8",
                 "--log-steps", "--checkpoint-every", "1", "--step-sleep", "0.5")  # fmt: skip
    try:
        wait_for(lambda: "step=6 " in log_text(run), 300, "step 6", poll=0.05)
        kill_node(run, "node-2")
        return wait_for(lambda: STEP_AFTER_RESUME.search(log_text(run)), 300, "a step after re-forming", 0.05)
    finally:
        stop(run)


def measure(name: str, runs: int, once: Callable[[Path], float]) -> None:
    times = []
    for index in range(runs):
        with tempfile.TemporaryDirectory(prefix="cloudddp-faults-", ignore_cleanup_errors=True) as tmp:
            times.append(once(Path(tmp)))
        print(f"{name} run {index + 1}: {times[-1]:.2f} s", flush=True)
    spread = f"min {min(times):.2f} s, max {max(times):.2f} s"
    print(f"{name}: median {statistics.median(times):.2f} s over {runs} runs ({spread})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=("static", "elastic"))
    args = parser.parse_args()
    if args.only != "elastic":
        measure("static: kill -> every node stopped", args.runs, static_time_to_fail)
    if args.only != "static":
        from cloudddp.demo_data import write_demo_dataset

        with tempfile.TemporaryDirectory(prefix="cloudddp-faults-data-") as data:
            write_demo_dataset(Path(data), train_per_class=48, val_per_class=16)
            measure("elastic: kill -> first step after re-forming", args.runs,
                    lambda tmp: elastic_time_to_recover(tmp, Path(data)))  # fmt: skip
    return 0


if __name__ == "__main__":
    started = time.monotonic()
    code = main()
    print(f"total {time.monotonic() - started:.0f} s")
    sys.exit(code)
