"""The SageMaker SDK v2 drop-in: `fit()` to job created, cloudddp vs the real SDK v2, on a moto server.

Both sides run the seed guide's estimator cell (2 x ml.p3.2xlarge, PyTorch 1.9/py38, sources/
as source_dir, train_ddp.py, two s3:// channels) as `fit(wait=False)` against the same
ThreadedMotoServer on 127.0.0.1, each run a fresh process, alternating cloudddp and SDK.
Reported per side: the `fit()` call alone (what a notebook cell waits for once imported) and
the whole process (interpreter, imports, construction, fit). Then local mode: the time from
`fit()` to the first DDP training step of a 2-node `instance_type="local"` job (cloudddp only:
the SDK's local mode needs Docker, which this machine does not have).

    make sdk2-env        # the real SDK v2 in .venv-sdk2 (without it the SDK half is skipped)
    .venv/bin/python benchmarks/sdk_v2_fit.py [--runs 7] [--local-runs 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import boto3

REPO = Path(__file__).resolve().parent.parent
REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
SDK_CONFIG = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"
# The seed's cell; {module} is sagemaker.pytorch or cloudddp.sagemaker. Prints the fit() call's seconds.
FIT_SCRIPT = """
import os, sys, time
{prelude}
from {module} import PyTorch
constructed = time.perf_counter()
estimator = PyTorch(source_dir=sys.argv[1], entry_point="train_ddp.py", role=sys.argv[2], framework_version="1.9",
                    py_version="py38", disable_profiler=True, debugger_hook_config=False,
                    hyperparameters={{"epochs": 25}}, instance_count=2, instance_type="ml.p3.2xlarge")
data_url = sys.argv[3]
started, cpu = time.perf_counter(), time.process_time()
estimator.fit(inputs={{"train": f"{{data_url}}/train", "val": f"{{data_url}}/val"}}, wait=False)
print("FIT_SECONDS", time.perf_counter() - started)
print("FIT_CPU_SECONDS", time.process_time() - cpu)
print("CONSTRUCT_AND_FIT_SECONDS", time.perf_counter() - constructed)
"""
# The SDK v2 builds its STS client with an explicit regional endpoint, ignoring AWS_ENDPOINT_URL:
# every request of its boto3 session is sent to the moto server instead (a dict lookup per request).
SDK_PRELUDE = """
import boto3
from urllib.parse import urlsplit, urlunsplit
_target = urlsplit(os.environ["AWS_ENDPOINT_URL"])
def _redirect(request, **_):
    parts = urlsplit(request.url)
    request.url = urlunsplit((_target.scheme, _target.netloc, parts.path, parts.query, parts.fragment))
boto3.DEFAULT_SESSION = boto3.Session(region_name="us-east-1")
boto3.DEFAULT_SESSION.events.register("before-send", _redirect)
"""
FIRST_STEP_SCRIPT = """
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
files = sum(len(f) for _, _, f in os.walk(os.environ["SM_CHANNEL_TRAIN"]))
model(torch.randn(4, 8)).sum().backward()
if dist.get_rank() == 0:
    print("FIRST_STEP", time.time(), files, flush=True)
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)  # torch 2.14 + gloo can abort in Python's shutdown (pytorch/pytorch#190489)
"""
LABELS = {
    "ours_fit": "cloudddp.sagemaker.PyTorch: fit(wait=False) call",
    "sdk_fit": "SageMaker SDK v2 PyTorch: fit(wait=False) call",
    "ours_both": "cloudddp: PyTorch(...) + fit(wait=False)",
    "sdk_both": "SageMaker SDK v2: PyTorch(...) + fit(wait=False)",
    "ours_total": "cloudddp: whole process (interpreter, imports, construct, fit)",
    "sdk_total": "SageMaker SDK v2: whole process (interpreter, imports, construct, fit)",
    "ours_fit_cpu": "cloudddp: CPU seconds of the fit() call (client process)",
    "sdk_fit_cpu": "SageMaker SDK v2: CPU seconds of the fit() call (client process)",
    "ours_total_cpu": "cloudddp: CPU seconds of the whole process",
    "sdk_total_cpu": "SageMaker SDK v2: CPU seconds of the whole process",
    "local": "cloudddp local mode, 2 nodes: fit() to the first DDP step",
}
LOCAL_SCRIPT = """
import sys, time
from cloudddp.sagemaker import PyTorch
estimator = PyTorch(source_dir=sys.argv[1], entry_point="first_step.py", role=sys.argv[2], instance_count=2,
                    instance_type="local")
print("FIT_CALLED", time.time(), flush=True)
estimator.fit(inputs={"train": sys.argv[3] + "/train"})
"""


def run(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """Wall seconds of a fresh process, and its output (with its CPU seconds appended as PROCESS_CPU_SECONDS)."""
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    elapsed, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    result.stdout += f"\nPROCESS_CPU_SECONDS {after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}\n"
    if result.returncode != 0:
        raise SystemExit(
            f"{command[:3]} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return elapsed, result.stdout


def number(pattern: str, text: str) -> float:
    match = re.search(pattern + r" ([0-9.]+)", text)
    if not match:
        raise SystemExit(f"no {pattern!r} in the output:\n{text[-3000:]}")
    return float(match.group(1))


def row(label: str, values: list[float]) -> str:
    median = statistics.median(values)
    return f"| {label} | {median:.2f} | {min(values):.2f} | {max(values):.2f} | {len(values)} |"


def start_moto() -> tuple[object, str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).close()
    return server, endpoint


def environment(endpoint: str, work: Path) -> dict[str, str]:
    (work / "sagemaker-config.yaml").write_text(SDK_CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SM_", "SAGEMAKER_"))}
    env.update(
        AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION, AWS_REGION=REGION, AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(work / "none"), AWS_SHARED_CREDENTIALS_FILE=str(work / "none"),
        SAGEMAKER_USER_CONFIG_OVERRIDE=str(work / "sagemaker-config.yaml"), PYTHONUNBUFFERED="1",
    )  # fmt: skip
    return env


def upload_demo_data(endpoint: str, work: Path) -> str:
    """The tests' small demo dataset (64 + 16 images) in the default bucket, as the seed's upload_data does."""
    from cloudddp.demo_data import write_demo_dataset

    write_demo_dataset(work / "data", train_per_class=32, val_per_class=8)
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing")  # fmt: skip
    bucket = "sagemaker-us-east-1-123456789012"
    s3.create_bucket(Bucket=bucket)
    for file in sorted(p for p in (work / "data").rglob("*") if p.is_file()):
        s3.upload_file(str(file), bucket, f"hymenoptera_data/{file.relative_to(work / 'data').as_posix()}")
    return f"s3://{bucket}/hymenoptera_data"


def measure(args: argparse.Namespace, env: dict[str, str], work: Path, data_url: str) -> dict[str, list[float]]:
    sdk = Path(args.sdk_python)
    ours_cmd = [sys.executable, "-c", FIT_SCRIPT.format(module="cloudddp.sagemaker", prelude=""),
                str(REPO / "sources"), ROLE, data_url]  # fmt: skip
    sdk_cmd = [str(sdk), "-c", FIT_SCRIPT.format(module="sagemaker.pytorch", prelude=SDK_PRELUDE),
               str(REPO / "sources"), ROLE, data_url]  # fmt: skip
    timings: dict[str, list[float]] = {key: [] for key in LABELS}
    for _ in range(args.runs):  # alternating, so drifting machine load hits both sides alike
        total, out = run(ours_cmd, env, work)
        timings["ours_fit"].append(number("FIT_SECONDS", out))
        timings["ours_both"].append(number("CONSTRUCT_AND_FIT_SECONDS", out))
        timings["ours_total"].append(total)
        timings["ours_fit_cpu"].append(number("FIT_CPU_SECONDS", out))
        timings["ours_total_cpu"].append(number("PROCESS_CPU_SECONDS", out))
        if sdk.exists():
            total, out = run(sdk_cmd, env, work)
            timings["sdk_fit"].append(number("FIT_SECONDS", out))
            timings["sdk_both"].append(number("CONSTRUCT_AND_FIT_SECONDS", out))
            timings["sdk_total"].append(total)
            timings["sdk_fit_cpu"].append(number("FIT_CPU_SECONDS", out))
            timings["sdk_total_cpu"].append(number("PROCESS_CPU_SECONDS", out))
    (work / "local-src").mkdir()
    (work / "local-src" / "first_step.py").write_text(FIRST_STEP_SCRIPT)
    local_cmd = [sys.executable, "-c", LOCAL_SCRIPT, str(work / "local-src"), ROLE, data_url]
    for _ in range(args.local_runs):
        _, out = run(local_cmd, env, work)
        timings["local"].append(number(r"\[algo-1\] FIRST_STEP", out) - number("FIT_CALLED", out))
    return timings


def report(args: argparse.Namespace, timings: dict[str, list[float]]) -> str:
    lines = ["| what | median (s) | min (s) | max (s) | runs |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += [row(label, timings[key]) for key, label in LABELS.items() if timings[key]]
    ratios = f"SDK half skipped: no SDK v2 at {args.sdk_python} (`make sdk2-env`)."
    version = ""
    if timings["sdk_fit"]:
        fit_ratio = statistics.median(timings["ours_fit"]) / statistics.median(timings["sdk_fit"])
        both_ratio = statistics.median(timings["ours_both"]) / statistics.median(timings["sdk_both"])
        total_ratio = statistics.median(timings["ours_total"]) / statistics.median(timings["sdk_total"])
        cpu_ratio = statistics.median(timings["ours_fit_cpu"]) / statistics.median(timings["sdk_fit_cpu"])
        ratios = (
            f"cloudddp / SDK v2: fit() call **{fit_ratio:.2f}x** (goal <= 0.3x); PyTorch(...) + fit() "
            f"{both_ratio:.2f}x (v2 makes its boto3 clients in the constructor); whole process {total_ratio:.2f}x; "
            f"CPU seconds of the fit() call {cpu_ratio:.2f}x (wall time on a loaded machine varies, CPU time less)"
        )
        version = subprocess.run([args.sdk_python, "-c", "import importlib.metadata as m; print(m.version('sagemaker'))"],
                                 capture_output=True, text=True).stdout.strip()  # fmt: skip
    table = "\n".join(lines)
    print(table)
    print(ratios)
    return (
        "# SageMaker SDK v2 drop-in: fit() to job created (moto server on 127.0.0.1)\n\n"
        f"Command: `.venv/bin/python benchmarks/sdk_v2_fit.py --runs {args.runs} --local-runs {args.local_runs}`\n\n"
        "The seed guide's estimator cell (2 x ml.p3.2xlarge, PyTorch 1.9/py38, sources/ as source_dir, two s3:// "
        "channels) as `fit(wait=False)`, each run a fresh process, cloudddp and SDK v2 alternating. Local mode: a "
        "2-node `instance_type='local'` job whose script does one DDP step; channel download (64 images) included.\n\n"
        f"{table}\n\n{ratios}\n\n"
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}, "
        f"boto3 {boto3.__version__}" + (f", sagemaker {version}" if version else "") + ".\n"
        "\nRaw seconds: " + json.dumps({k: [round(v, 3) for v in vs] for k, vs in timings.items()}) + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--local-runs", type=int, default=3)
    parser.add_argument("--sdk-python", default=str(REPO / ".venv-sdk2" / "bin" / "python"))
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "RESULTS-sdk-v2.md"))
    args = parser.parse_args()
    server, endpoint = start_moto()
    try:
        with tempfile.TemporaryDirectory(prefix="cloudddp-sdk2-bench-") as scratch:  # removed again, data and all
            work = Path(scratch)
            timings = measure(args, environment(endpoint, work), work, upload_demo_data(endpoint, work))
    finally:
        server.stop()  # type: ignore[attr-defined]
    Path(args.output).write_text(report(args, timings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
