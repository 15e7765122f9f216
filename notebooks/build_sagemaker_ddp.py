"""Writes notebooks/sagemaker_ddp.ipynb (run it after editing the cells below).

The notebook takes its endpoint, credentials, region and role from the environment, so
it runs unchanged against AWS and, in the test suite, against a moto server.
"""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell
from notebook_file import notebook_of, write_beside

CELLS = [
    new_markdown_cell(
        "# DDP training on SageMaker from a notebook\n\n"
        "Stage a dataset, train `sources/train_ddp.py` on **2 instances** with cloudddp's launcher as the entry "
        "point, follow every host's logs, and fetch the model.\n\n"
        "Needs AWS credentials and a region as for the AWS CLI, and an IAM role for the job in "
        "`CLOUDDDP_SAGEMAKER_ROLE`. `AWS_ENDPOINT_URL` (if set) points boto3 elsewhere, e.g. at a moto server."
    ),
    new_code_cell(
        "import io\n"
        "import json\n"
        "import os\n"
        "import tarfile\n"
        "import tempfile\n"
        "from pathlib import Path\n\n"
        "import boto3\n\n"
        "from cloudddp import Estimator\n"
        "from cloudddp.demo_data import write_demo_dataset\n\n"
        'REPO = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()\n'
        "# The dataset and the fetched model: the last cell removes this folder (as does the kernel when it\n"
        "# shuts down, if you stop before).\n"
        'work = tempfile.TemporaryDirectory(prefix="cloudddp-notebook-")\n'
        "WORK = Path(work.name)\n"
        'ROLE = os.environ["CLOUDDDP_SAGEMAKER_ROLE"]\n'
        'REGION = os.environ.get("AWS_REGION") or boto3.Session().region_name\n'
        'print("region:", REGION, "| endpoint:", os.environ.get("AWS_ENDPOINT_URL", "AWS"))'
    ),
    new_markdown_cell(
        "## 1. A small dataset\nA deterministic two-class image set (ImageFolder layout); use your own folder or an `s3://` URI instead."
    ),
    new_code_cell(
        'data = WORK / "data"\ncounts = write_demo_dataset(data, train_per_class=32, val_per_class=8)\ncounts'
    ),
    new_markdown_cell(
        '## 2. The job\nThe same `Estimator` drives `provider="local"` for debugging; only the provider and its '
        "options change. `dry_run()` shows the exact `CreateTrainingJob` request and uploads nothing."
    ),
    new_code_cell(
        "est = Estimator(\n"
        '    provider="sagemaker",\n'
        '    entry_point="train_ddp.py",\n'
        '    source_dir=str(REPO / "sources"),\n'
        '    instance_type="ml.g5.2xlarge",\n'
        "    instance_count=2,\n"
        "    role=ROLE,\n"
        "    region=REGION,\n"
        '    hyperparameters={"epochs": 3, "batch-size": 32},\n'
        ")\n"
        'print(est.dry_run({"train": str(data)}))'
    ),
    new_markdown_cell(
        "## 3. Train on 2 instances\nThe local folder is staged to S3 first (unchanged files are skipped on the next run); logs of every host stream below."
    ),
    new_code_cell('status = est.fit({"train": str(data)}, wait=True, logs=True)\nstatus.state'),
    new_markdown_cell("## 4. Logs again, status, model location"),
    new_code_cell(
        "est.logs()\nprint(est.latest_job.job_id, est.status().state)\nmodel_data = est.model_data\nmodel_data"
    ),
    new_markdown_cell(
        "## 5. Fetch the model\nOn a moto server no container runs, so nothing uploads `model.tar.gz`; with "
        "`CLOUDDDP_NOTEBOOK_SEED_ARTIFACT=1` the next cell puts a stand-in where SageMaker would."
    ),
    new_code_cell(
        'bucket, key = model_data.removeprefix("s3://").split("/", 1)\n'
        's3 = boto3.client("s3", region_name=REGION)\n'
        'if os.environ.get("CLOUDDDP_NOTEBOOK_SEED_ARTIFACT"):\n'
        "    buffer = io.BytesIO()\n"
        '    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:\n'
        '        body = json.dumps({"val_acc": None, "note": "seeded: moto runs no training"}).encode()\n'
        '        info = tarfile.TarInfo("metrics.json")\n'
        "        info.size = len(body)\n"
        "        tar.addfile(info, io.BytesIO(body))\n"
        "    s3.put_object(Bucket=bucket, Key=key, Body=buffer.getvalue())\n"
        'local = WORK / "model.tar.gz"\n'
        "s3.download_file(bucket, key, str(local))\n"
        "with tarfile.open(local) as tar:\n"
        '    tar.extractall(WORK / "model", filter="data")\n'
        'print(sorted(p.name for p in (WORK / "model").iterdir()))\n'
        'json.loads((WORK / "model" / "metrics.json").read_text())'
    ),
    new_markdown_cell(
        "## 6. Clean up\nRemoves the local work folder (the dataset and the fetched model); the model stays in S3 "
        "at `model_data`."
    ),
    new_code_cell('work.cleanup()\nprint("removed", WORK, "| still there:", WORK.exists())'),
]


def build() -> nbformat.NotebookNode:
    return notebook_of(CELLS)


if __name__ == "__main__":
    write_beside(__file__, build())
