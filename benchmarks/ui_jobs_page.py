"""`cloudddp ui` (issue 40): the jobs page over 200 indexed jobs whose providers never answer, and a job page
while its node prints a 100k-line burst.

Each run starts the dashboard's server afresh in a child process (`--serve`), as `cloudddp ui` does, on
127.0.0.1 with a known token, and asks it over HTTP as the page does:

- jobs: the job index of benchmarks/list_jobs.py (40 jobs each of SageMaker, OCI, Kubernetes, Slurm and PBS,
  cached RUNNING, so every provider is asked) with every provider pointed at a port that accepts and never
  answers. Timed: the first `/api/jobs` of a fresh server (providers' SDKs imported on the way) and the median of
  the next five (goal <= 0.5 s).
- burst: a real local run (`cloudddp launch -p local --no-wait`, one node) whose script prints 100,000 lines of
  100 characters at once and then sleeps 5 s; a client follows `/api/logs` (server-sent events) from before the
  burst to the job's end while `/api/job` and `/api/jobs` are timed every 0.5 s. Reported: the server's peak RSS
  (VmHWM of /proc/PID/status, read at the end), the lines streamed and skipped, the largest message, and the
  request times; beside the same run printing 100 lines, for the baseline.

    .venv/bin/python benchmarks/ui_jobs_page.py --runs 5
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from list_jobs import fill_index, unreachable_providers  # noqa: E402

TOKEN = "benchmark-token"
BURST = """\
import sys, time
for i in range(int(sys.argv[1])):
    print(f"line {i:06d} " + "x" * 88)
sys.stdout.flush()
time.sleep(5)
"""


def serve() -> None:
    from cloudddp.ui.server import Dashboard

    dashboard = Dashboard("127.0.0.1", 0, TOKEN)
    print(dashboard.server_port, flush=True)
    dashboard.serve_forever()


@contextlib.contextmanager
def server(env: dict[str, str], cwd: Path) -> Iterator[tuple[int, int]]:
    """A fresh dashboard in a child process: (its port, its pid). Its process group is killed after (a stand-in
    scheduler tool it started may still wait on the silent port)."""
    child = subprocess.Popen([sys.executable, __file__, "--serve"], env=env, cwd=cwd, stdout=subprocess.PIPE,
                             text=True, start_new_session=True)  # fmt: skip
    assert child.stdout is not None
    port = int(child.stdout.readline())
    try:
        yield port, child.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def get(port: int, path: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("GET", path, headers={"Host": f"127.0.0.1:{port}", "X-Cloudddp-Token": TOKEN})
    answer = connection.getresponse()
    body = answer.read()
    assert answer.status == 200, (path, answer.status, body[:200])
    return time.perf_counter() - started, body


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def jobs_case(folder: Path, env: dict[str, str]) -> tuple[float, float]:
    with server({**env, "XDG_STATE_HOME": str(folder / "running")}, folder) as (port, _):
        first, body = get(port, "/api/jobs")
        assert len(json.loads(body)["jobs"]) == 200
        warm = [get(port, "/api/jobs")[0] for _ in range(5)]
    return first, statistics.median(warm)


def follow(port: int, path: str, seen: dict[str, int]) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    connection.request("GET", path, headers={"Host": f"127.0.0.1:{port}", "X-Cloudddp-Token": TOKEN})
    answer = connection.getresponse()
    event = "message"
    while line := answer.readline():
        text = line.decode().rstrip("\n")
        if text.startswith("event: "):
            event = text[7:]
        elif text.startswith("data: ") and event == "end":
            return
        elif text.startswith("data: "):
            seen["messages"] += 1
            seen["largest"] = max(seen["largest"], len(text))
            message = json.loads(text[6:])
            seen["lines"] += sum(len(lines) for lines in message["lines"].values())
            seen["skipped"] += sum(message["skipped"].values())


def burst_case(folder: Path, lines: int) -> dict[str, float]:
    scratch = Path(tempfile.mkdtemp(dir=folder))
    (scratch / "burst.py").write_text(BURST)
    env = {**os.environ, "XDG_STATE_HOME": str(scratch / "state"), "CLOUDDDP_RUNS_DIR": str(scratch / "runs")}
    launched = subprocess.run([str(Path(sys.executable).parent / "cloudddp"), "launch", "-p", "local", "--no-wait",
                               "--name", "burst", "burst.py", "--", str(lines)], env=env, cwd=scratch,
                              capture_output=True, text=True)  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    job = next((scratch / "runs").iterdir())
    seen = {"messages": 0, "largest": 0, "lines": 0, "skipped": 0}
    times: dict[str, list[float]] = {"job": [], "jobs": []}
    with server(env, scratch) as (port, pid):
        reader = threading.Thread(target=follow, args=(port, f"/api/logs?provider=local&id={job}", seen))
        reader.start()
        while reader.is_alive():
            times["job"].append(get(port, f"/api/job?provider=local&id={job}")[0])
            times["jobs"].append(get(port, "/api/jobs")[0])
            reader.join(0.5)
        rss = peak_rss_mb(pid)
    assert seen["lines"] + seen["skipped"] >= lines, seen
    return {"rss": rss, **seen, "job_median": statistics.median(times["job"]), "job_max": max(times["job"]),
            "jobs_median": statistics.median(times["jobs"]), "jobs_max": max(times["jobs"])}  # fmt: skip


def spread(values: list[float], unit: str = "s", digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--case", choices=("jobs", "burst", "both"), default="both")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        if args.case in ("jobs", "both"):
            fill_index(folder / "running", finished=False)
            with unreachable_providers(folder) as env:
                figures = [jobs_case(folder, env) for _ in range(args.runs)]
            print(f"jobs page, 200 jobs, providers that never answer ({args.runs} runs, median (min-max)):")
            print(f"  first /api/jobs of a fresh server: {spread([f for f, _ in figures])}")
            print(f"  next five, median: {spread([w for _, w in figures])}")
        if args.case in ("burst", "both"):
            for lines in (100, 100_000):
                runs = [burst_case(folder, lines) for _ in range(args.runs)]
                print(f"job page, one node printing {lines} lines ({args.runs} runs, median (min-max)):")
                print(f"  server peak RSS: {spread([r['rss'] for r in runs], 'MB', 1)}")
                for key in ("lines", "skipped", "messages", "largest"):
                    print(f"  {key}: {spread([r[key] for r in runs], '', 0)}")
                for key in ("job_median", "job_max", "jobs_median", "jobs_max"):
                    print(f"  /api/{key.replace('_', ' ')}: {spread([r[key] for r in runs])}")


if __name__ == "__main__":
    main()
