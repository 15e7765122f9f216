"""A training stand-in for the s3:// pull test: every process reads the whole `train` channel
(CLOUDDDP_CHANNEL_TRAIN, as the pod's container env names it), hashes it, and all-reduces the byte
count over gloo, so a node that read different or partial data shows in its rank's JSON, with the
names of any S3 variables the pull used that reached training."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", required=True)
    out = Path(parser.parse_args().out_dir)
    channel = Path(os.environ["CLOUDDDP_CHANNEL_TRAIN"])
    digest, size = hashlib.sha256(), 0
    for path in sorted(p for p in channel.rglob("*") if p.is_file()):
        data = path.read_bytes()
        digest.update(str(path.relative_to(channel)).encode() + b"\0" + data)
        size += len(data)
    dist.init_process_group("gloo")
    total = torch.tensor([float(size)])
    dist.all_reduce(total)
    rank = dist.get_rank()
    out.mkdir(parents=True, exist_ok=True)
    record = {"rank": rank, "world_size": dist.get_world_size(), "channel": str(channel),
              "sha256": digest.hexdigest(), "bytes": size, "all_reduced_bytes": total.item(),
              "pull_variables": sorted(k for k in os.environ if k.startswith(("AWS_", "CLOUDDDP_PULL_")))}  # fmt: skip
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Leave without Python's shutdown: torch 2.14's gloo worker threads can still be releasing the last
    # collective then, and abort a finished run with SIGABRT (pytorch/pytorch#190489).
    sys.stdout.flush()
    os._exit(0)
