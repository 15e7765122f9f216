"""Submit latency: `cloudddp launch --provider sagemaker --no-wait` vs the SageMaker SDK v3 ModelTrainer.

Both submit the same 2-instance job (sources/, train_ddp.py, the same DLC image, an s3://
input channel, one hyperparameter) to a moto server on 127.0.0.1, each as a fresh
process, so the figure is what a user waits for at the shell: interpreter start, imports,
packing, staging the code to S3 and CreateTrainingJob. Median of N runs each.

    .venv/bin/python benchmarks/submit_latency.py [--runs 5] [--sdk-python .venv-sdk/bin/python]

The SDK lives in its own venv (it is an optional extra); without it that half is skipped
with a note. Results go to stdout and to benchmarks/RESULTS-sagemaker.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
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
ROLE = "arn:aws:iam::123456789012:role/benchmark"
BUCKET = "cloudddp-bench"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311"
SDK_SCRIPT = """
import sys
from sagemaker.core.helper.session_helper import Session
from sagemaker.core.training.configs import Compute, InputData, SourceCode
from sagemaker.train import ModelTrainer
from sagemaker.train.distributed import Torchrun
trainer = ModelTrainer(
    sagemaker_session=Session(default_bucket=sys.argv[2]),
    role=sys.argv[3],
    base_job_name="bench-sdk",
    training_image=sys.argv[4],
    source_code=SourceCode(source_dir=sys.argv[1], entry_script="train_ddp.py"),
    distributed=Torchrun(),
    compute=Compute(instance_type="ml.g5.12xlarge", instance_count=2),
    hyperparameters={"epochs": 1},
    input_data_config=[InputData(channel_name="train", data_source="s3://%s/data/" % sys.argv[2])],
)
trainer.train(wait=False)
"""
SDK_CONFIG = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"


def timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(
            f"{command[0]} failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        )
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sdk-python", default=os.environ.get("CLOUDDDP_SMSDK_PYTHON", ".venv-sdk/bin/python"))
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "RESULTS-sagemaker.md"))
    args = parser.parse_args()

    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).close()
    work = Path(tempfile.mkdtemp(prefix="cloudddp-bench-"))
    config = work / "sagemaker-config.yaml"
    config.write_text(SDK_CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION, AWS_REGION=REGION, AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(work / "none"), AWS_SHARED_CREDENTIALS_FILE=str(work / "none"),
        SAGEMAKER_VALIDATE_ROLE="false", SAGEMAKER_USER_CONFIG_OVERRIDE=str(config),
    )  # fmt: skip
    boto3.client("s3", region_name=REGION, endpoint_url=endpoint, aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=BUCKET)  # fmt: skip

    cloudddp = [
        str(Path(sys.executable).parent / "cloudddp"), "launch", "--provider", "sagemaker", "--no-wait",
        "--role", ROLE, "--bucket", BUCKET, "--image", IMAGE, "--instance-type", "ml.g5.12xlarge",
        "--nodes", "2", "--input", f"train=s3://{BUCKET}/data/", "-H", "epochs=1", "--name", "bench",
        "sources/train_ddp.py",
    ]  # fmt: skip
    rows: list[tuple[str, list[float]]] = []
    try:
        rows.append(("cloudddp launch --no-wait (boto3)", [timed(cloudddp, env, REPO) for _ in range(args.runs)]))
        sdk_python = Path(args.sdk_python)
        note = ""
        if sdk_python.exists():
            sdk = [str(sdk_python), "-c", SDK_SCRIPT, str(REPO / "sources"), BUCKET, ROLE, IMAGE]
            rows.append(
                ("SageMaker SDK v3 ModelTrainer.train(wait=False)", [timed(sdk, env, REPO) for _ in range(args.runs)])
            )
        else:
            note = f"SDK half skipped: no SageMaker SDK venv at {sdk_python} (set --sdk-python)."
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)  # the SDK's config and the empty AWS files: nothing left in /tmp

    lines = ["| submitter | median (s) | min (s) | max (s) | runs |", "| --- | ---: | ---: | ---: | ---: |"]
    for label, times in rows:
        lines.append(
            f"| {label} | {statistics.median(times):.2f} | {min(times):.2f} | {max(times):.2f} | {len(times)} |"
        )
    ratio = ""
    if len(rows) == 2:
        value = statistics.median(rows[0][1]) / statistics.median(rows[1][1])
        ratio = f"cloudddp / SDK = **{value:.2f}x** (goal: <= 0.3x)"
    table = "\n".join(lines)
    print(table)
    print(ratio or note)
    sdk_version = ""
    if Path(args.sdk_python).exists():
        sdk_version = subprocess.run([args.sdk_python, "-c", "import importlib.metadata as m; print(m.version('sagemaker'))"],
                                     capture_output=True, text=True).stdout.strip()  # fmt: skip
    Path(args.output).write_text(
        "# Submit latency: cloudddp vs the SageMaker SDK (moto server on 127.0.0.1)\n\n"
        f"Command: `.venv/bin/python benchmarks/submit_latency.py --runs {args.runs}`\n\n"
        "Each run is a fresh process submitting the same 2 x ml.g5.12xlarge job (sources/, an s3:// input, one "
        "hyperparameter, the same DLC image) to a ThreadedMotoServer: wall time includes interpreter start, "
        "imports, packing and uploading the code, and CreateTrainingJob.\n\n"
        f"{table}\n\n{ratio or note}\n\n"
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"boto3 {boto3.__version__}" + (f", sagemaker {sdk_version}" if sdk_version else "") + ".\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
