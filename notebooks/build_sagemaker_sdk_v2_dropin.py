"""Writes notebooks/sagemaker_sdk_v2_dropin.ipynb (run it after editing the cells below).

The seed guide "Data Parallel Training with PyTorch DDP" (a SageMaker SDK v2 notebook) on
cloudddp: its cells with the import changed, trained first on 2 local emulated nodes (no Docker),
then submitted to SageMaker unchanged but for `instance_type`. Endpoint, credentials, region and
role come from the environment, so it runs against AWS and, in the tests, against a moto server.
"""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell
from notebook_file import notebook_of, write_beside

CELLS = [
    new_markdown_cell(
        "# Data Parallel Training with PyTorch DDP: the SageMaker SDK v2 notebook on cloudddp\n\n"
        "The seed guide's flow with one change: `from cloudddp.sagemaker import PyTorch` instead of "
        "`from sagemaker.pytorch import PyTorch`. cloudddp's launcher starts `torch.distributed.run` on every "
        "host, so the guide's `launcher.py` is not needed: the entry point is the training script itself. "
        "`instance_type='local'` trains on this machine on emulated SageMaker hosts (no Docker); an `ml.*` "
        "instance type creates the SageMaker training job with boto3.\n\n"
        "Needs AWS credentials and a region as for the AWS CLI; `SAGEMAKER_ROLE` names the job's IAM role "
        "outside SageMaker Studio. `AWS_ENDPOINT_URL` (if set) points boto3 elsewhere, e.g. at a moto server."
    ),
    new_code_cell(
        "import os\n"
        "import shutil\n"
        "import tempfile\n"
        "from pathlib import Path\n\n"
        "# The guide works in its current folder: here a temporary one, which the last cell leaves and removes\n"
        "# (as does the kernel when it shuts down, if you stop before).\n"
        'NOTEBOOK_FOLDER = globals().get("NOTEBOOK_FOLDER") or Path.cwd()  # also when this cell runs again\n'
        'REPO = NOTEBOOK_FOLDER.parent if NOTEBOOK_FOLDER.name == "notebooks" else NOTEBOOK_FOLDER\n'
        'work = tempfile.TemporaryDirectory(prefix="cloudddp-sdk-v2-")\n'
        "os.chdir(work.name)  # the guide's working folder, until the last cell\n"
        "Path('2_sources').mkdir()\n"
        "for script in (REPO / 'sources').glob('*.py'):  # train_ddp.py and the modules it imports\n"
        "    shutil.copy(script, '2_sources')"
    ),
    new_code_cell(
        "import cloudddp.sagemaker as sagemaker\n"
        "from cloudddp.sagemaker import get_execution_role\n\n"
        "sagemaker_session = sagemaker.Session()\n"
        "role = os.environ.get('SAGEMAKER_ROLE') or get_execution_role()\n\n"
        "bucket = sagemaker_session.default_bucket()\n"
        "prefix = 'sagemaker/pytorch-distribution-options'\n"
        "print('Bucket:\\n{}'.format(bucket))"
    ),
    new_markdown_cell(
        "The guide downloads the Hymenoptera dataset (ants and bees). Offline, a generated two-class image set "
        "in the same ImageFolder layout (`train/<class>/`, `val/<class>/`) stands in for it."
    ),
    new_code_cell(
        "from cloudddp.demo_data import write_demo_dataset\n\n"
        "write_demo_dataset('hymenoptera_data', train_per_class=32, val_per_class=8)"
    ),
    new_code_cell(
        'data_url = sagemaker_session.upload_data(path="./hymenoptera_data", key_prefix="hymenoptera_data")\n'
        'print(f"S3 location of dataset {data_url}")'
    ),
    new_markdown_cell(
        "## Running training locally\n\n"
        "The guide's estimator cell, with the entry point being the training script. `'local'` runs 2 emulated "
        "hosts here: each gets the channels downloaded into its `/opt/ml`-style folder and the `SM_*` variables; "
        "the model lands in S3 as `model.tar.gz`, where SageMaker puts it. The guide's `framework_version='1.9'` "
        "image is replaced by PyTorch 2.5: `train_ddp.py` needs torch 2.1 or newer (for a 1.x-era script of your "
        "own, cloudddp's launcher gives torchrun the option spellings the 1.x images take)."
    ),
    new_code_cell(
        "from cloudddp.sagemaker import PyTorch\n\n"
        "ps_instance_type = 'local'\n"
        "ps_instance_count = 2\n\n"
        "hyperparameters = {\n"
        "  'epochs': 1,\n"
        "  }\n\n"
        "estimator_ms = PyTorch(\n"
        "                       source_dir='2_sources',\n"
        "                       entry_point='train_ddp.py',\n"
        "                       role=role,\n"
        "                       framework_version='2.5',\n"
        "                       py_version='py311',\n"
        "                       disable_profiler=True,\n"
        "                       debugger_hook_config=False,\n"
        "                       hyperparameters=hyperparameters,\n"
        "                       instance_count=ps_instance_count,\n"
        "                       instance_type=ps_instance_type,\n"
        "                       )"
    ),
    new_code_cell('estimator_ms.fit(inputs={"train":f"{data_url}/train", "val":f"{data_url}/val"})'),
    new_code_cell(
        "import json\n"
        "import tarfile\n\n"
        "print(estimator_ms.model_data)\n"
        "model_bucket, key = estimator_ms.model_data[len('s3://'):].split('/', 1)\n"
        "sagemaker_session.boto_session.client('s3').download_file(model_bucket, key, 'model.tar.gz')\n"
        "with tarfile.open('model.tar.gz') as tar:\n"
        "    print(sorted(tar.getnames()))\n"
        "    print(json.loads(tar.extractfile('metrics.json').read()))"
    ),
    new_markdown_cell(
        "## Running training on SageMaker\n\n"
        "The same cell with the guide's instance type: the `CreateTrainingJob` request is sent with boto3 "
        "(the source archive carries cloudddp's launcher). `wait=False` returns once the job is created.\n\n"
        "The cell ends the notebook: it goes back to the notebook's folder and removes the working folder (the "
        "dataset, `2_sources`, the local runs in `cloudddp-runs/`, `model.tar.gz`); the data and the models stay "
        "in S3."
    ),
    new_code_cell(
        "estimator_ms = PyTorch(\n"
        "                       source_dir='2_sources',\n"
        "                       entry_point='train_ddp.py',\n"
        "                       role=role,\n"
        "                       framework_version='2.5',\n"
        "                       py_version='py311',\n"
        "                       disable_profiler=True,\n"
        "                       debugger_hook_config=False,\n"
        "                       hyperparameters={'epochs': 25},\n"
        "                       instance_count=2,\n"
        "                       instance_type='ml.p3.2xlarge',\n"
        "                       )\n"
        'estimator_ms.fit(inputs={"train":f"{data_url}/train", "val":f"{data_url}/val"}, wait=False)\n'
        "described = estimator_ms.latest_training_job.describe()\n\n"
        "os.chdir(NOTEBOOK_FOLDER)  # the end: back to the notebook's folder, and the working folder goes\n"
        "work.cleanup()\n"
        "print(described['TrainingJobName'], described['TrainingJobStatus'])"
    ),
]


def build() -> nbformat.NotebookNode:
    return notebook_of(CELLS)


if __name__ == "__main__":
    write_beside(__file__, build())
