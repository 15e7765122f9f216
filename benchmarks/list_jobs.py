"""`cloudddp list --all` over 200 indexed jobs on five providers, none of which answers (issue 37).

The console script runs as a user runs it, a fresh process each time, with a job index of its own (a temporary
XDG_STATE_HOME) holding 40 jobs each of SageMaker, OCI, Kubernetes, Slurm and PBS. Every provider is pointed at
something that never answers: SageMaker (AWS_ENDPOINT_URL), OCI (CLOUDDDP_OCI_SERVICE_ENDPOINT, a throwaway
key) and Kubernetes (a kubeconfig) at a loopback port that accepts connections and never sends a byte; Slurm's
and PBS's tools (scontrol, sacct, qstat) are stand-ins on PATH that connect there and wait. Three cases:

- cache: every job already seen finished, so no provider is asked (goal <= 0.5 s);
- deadline 0: every job cached RUNNING, `--deadline 0` (the providers are asked, nobody waits for them);
- refresh: every job cached RUNNING, the default 3 s deadline spent on providers that never answer (goal <= 3.5 s).

Prints a markdown table of medians and spread over `--runs` runs; the interpreter's own start and `import
cloudddp.cli` are timed alone for comparison (`cloudddp --version`).

    .venv/bin/python benchmarks/list_jobs.py --runs 7
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from helpers.endpoints import silent_endpoint  # noqa: E402
from helpers.kubernetes_apiserver import write_kubeconfig  # noqa: E402
from helpers.oci_loopback_server import ThrowawayKey  # noqa: E402

CLOUDDDP = Path(sys.executable).parent / "cloudddp"  # the console script pip installed
PER_PROVIDER = 40
FINISHED = ("SUCCEEDED", "FAILED", "STOPPED")
# A scheduler tool that never answers: it connects to the silent port and waits for a byte that never comes.
STAND_IN = '#!/bin/sh\nexec "{python}" -c "import socket; socket.create_connection((\'127.0.0.1\', {port})).recv(1)"\n'


def job_ids(provider: str, number: int) -> str:
    return {
        "sagemaker": f"bench-20261128-1200{number:02d}",
        "oci": f"ocid1.datasciencejobrun.oc1.iad.aaaaaaaabench{number:04d}",
        "kubernetes": f"pytorchjobs/training/bench-{number}",
        "slurm": str(1000 + number),
        "pbs": f"{2000 + number}.pbs-head",
    }[provider]


def fill_index(state_home: Path, finished: bool) -> None:
    """200 jobs (40 per provider), an hour apart down to now; all seen finished, or all seen RUNNING an hour ago."""
    os.environ["XDG_STATE_HOME"] = str(state_home)
    from cloudddp import job_index

    providers = ("sagemaker", "oci", "kubernetes", "slurm", "pbs")
    for number in range(PER_PROVIDER):
        for provider in providers:
            job_index.record(provider, job_ids(provider, number), f"bench-{provider}-{number}", "cloudddp launch", 2)
    now = time.time()
    with contextlib.closing(sqlite3.connect(job_index.index_path())) as db, db:
        for row, (job_id,) in enumerate(db.execute("SELECT job_id FROM jobs").fetchall()):
            submitted = now - 3600 * (row + 1)
            state = FINISHED[row % 3] if finished else "RUNNING"
            db.execute("UPDATE jobs SET submitted = ?, state = ?, checked = ?, finished = ? WHERE job_id = ?",
                       (submitted, state, now - 3600, submitted + 1800 if finished else None, job_id))  # fmt: skip


@contextlib.contextmanager
def unreachable_providers(folder: Path) -> Iterator[dict[str, str]]:
    """The environment pointing every provider at a port that accepts and never answers."""
    with silent_endpoint() as url:
        port = url.rsplit(":", 1)[1]
        tools = folder / "bin"
        tools.mkdir()
        for tool in ("scontrol", "sacct", "squeue", "qstat"):
            (tools / tool).write_text(STAND_IN.format(python=sys.executable, port=port))
            (tools / tool).chmod(0o755)
        oci_config = ThrowawayKey.generate().write_config(folder / "oci")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OCI_", "CLOUDDDP_", "SLURM_"))}
        env.update(
            PATH=f"{tools}{os.pathsep}{env.get('PATH', '')}", AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
            AWS_CONFIG_FILE=str(folder / "no-aws-config"), AWS_SHARED_CREDENTIALS_FILE=str(folder / "no-aws-creds"),
            CLOUDDDP_OCI_SERVICE_ENDPOINT=url, OCI_CONFIG_FILE=str(oci_config),
            KUBECONFIG=str(write_kubeconfig(folder / "kubeconfig", url, "token")),
        )  # fmt: skip
        yield env


def timed_list(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Seconds until `cloudddp ARGS` exits, and what it printed. Its own process group: whatever it left waiting
    on the silent port (a stand-in tool) is killed after."""
    started = time.perf_counter()
    process = subprocess.Popen([str(CLOUDDDP), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # fmt: skip
    out, err = process.communicate(timeout=120)
    elapsed = time.perf_counter() - started
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    if process.returncode != 0:
        raise SystemExit(f"cloudddp {' '.join(args)} exited {process.returncode}: {err}")
    return elapsed, out


def check(out: str, cached: bool) -> None:
    rows = out.splitlines()[1:]
    assert len(rows) == 5 * PER_PROVIDER, f"{len(rows)} jobs listed"
    if cached:
        assert all(row.split()[2] in FINISHED for row in rows), out[:2000]
    else:
        assert all("unknown (cached RUNNING, 1 h ago)" in row for row in rows), out[:2000]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        fill_index(folder / "finished", finished=True)
        fill_index(folder / "running", finished=False)
        with unreachable_providers(folder) as env:
            cases = [
                ("`cloudddp --version` (interpreter start, CLI imports)", ["--version"], None, None),
                ("cache: 200 jobs seen finished", ["list", "--all"], "finished", True),
                ("`--deadline 0`: 200 jobs cached RUNNING", ["list", "--all", "--deadline", "0"], "running", False),
                ("refresh: 200 jobs cached RUNNING, 3 s deadline", ["list", "--all"], "running", False),
            ]
            for _ in range(args.runs):  # the cases alternate, so a busy moment of the machine hits each alike
                for label, argv, index, cached in cases:
                    state_home = {"XDG_STATE_HOME": str(folder / index)} if index else {}
                    seconds, out = timed_list(argv, {**env, **state_home})
                    if cached is not None:
                        check(out, cached)
                    figures.setdefault(label, []).append(seconds)
    print(f"| `cloudddp list --all`, {5 * PER_PROVIDER} jobs, providers that never answer | median (s) | min (s) "
          "| max (s) | runs |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, seconds in figures.items():
        print(f"| {label} | {statistics.median(seconds):.2f} | {min(seconds):.2f} | {max(seconds):.2f} "
              f"| {len(seconds)} |")  # fmt: skip


if __name__ == "__main__":
    main()
