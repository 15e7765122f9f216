"""The drop-in refuses the framework versions SDK v2 refuses for torch_distributed and pytorchddp.

Upstream: aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0),
src/sagemaker/fw_utils.py `validate_torch_distributed_distribution` (TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS,
TRAINIUM_SUPPORTED_TORCH_DISTRIBUTED_FRAMEWORK_VERSIONS, GPU and Trainium instances only) and
`_validate_smdataparallel_args` (SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"]), reached from
src/sagemaker/pytorch/estimator.py `PyTorch.__init__` (pytorchddp rewritten to smdistributed dataparallel first).
v2 compares the version as given: "2.5" (the README's example until now) is not "2.5.1". image_uri skips the
version checks. The cases below are v2's answers for these arguments (ValueError or accepted).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helpers import require_environment

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker import InstanceGroup, PyTorch

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311"
REPO = Path(__file__).resolve().parents[3]

# (distribution, framework_version, py_version, instance_type, v2 refuses it)
CASES = [
    ("torch_distributed", "2.5", "py311", "ml.g5.12xlarge", True),  # the README's example until now
    ("torch_distributed", "2.5.1", "py311", "ml.g5.12xlarge", False),
    ("torch_distributed", "2.4", "py311", "ml.p4d.24xlarge", True),  # the table has 2.4.1, not 2.4 or 2.4.0
    ("torch_distributed", "2.4.1", "py311", "ml.p4d.24xlarge", False),
    ("torch_distributed", "1.13.1", "py39", "ml.g5.2xlarge", False),
    ("torch_distributed", "1.12.1", "py38", "ml.g5.2xlarge", True),
    ("torch_distributed", "2.8.0", "py312", "ml.m5.xlarge", True),  # GPU and Trainium instances only
    ("torch_distributed", "2.0.0", "py310", "ml.trn1.32xlarge", False),
    ("torch_distributed", "2.1.0", "py310", "ml.trn1.32xlarge", True),
    ("pytorchddp", "1.13", "py39", "ml.p4d.24xlarge", True),  # the table has 1.13.1, not 1.13
    ("pytorchddp", "1.13.1", "py39", "ml.p4d.24xlarge", False),
    ("pytorchddp", "2.2.0", "py310", "ml.p4d.24xlarge", False),
    ("pytorchddp", "2.5.1", "py311", "ml.p4d.24xlarge", True),  # smdataparallel's table ends at 2.2.0
]


@pytest.fixture(autouse=True)
def region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")


@pytest.fixture
def source(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('training')\n")
    return tmp_path


def estimator(source: Path, **arguments: Any) -> PyTorch:
    base = {"entry_point": "train.py", "source_dir": str(source), "role": ROLE, "instance_count": 2}
    return PyTorch(**{**base, **arguments})


@pytest.mark.parametrize(("distribution", "version", "py", "instance_type", "refused"), CASES)
def test_framework_versions_as_v2_takes_them(
    source: Path, distribution: str, version: str, py: str, instance_type: str, refused: bool
) -> None:
    arguments = {"framework_version": version, "py_version": py, "instance_type": instance_type,
                 "distribution": {distribution: {"enabled": True}}}  # fmt: skip
    if refused:
        with pytest.raises(CloudDDPError, match=f"framework_version {re.escape(version)} |only for GPU"):
            estimator(source, **arguments)
    else:
        assert estimator(source, **arguments).args.distribution == distribution


def test_image_uri_skips_the_version_tables(source: Path) -> None:
    est = estimator(source, image_uri=IMAGE, instance_type="ml.g5.12xlarge",
                    distribution={"torch_distributed": {"enabled": True}})  # fmt: skip
    assert est.args.distribution == "torch_distributed"


def test_a_disabled_distribution_is_not_checked(source: Path) -> None:
    est = estimator(source, framework_version="2.5", py_version="py311", instance_type="ml.g5.12xlarge",
                    distribution={"torch_distributed": {"enabled": False}})  # fmt: skip
    assert est.args.distribution is None


def test_the_chosen_instance_group_is_checked(source: Path) -> None:
    groups = [InstanceGroup("data", "ml.c5.2xlarge", 1), InstanceGroup("train", "ml.g5.12xlarge", 2)]
    distribution = {"torch_distributed": {"enabled": True}, "instance_groups": ["train"]}
    arguments = {"instance_count": None, "instance_type": None, "instance_groups": groups,
                 "distribution": distribution, "py_version": "py311"}  # fmt: skip
    with pytest.raises(CloudDDPError, match=r"instance ml\.g5\.12xlarge"):
        estimator(source, framework_version="2.5", **arguments)
    assert estimator(source, framework_version="2.5.1", **arguments).args.distribution == "torch_distributed"


@pytest.mark.parametrize("document", ["README.md", "docs/providers/sagemaker-sdk-v2.md"])
def test_the_documented_example_is_one_v2_takes(document: str, source: Path) -> None:
    text = (REPO / document).read_text()
    example = re.search(r"est = PyTorch\((.*?)\n\)", text, re.S)
    assert example is not None
    version = re.search(r'framework_version="([^"]+)"', example.group(1))
    assert version is not None
    est = estimator(source, framework_version=version.group(1), py_version="py311", instance_type="ml.g5.12xlarge",
                    distribution={"torch_distributed": {"enabled": True}})  # fmt: skip
    assert est.args.distribution == "torch_distributed"


SDK2_PYTHON = REPO / ".venv-sdk2" / "bin" / "python"  # `make sdk2-env`: sagemaker>=2.200,<3
SDK2_CHECK = """\
import json, sys
from sagemaker.fw_utils import validate_smdistributed, validate_torch_distributed_distribution
out = []
for distribution, version, py, instance_type in json.loads(sys.argv[1]):
    try:
        if distribution == "torch_distributed":
            validate_torch_distributed_distribution(instance_type, {distribution: {"enabled": True}}, version, py,
                                                    None, "train.py")
        else:
            validate_smdistributed(instance_type, "pytorch", version, py,
                                   {"smdistributed": {"dataparallel": {"enabled": True}}}, None)
        out.append(False)
    except ValueError:
        out.append(True)
print(json.dumps(out))
"""


@pytest.mark.slow  # the full tier: make test-all builds .venv-sdk2 first
@pytest.mark.sagemaker_sdk
def test_the_cases_are_the_real_sdk_v2s_answers() -> None:
    """Differential: the same cases through the real SDK v2's fw_utils checks, in .venv-sdk2."""
    import json
    import subprocess

    require_environment(SDK2_PYTHON, "make sdk2-env")
    cases = [[d, v, p, i] for d, v, p, i, _ in CASES]
    result = subprocess.run([str(SDK2_PYTHON), "-c", SDK2_CHECK, json.dumps(cases)], capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [refused for *_, refused in CASES]
