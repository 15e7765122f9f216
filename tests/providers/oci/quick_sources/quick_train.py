"""A stand-in training script for the OCI provider tests: no torch, a second or less per node.

The loopback service runs it the way OCI runs a job (entrypoint -> node script -> bootstrap
-> launcher -> this script); the tests assert on what it and the node script print.

    --fail-rank N    node N exits with code 3 after its epochs
    --wait           every node waits (up to 120 s) for SIGTERM, then saves and exits 143
"""

import argparse
import json
import os
import signal
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--wait", action="store_true")
    args = parser.parse_args()
    rank = int(os.environ["NODE_RANK"])
    size = int(os.environ["INITIAL_CLUSTER_SIZE"])
    print(f"quick_train: node {rank} of {size}, channel train at {os.environ.get('CLOUDDDP_CHANNEL_TRAIN')}")
    files = sorted(os.listdir(os.environ["CLOUDDDP_CHANNEL_TRAIN"])) if os.environ.get("CLOUDDDP_CHANNEL_TRAIN") else []
    print(f"quick_train: node {rank} sees {files}")
    for epoch in (1, 2):
        print(f"epoch={epoch}/2 loss=0.{9 - epoch}", flush=True)
    if args.wait:

        def stop(*_: object) -> None:
            print("checkpoint saved on SIGTERM", flush=True)
            sys.exit(143)

        signal.signal(signal.SIGTERM, stop)
        print("waiting for SIGTERM", flush=True)
        time.sleep(120)
        return 4
    if rank == args.fail_rank:
        print(f"quick_train: node {rank} fails on purpose", flush=True)
        return 3
    model = os.environ["CLOUDDDP_MODEL_DIR"]
    with open(os.path.join(model, "model.pt"), "wb") as handle:
        handle.write(f"weights of node {rank}".encode())
    with open(os.path.join(model, "metrics.json"), "w") as handle:
        json.dump({"val_acc": 1.0, "nodes": size}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
