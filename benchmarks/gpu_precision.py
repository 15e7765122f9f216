"""Mixed precision against fp32 on the GPU: sources/train_ddp.py through the local provider, nccl.

Writes a two-class demo dataset, then runs the same job (`cloudddp launch --provider local`, ResNet-18,
batch 16 per process, the seed guides' setting) with each `--precision`, alternating the order every round
so drift hits both alike. A run's figure is the median images/s of its epochs after the first (the first
pays cuDNN's autotuning and the workers' start). Prints the median over runs with its min-max, the paired
ratio to the first precision named, and each run's backend, precision and last val_acc as the script
logged them. Needs a CUDA GPU; on one GPU the job is 1 node x 1 process, which still runs DDP over nccl.

    python benchmarks/gpu_precision.py --runs 3 --epochs 4 --images-per-class 4000 --workers 8
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EPOCH = re.compile(r"\bepoch=(\d+)/\d+ .*?\bimages_per_sec=([\d.]+)")
VAL_ACC = re.compile(r"\bval_acc=([\d.]+)")
SETUP = re.compile(r"world_size=(\d+), batch=(\d+)/process, device=(\w+), precision=(\w+)")
BACKEND = re.compile(r"\bbackend=(\w+)")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--precisions", default="fp32,auto", help="comma-separated --precision values; ratios to the first")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=224, help="the hymenoptera seed's 224")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--images-per-class", type=int, default=4000)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--nproc-per-node", type=int, default=1)
    p.add_argument("--json", type=Path, help="also write every run's figures here")
    return p.parse_args()


def one_run(args: argparse.Namespace, data: Path, runs_dir: Path, precision: str) -> dict[str, object]:
    argv = [sys.executable, "-c", "from cloudddp.console import main; main()", "launch", "--provider", "local", "--runs-dir", str(runs_dir),
            "--nodes", str(args.nodes), "--nproc-per-node", str(args.nproc_per_node), "-i", f"train={data}",
            "sources/train_ddp.py", "--", "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
            "--image-size", str(args.image_size), "--workers", str(args.workers), "--precision", precision,
            "--no-resume"]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"--precision {precision}: the job failed with exit code {done.returncode}:\n{done.stdout[-4000:]}"
                 f"\n{done.stderr[-4000:]}")  # fmt: skip
    epochs = {int(e): float(rate) for e, rate in EPOCH.findall(done.stdout)}
    later = [rate for e, rate in sorted(epochs.items()) if e > 1] or list(epochs.values())
    setup, backend, accs = SETUP.search(done.stdout), BACKEND.search(done.stdout), VAL_ACC.findall(done.stdout)
    return {
        "precision_asked": precision, "images_per_sec": statistics.median(later), "epochs": epochs,
        "wall_s": round(wall, 1), "val_acc": float(accs[-1]) if accs else None,
        "world_size": int(setup.group(1)) if setup else None, "device": setup.group(3) if setup else None,
        "precision": setup.group(4) if setup else None, "backend": backend.group(1) if backend else None,
    }  # fmt: skip


def report(precisions: list[str], runs: list[dict[str, dict[str, object]]]) -> None:
    anchor = precisions[0]
    for precision in precisions:
        rates = [float(r[precision]["images_per_sec"]) for r in runs]  # type: ignore[arg-type]
        used = {str(r[precision]["precision"]) for r in runs}
        backends = {str(r[precision]["backend"]) for r in runs}
        accs = [r[precision]["val_acc"] for r in runs]
        line = (f"--precision {precision:5} ({'/'.join(sorted(used))}, {'/'.join(sorted(backends))}): median "
                f"{statistics.median(rates):8.1f} images/s (min {min(rates):.1f}, max {max(rates):.1f}); val_acc {accs}")  # fmt: skip
        if precision != anchor:
            ratios = [float(r[precision]["images_per_sec"]) / float(r[anchor]["images_per_sec"]) for r in runs]  # type: ignore[arg-type]
            line += f"; ratio to {anchor}: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})"
        print(line, flush=True)


def main() -> None:
    args = parse_args()
    import torch  # the benchmark's own check; the launch itself needs no torch in this process

    if not torch.cuda.is_available():
        sys.exit("gpu_precision.py needs a CUDA GPU: torch.cuda.is_available() is False on this machine")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)} x {torch.cuda.device_count()}", flush=True)
    from cloudddp.demo_data import write_demo_dataset

    precisions = args.precisions.split(",")
    runs: list[dict[str, dict[str, object]]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-precision-") as work:
        data = Path(work) / "data"
        write_demo_dataset(data, train_per_class=args.images_per_class, val_per_class=64, seed=0)
        for round_ in range(args.runs):
            order = precisions if round_ % 2 == 0 else precisions[::-1]
            results = {p: one_run(args, data, Path(work) / f"runs-{round_}-{p}", p) for p in order}
            for p in order:
                r = results[p]
                print(f"round {round_ + 1} --precision {p}: {r['images_per_sec']:.1f} images/s ({r['precision']}, "
                      f"{r['backend']}, world {r['world_size']}), per epoch {r['epochs']}, wall {r['wall_s']} s, "
                      f"val_acc {r['val_acc']}", flush=True)  # fmt: skip
            runs.append(results)
    report(precisions, runs)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
