"""Golden dry runs: `cloudddp launch --dry-run` for a fixed set of specs, byte for byte.

The dry run is the request a platform receives, so a refactoring must not change it by
accident. Each case runs the real CLI in-process in a fresh project folder; what depends
on the machine or the clock (the folder, the interpreter, the time stamp, the core count)
is normalised, everything else is compared exactly with `dry_runs/<case>.yaml`.

A change that is intended: regenerate with
    CLOUDDDP_UPDATE_GOLDEN=1 .venv/bin/pytest tests/golden -q
and name the changed lines and the reason in the commit message.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from helpers.ads_yaml import guide_ads_yaml
from typer.testing import CliRunner

from cloudddp.cli import app

GOLDEN = Path(__file__).parent / "dry_runs"
UPDATE = os.environ.get("CLOUDDDP_UPDATE_GOLDEN") == "1"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
COMPARTMENT = "ocid1.compartment.oc1..aaaagolden"
PROJECT = "ocid1.datascienceproject.oc1.iad.aaaagolden"
OCI_IMAGE = "iad.ocir.io/ns/train:1"
OCI_BASE = ["-p", "oci", "--compartment", COMPARTMENT, "--project", PROJECT, "--image", OCI_IMAGE,
            "--work-dir", "oci://bkt@ns/prefix"]  # fmt: skip
SM_BASE = ["-p", "sagemaker", "--region", "us-east-1", "--role", ROLE]

LOCAL_YAML = """\
name: yaml-job
entry_point: train.py
source_dir: sources
nodes: 3
inputs: {train: data/train, val: data/val}
environment: {WANDB_MODE: offline, DB_PASSWORD: hunter2}
hyperparameters: {epochs: 3, lr: 0.01, augment: true}
local: {emulate: slurm, master_port: 29999, link_inputs: false}
"""
SAGEMAKER_YAML = """\
name: sm-yaml
entry_point: train.py
source_dir: sources
nodes: 2
hyperparameters: {epochs: 5}
sagemaker:
  region: us-west-2
  role: arn:aws:iam::123456789012:role/SageMakerRole
  instance_type: ml.p4d.24xlarge
  volume_size_gb: 200
  tags: {team: ml, cost-center: "42"}
  framework_version: "2.3"
  py_version: py311
"""
# An Oracle ADS `opctl` train.yaml (the shape of the ADS guide's example, with valid OCIDs).
ADS_YAML = guide_ads_yaml(
    project=PROJECT,
    compartment=COMPARTMENT,
    log_group="ocid1.loggroup.oc1.iad.aaaagolden",
    subnet="ocid1.subnet.oc1.iad.aaaagolden",
    image=OCI_IMAGE,
    env={"NCCL_ASYNC_ERROR_HANDLING": "1"},
    runtime='entryPoint: "sources/train.py"\nargs:\n  - --epochs\n  - "2"\nenv:\n  - name: WANDB_MODE\n    value: offline\n',
)

CASES: dict[str, list[str]] = {
    "local-sagemaker": ["launch", "-p", "local", "--nodes", "2", "-H", "epochs=2", "-e", "API_TOKEN=hunter2",
                        "-i", "train=data/train", "--dry-run", "sources/train.py", "--", "--foo", "1"],
    "local-oci-checkpoint-output": ["launch", "--emulate", "oci", "--nodes", "3", "--nproc-per-node", "2",
                                    "--checkpoint", "ckpt", "--output", "out", "--max-runtime", "600",
                                    "--name", "oci-emu", "--dry-run", "sources/train.py"],
    "local-kubeflow-module": ["launch", "--emulate", "kubeflow", "--nodes", "2", "-m", "--source-dir", "sources",
                              "--runs-dir", "runs", "--dry-run", "train", "--", "--x"],
    "local-slurm-yaml": ["launch", "-f", "job-local.yaml", "--nodes", "2", "--dry-run"],
    "local-none-render": ["render", "--emulate", "none", "--nproc-per-node", "cpu", "-i", "train=data/train",
                          "sources/train.py"],
    "sagemaker-toolkit": ["launch", *SM_BASE, "--nodes", "2", "-i", "train=data/train", "-H", "epochs=2",
                          "-H", "lr=0.1", "-e", "HF_TOKEN=hf_secret", "--tag", "team=ml", "--dry-run",
                          "sources/train.py", "--", "--foo", "bar"],
    "sagemaker-spot-gpu": ["launch", *SM_BASE, "--instance-type", "ml.g5.12xlarge", "--nodes", "4", "--spot",
                           "--max-wait", "7200", "--max-runtime", "3600", "--checkpoint-s3", "s3://ckpts/run1",
                           "--bucket", "my-bucket", "--prefix", "exp", "--kms-key", "alias/k", "--subnet", "subnet-1",
                           "--subnet", "subnet-2", "--security-group", "sg-1", "-i", "train=s3://data/train",
                           "--output", "s3://models/out", "--dry-run", "sources/train.py"],
    "sagemaker-byo-isolated": ["launch", *SM_BASE, "--image", "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1",
                               "--network-isolation", "--inter-container-encryption", "--nproc-per-node", "gpu",
                               "-i", "train=data/train", "-H", "epochs=1", "--dry-run", "sources/train.py"],
    "sagemaker-yaml": ["launch", "-p", "sagemaker", "-f", "job-sagemaker.yaml", "--spot", "--max-wait", "90000",
                       "--dry-run"],
    "oci-basic": ["launch", *OCI_BASE, "--nodes", "2", "-i", "train=data/train", "-H", "epochs=2",
                  "-e", "NCCL_DEBUG=INFO", "--log-group", "ocid1.loggroup.oc1.iad.aaaagolden", "--dry-run",
                  "sources/train.py", "--", "--foo", "1"],
    "oci-uris-fixed-shape": ["launch", *OCI_BASE, "--nodes", "3", "--shape", "BM.GPU.A100-v2.8",
                             "--subnet-id", "ocid1.subnet.oc1.iad.aaaagolden", "--block-storage-gb", "500",
                             "-i", "train=oci://data@ns/sets/train", "--output", "oci://models@ns/run7",
                             "--checkpoint", "oci://models@ns/ckpt", "--dry-run", "sources/train.py"],
    "oci-flex-shape": ["render", *OCI_BASE, "--shape", "VM.Standard.E5.Flex", "--ocpus", "4", "--memory-gb", "64",
                       "--nproc-per-node", "4", "--max-runtime", "7200", "sources/train.py"],
    "oci-ads-yaml": ["launch", "-p", "oci", "-f", "train.yaml", "--dry-run"],
    "slurm-partition-gpus": ["launch", "-p", "slurm", "--nodes", "2", "--partition", "gpu", "--gpus-per-node", "4",
                             "--time", "02:00:00", "-i", "train=data/train", "-H", "epochs=2", "--dry-run",
                             "sources/train.py", "--", "--foo", "1"],
    "slurm-container-requeue": ["render", "-p", "slurm", "--nodes", "3", "--container-image", "nvcr.io/nvidia/pytorch:24.01-py3",
                                "--requeue", "--account", "proj", "--qos", "high", "-e", "NCCL_DEBUG=INFO",
                                "--checkpoint", "ckpt", "sources/train.py"],
    "pbs-queue-gpus": ["launch", "-p", "pbs", "--nodes", "2", "--queue", "workq", "--ngpus", "1", "--ncpus", "8",
                       "-e", "NCCL_DEBUG=INFO", "-i", "train=data/train", "--dry-run", "sources/train.py"],
    "kubernetes-pytorchjob": ["launch", "-p", "kubernetes", "--image", "reg.example.com/train:1", "--nodes", "2",
                              "--gpus", "1", "--namespace", "ml", "-H", "epochs=2", "--dry-run", "sources/train.py"],
    "kubernetes-trainjob": ["render", "-p", "kubernetes", "--kubeflow-api", "trainer-v2", "--image",
                            "reg.example.com/train:1", "--nodes", "3", "--cpu", "4", "--memory", "16Gi",
                            "--node-selector", "pool=gpu", "sources/train.py"],
    "kubernetes-s3-inputs": ["launch", "-p", "kubernetes", "--image", "reg.example.com/train:1", "--nodes", "2",
                             "--namespace", "ml", "-i", "train=s3://datasets/demo/train", "--s3-endpoint",
                             "http://minio.minio:9000", "--s3-secret", "minio-creds", "--dry-run", "sources/train.py"],
}  # fmt: skip


def make_project(root: Path) -> None:
    """The folder every case runs in: a script, two data folders and the YAML specs."""
    (root / "sources").mkdir()
    (root / "sources" / "train.py").write_text("print('train')\n")
    for channel in ("train", "val"):
        (root / "data" / channel).mkdir(parents=True)
        (root / "data" / channel / "part-0.csv").write_text("1,2\n")
    (root / "job-local.yaml").write_text(LOCAL_YAML)
    (root / "job-sagemaker.yaml").write_text(SAGEMAKER_YAML)
    (root / "train.yaml").write_text(ADS_YAML)


def normalise(text: str, project: Path) -> str:
    """Replace what depends on the machine, the folder or the clock by a fixed placeholder."""
    text = text.replace(str(project), "<PROJECT>").replace(sys.executable, "<PYTHON>")
    text = re.sub(r"\d{8}-\d{6}(-\d{3})?(-[0-9a-f]{6})?", "<STAMP>", text)
    # The emulated Slurm job id is a checksum of the job name, which holds the time stamp.
    text = re.sub(r"(SLURM_JOB_?ID): '\d+'", r"\1: '<FROM-NAME>'", text)
    # SageMaker stages a local folder under a prefix keyed by a digest of its absolute path.
    return re.sub(r"(/inputs/[A-Za-z0-9._-]+-)[0-9a-f]{10}/", r"\1<PATH-DIGEST>/", text)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path.resolve() / "project"
    root.mkdir()
    make_project(root)
    monkeypatch.chdir(root)
    for name in list(os.environ):
        if name.startswith(("AWS_", "OCI_", "CLOUDDDP_", "SM_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SM_NUM_GPUS", "0")  # the SageMaker emulation's pin: the same file on a machine with GPUs
    # The local emulation splits this machine's cores between nodes: pretend to have 8 everywhere.
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    return root


@pytest.mark.process
@pytest.mark.parametrize("case", sorted(CASES))
def test_dry_run_is_byte_identical_to_the_golden_file(case: str, project: Path) -> None:
    result = CliRunner().invoke(app, CASES[case])
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    assert not list(project.glob("cloudddp-runs")) and not list(project.glob("runs")), "a dry run created a run folder"
    actual = normalise(result.stdout, project)
    golden = GOLDEN / f"{case}.yaml"
    if UPDATE:
        golden.write_text(actual)
    assert golden.is_file(), f"no golden file {golden.name}: run with CLOUDDDP_UPDATE_GOLDEN=1 to record it"
    assert actual == golden.read_text()
