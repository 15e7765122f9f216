"""OCI launch latency and per-node overheads, against the loopback OCI service (no account).

1. `cloudddp launch --provider oci --no-wait` to the job run created, each run a fresh
   process as a user runs it (interpreter start, imports, credentials, packing the source,
   staging the inputs to Object Storage with the real `oci` SDK's UploadManager, create_job,
   create_job_run), against tests/helpers/oci_loopback_server.py with signature checking. The
   first launch uploads the demo dataset; later ones find it in place (MD5) and upload only
   the source archive.
2. Rendezvous wait per node: how long after the last node appears in the cluster metadata
   file the launcher starts (cloudddp.cluster.oci.wait_for_cluster, real clock, 2 s poll).
3. Exit overhead per node: from the training process's exit to the node script's exit
   (node 0 copies its model folder to the output mount, then every node exits; no sleep).

Compared with Oracle ADS's documented behaviour (not run here: it needs Docker and a
tenancy): its workers poll Object Storage for the main node's address every 10 s, its v2
driver polls the metadata file every 20 s, and every node sleeps 60 s before exiting.

    .venv/bin/python benchmarks/oci_launch_latency.py [--runs 5] [--trials 10]

Results go to stdout and to benchmarks/RESULTS-oci.md.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from helpers.oci_loopback_server import COMPARTMENT, IMAGE, LOG_GROUP, PROJECT, WORK_DIR, FakeOCI, ThrowawayKey  # noqa: E402

from cloudddp.cluster.oci import wait_for_cluster  # noqa: E402
from cloudddp.cluster.options import DetectOptions  # noqa: E402
from cloudddp.demo_data import write_demo_dataset  # noqa: E402
from cloudddp.providers.oci.node import ENTRYPOINT, NODE_SCRIPT, NODE_SCRIPT_NAME  # noqa: E402

ADS_WORKER_POLL = 10.0  # s, workers polling Object Storage for the main node's address
ADS_V2_METADATA_POLL = 20.0  # s, the v2 driver polling the cluster metadata file
ADS_EXIT_SLEEP = 60.0  # s, every node before it exits


def launch_once(server: FakeOCI, config: Path, data: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDDDP_", "OCI_"))}
    env.update(CLOUDDDP_OCI_SERVICE_ENDPOINT=server.url, OCI_CONFIG_FILE=str(config))
    command = [
        sys.executable, "-c", "from cloudddp.console import main; main()", "launch", "--provider", "oci", "--no-wait",
        "--nodes", "2", "-i", f"train={data}", "--compartment", COMPARTMENT, "--project", PROJECT, "--image", IMAGE,
        "--work-dir", WORK_DIR, "--log-group", LOG_GROUP, "sources/train_ddp.py", "--", "--epochs", "1",
    ]  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"launch failed: {result.stdout}\n{result.stderr}")
    return elapsed, result.stdout.strip().splitlines()[-1]


def launch_latency(runs: int, scratch: Path) -> dict[str, object]:
    key = ThrowawayKey.generate()
    config = key.write_config(scratch / ".oci")
    data = scratch / "demo-data"
    counts = write_demo_dataset(data)
    files = sum(1 for p in data.rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    with FakeOCI(key, run_root=scratch / "service", step=3600) as server:  # runs stay ACCEPTED: submission only
        times, puts = [], []
        for _ in range(runs):
            before = len(server.calls("PUT"))
            elapsed, _line = launch_once(server, config, data)
            times.append(elapsed)
            puts.append(len(server.calls("PUT")) - before)
        assert server.signature_failures == []
        assert len(server.calls("POST", r"^/20190101/jobRuns$")) == runs
    return {"times": times, "puts": puts, "files": files, "bytes": size, "counts": counts}


def rendezvous_wait(trials: int, scratch: Path) -> list[float]:
    """Seconds between the last node's entry landing in the metadata file and the launcher going on."""
    delays = []
    for trial in range(trials):
        path = scratch / f"metadata-{trial}.json"
        path.write_text(json.dumps([{"Rank": 0, "IPAddress": "10.0.0.1"}]))
        written: list[float] = []

        def join_late(path: Path = path, written: list[float] = written) -> None:
            time.sleep(random.uniform(0.5, 4.5))
            path.write_text(json.dumps([{"Rank": 0, "IPAddress": "10.0.0.1"}, {"Rank": 1, "IPAddress": "10.0.0.2"}]))
            written.append(time.monotonic())

        threading.Thread(target=join_late, daemon=True).start()
        wait_for_cluster(path, 2, DetectOptions(metadata_timeout=60))
        delays.append(time.monotonic() - written[0])
    return delays


def exit_overhead(trials: int, scratch: Path) -> list[float]:
    """Seconds from the training process's exit to the node script's exit, on node 0 (which copies the model)."""
    bootstrap = (
        "import os, time\n"
        "model = os.environ['CLOUDDDP_MODEL_DIR']\n"
        "open(os.path.join(model, 'model.pt'), 'wb').write(os.urandom(45 * 1024 * 1024))\n"  # a ResNet-18's size
        "open(os.path.join(os.environ['CLOUDDDP_NODE_ROOT'], 'ended'), 'w').write(repr(time.time()))\n"
    )
    archive = scratch / "sourcedir.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in (("cloudddp_bootstrap.py", bootstrap), (NODE_SCRIPT_NAME, NODE_SCRIPT)):
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    overheads = []
    for trial in range(trials):
        root = scratch / f"node-{trial}"
        env = {**os.environ, "NODE_RANK": "0", "CLOUDDDP_SOURCE": str(archive), "CLOUDDDP_NODE_ROOT": str(root),
               "CLOUDDDP_OUTPUT_DIR": str(scratch / f"output-{trial}")}  # fmt: skip
        subprocess.run(ENTRYPOINT, env=env, check=True, capture_output=True)
        overheads.append(time.time() - float((root / "ended").read_text()))
    return overheads


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} | {len(values)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS-oci.md alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cloudddp-oci-bench-") as folder:
        scratch = Path(folder)
        launches = launch_latency(args.runs, scratch)
        waits = rendezvous_wait(args.trials, scratch)
        exits = exit_overhead(args.trials, scratch)
    times, puts = launches["times"], launches["puts"]
    import oci

    lines = [
        "# OCI launch latency and per-node overheads (loopback OCI service on 127.0.0.1)",
        "",
        f"Command: `.venv/bin/python benchmarks/oci_launch_latency.py --runs {args.runs} --trials {args.trials}`",
        "",
        "## `cloudddp launch --provider oci --no-wait` to the job run created",
        "",
        "Each run is a fresh process launching the same 2-node job (sources/, the demo dataset as a local input,",
        "`--epochs 1`) against tests/helpers/oci_loopback_server.py, which verifies every request's signature. Wall time",
        "includes interpreter start, imports, loading the API key, packing the source with the bundled launcher,",
        "staging to Object Storage through the real `oci` SDK (UploadManager), create_job and create_job_run.",
        f"Input: {launches['files']} files, {launches['bytes'] / 1e6:.2f} MB.",
        "",
        "| launch | seconds | objects uploaded |",
        "| --- | ---: | ---: |",
        f"| first (dataset uploaded) | {times[0]:.2f} | {puts[0]} |",
        *[
            f"| repeat {i} (dataset skipped by MD5) | {t:.2f} | {p} |"
            for i, (t, p) in enumerate(zip(times[1:], puts[1:], strict=True), 1)
        ],
        "",
        f"Repeat launches: median **{statistics.median(times[1:]):.2f} s**." if len(times) > 1 else "",
        "",
        "## Per-node overheads vs Oracle ADS (documented behaviour; ADS itself not run: it needs Docker and a tenancy)",
        "",
        "| overhead per node | cloudddp median | min | max | trials | ADS |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
        f"| rendezvous wait after the last node appears (poll <= 2 s) | {summary(waits)} | up to {ADS_WORKER_POLL:g} s "
        f"(workers poll Object Storage every {ADS_WORKER_POLL:g} s); up to {ADS_V2_METADATA_POLL:g} s (v2 driver polls "
        f"the metadata file every {ADS_V2_METADATA_POLL:g} s) |",
        f"| exit overhead after training ends (node 0 copies a 45 MB model, no sleep) | {summary(exits)} | "
        f"{ADS_EXIT_SLEEP:g} s (every node sleeps before exiting) |",
        "",
        "The rendezvous wait is the launcher's poll of CLUSTER_NODES_METADATA_FILE (2 s; expected 1 s, at most 2 s);",
        "the exit overhead is the node script's work after the training process exits: copying node 0's model folder",
        "to the output mount (a local folder here; on OCI an Object Storage mount) and writing its last log line.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, oci {oci.__version__}.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        (REPO / "benchmarks" / "RESULTS-oci.md").write_text(text)


if __name__ == "__main__":
    main()
