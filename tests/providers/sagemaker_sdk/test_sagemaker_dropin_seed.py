# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""The seed guide's SageMaker SDK v2 cells, run on cloudddp with only the import line changed.

The cells are ../shared/seeds/003_*.txt ("Data Parallel Training with PyTorch DDP"), copied
verbatim below. Changes, each applied as a visible text replacement:
- `from sagemaker.pytorch import PyTorch` -> `from cloudddp.sagemaker import PyTorch` (and
  `import sagemaker` -> `import cloudddp.sagemaker as sagemaker` in the setup cell);
- the `launcher.py` entry point is replaced by the script it launches (`train_ddp.py`), and
  the launcher's own hyperparameter `train-script` goes with it: cloudddp's launcher does its job;
- the role is an ARN (the seed's comment says so outside SageMaker), the dataset is the tests'
  small demo dataset, and the local run trains 1 epoch with `instance_type="local"`.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from sdk2_moto import MotoServer, moto  # noqa: F401  (moto is a fixture)

REPO = Path(__file__).resolve().parents[3]
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "sagemaker-us-east-1-123456789012"

SETUP_CELL = """
import sagemaker
from sagemaker import get_execution_role

sagemaker_session = sagemaker.Session()
role = get_execution_role() # replace it with role ARN if you are not using SageMaker Notebook or Studio environments.

bucket = sagemaker_session.default_bucket()
prefix = 'sagemaker/pytorch-distribution-options'
print('Bucket:\\n{}'.format(bucket))
"""
UPLOAD_CELL = """
data_url = sagemaker_session.upload_data(path="./hymenoptera_data", key_prefix="hymenoptera_data")
print(f"S3 location of dataset {data_url}")
"""
ESTIMATOR_CELL = """
from sagemaker.pytorch import PyTorch

ps_instance_type = 'ml.p3.2xlarge'
ps_instance_count = 2

hyperparameters = {
  'train-script': 'train_ddp.py',
  'epochs': 25,
  }

estimator_ms = PyTorch(
                       source_dir='2_sources',
                       entry_point='launcher.py', 
                       role=role,
                       framework_version='1.9',
                       py_version='py38',
                       disable_profiler=True,
                       debugger_hook_config=False,
                       hyperparameters=hyperparameters,
                       instance_count=ps_instance_count, 
                       instance_type=ps_instance_type,
                       )
"""  # noqa: W291 (the seed's trailing spaces, kept)
FIT_CELL = """
estimator_ms.fit(inputs={"train":f"{data_url}/train", "val":f"{data_url}/val"})
"""
CHANGES = [
    ("import sagemaker\n", "import cloudddp.sagemaker as sagemaker\n"),
    ("from sagemaker import get_execution_role", "from cloudddp.sagemaker import get_execution_role"),
    ("role = get_execution_role()", f"role = {ROLE!r}"),
    ("from sagemaker.pytorch import PyTorch", "from cloudddp.sagemaker import PyTorch"),
    ("entry_point='launcher.py'", "entry_point='train_ddp.py'"),
    ("  'train-script': 'train_ddp.py',\n", ""),
]


def changed(cell: str, extra: list[tuple[str, str]] = ()) -> str:  # type: ignore[assignment]
    for old, new in [*CHANGES, *extra]:
        if old in cell:
            cell = cell.replace(old, new)
    return cell


@pytest.fixture
def notebook_folder(moto: MotoServer, tmp_path: Path, small_demo_data: Path) -> Path:
    """The seed's folder: 2_sources/ with the training script, ./hymenoptera_data with the images."""
    (tmp_path / "2_sources").mkdir()
    for script in (REPO / "sources").glob("*.py"):  # train_ddp.py and the modules it imports
        shutil.copy(script, tmp_path / "2_sources")
    shutil.copytree(small_demo_data, tmp_path / "hymenoptera_data")
    return tmp_path


def run_cells(*cells: str, extra: list[tuple[str, str]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    namespace: dict[str, Any] = {}
    for cell in cells:
        exec(changed(cell, extra), namespace)
    return namespace


def test_seed_cells_create_the_training_job_on_the_real_instance_type(
    notebook_folder: Path, moto: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = run_cells(SETUP_CELL, UPLOAD_CELL, ESTIMATOR_CELL, FIT_CELL)
    assert ns["bucket"] == BUCKET
    assert ns["data_url"] == f"s3://{BUCKET}/hymenoptera_data"
    (request,) = moto.created()
    job = ns["estimator_ms"].latest_training_job.name
    assert request["TrainingJobName"] == job and job.startswith("pytorch-training-")
    assert request["AlgorithmSpecification"]["TrainingImage"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.9-gpu-py38"
    )
    assert request["ResourceConfig"] == {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30}
    assert request["RoleArn"] == ROLE
    assert request["HyperParameters"]["epochs"] == "25"
    assert "train-script" not in request["HyperParameters"]
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in request["InputDataConfig"]}
    assert channels == {"train": f"{ns['data_url']}/train", "val": f"{ns['data_url']}/val"}
    assert request["OutputDataConfig"] == {"S3OutputPath": f"s3://{BUCKET}/"}
    # The code sits where the SDK v2 puts it, with cloudddp's launcher and the training script inside.
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    assert submit == f"s3://{BUCKET}/{job}/source/sourcedir.tar.gz"
    with tarfile.open(fileobj=io.BytesIO(moto.read(submit))) as tar:
        names = set(tar.getnames())
        job_config = json.loads(tar.extractfile("cloudddp_job.json").read())  # type: ignore[union-attr]
    assert {"train_ddp.py", "cloudddp_bootstrap.py", "cloudddp/launcher/cli.py"} <= names
    assert job_config["entry_point"] == "train_ddp.py"
    # moto has the job: describe works through the estimator, and model_data is where SageMaker writes it.
    assert ns["estimator_ms"].latest_training_job.describe()["TrainingJobName"] == job
    assert ns["estimator_ms"].model_data.startswith(f"s3://{BUCKET}/")
    assert f"submitted {job}" in capsys.readouterr().out


@pytest.mark.slow
def test_seed_cells_train_for_real_on_two_local_nodes(notebook_folder: Path, moto: MotoServer) -> None:
    local = [("ps_instance_type = 'ml.p3.2xlarge'", "ps_instance_type = 'local'"), ("'epochs': 25", "'epochs': 1")]
    ns = run_cells(SETUP_CELL, UPLOAD_CELL, ESTIMATOR_CELL, FIT_CELL, extra=local)
    estimator = ns["estimator_ms"]
    job = estimator.latest_training_job.name
    assert moto.created() == []  # nothing was sent to SageMaker
    assert estimator.model_data == f"s3://{BUCKET}/{job}/output/model.tar.gz"
    with tarfile.open(fileobj=io.BytesIO(moto.read(estimator.model_data))) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    # Both nodes trained (each rank leaves its fingerprint); rank 0 saved the model and its metrics.
    assert {"model.pt", "metrics.json", "fingerprint-rank0.txt", "fingerprint-rank1.txt"} <= set(members)
    assert members["fingerprint-rank0.txt"] == members["fingerprint-rank1.txt"]  # DDP kept them in sync
    import torch

    state = torch.load(io.BytesIO(members["model.pt"]), map_location="cpu")
    (classifier,) = [v for k, v in state.items() if k.endswith("fc.weight")]
    assert classifier.shape[0] == 2  # the demo's two classes, like the seed's ants and bees
    metrics = json.loads(members["metrics.json"])
    assert (metrics["epoch"], metrics["world_size"]) == (1, 2)
    assert f"{job}/output/output.tar.gz" in moto.keys(BUCKET)
    # Each node saw the channels in its /opt/ml-style layout, downloaded from S3.
    node = Path("cloudddp-runs") / job / "nodes" / "algo-2" / "input" / "data"
    assert sorted(p.name for p in (node / "train").iterdir()) == sorted(
        p.name for p in (notebook_folder / "hymenoptera_data" / "train").iterdir()
    )
