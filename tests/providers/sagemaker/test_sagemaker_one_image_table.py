"""`cloudddp launch -p sagemaker` and the SDK v2 drop-in pick the training image from one table.

Upstream: aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0),
src/sagemaker/image_uri_config/pytorch.json (scope training), generated into cloudddp/providers/sagemaker/image_table.py,
and src/sagemaker/image_uris.py `retrieve` (an alias such as "1.9" is looked up as 1.9.1, the tag keeps "1.9";
ml.g*/ml.p* get the gpu image). Before, the CLI had a table of its own (2.1 to 2.8 only): `--framework-version 1.9`
was refused while `PyTorch(framework_version="1.9", py_version="py38")` resolved it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import cli

from cloudddp.providers.sagemaker import images
from cloudddp.providers.sagemaker.image_table import VERSION_ALIASES, VERSIONS
from cloudddp.providers.sagemaker.image_uris import training_image_uri

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
REGIONS = ("us-east-1", "eu-west-1", "af-south-1", "cn-north-1", "us-gov-west-1")


def every_version() -> list[tuple[str, str]]:
    """Every version the table has (alias and full), with each of its Python versions."""
    names = {**{alias: full for alias, full in VERSION_ALIASES.items()}, **{full: full for full in VERSIONS}}
    return [(name, py) for name, full in names.items() for py in VERSIONS[full]["py_versions"]]


@pytest.mark.parametrize(("version", "py"), every_version())
def test_the_cli_and_the_dropin_agree_on_every_version(version: str, py: str) -> None:
    for region in REGIONS:
        for instance_type in ("ml.g5.12xlarge", "ml.m5.xlarge"):
            try:
                expected = training_image_uri(version, py, instance_type, region)
            except Exception as exc:  # a region the table has no registry in for this version: both refuse
                with pytest.raises(type(exc)):
                    images.training_image(None, region, version, py, instance_type)
                continue
            assert images.training_image(None, region, version, py, instance_type) == expected


def dry_run_image(tmp_path: Path, *options: str) -> str:
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    result = cli("launch", "-p", "sagemaker", "--region", "us-east-1", "--role", ROLE, *options, "--dry-run",
                 str(script), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    documents = [d for d in yaml.safe_load_all(result.stdout) if isinstance(d, dict)]
    found = [d["request"]["AlgorithmSpecification"]["TrainingImage"] for d in documents if "request" in d]
    assert found, result.stdout
    return found[0]


def test_launch_framework_version_1_9_resolves_as_the_dropin(tmp_path: Path) -> None:
    image = dry_run_image(tmp_path, "--framework-version", "1.9", "--py-version", "py38",
                          "--instance-type", "ml.p3.2xlarge")  # fmt: skip
    assert image == training_image_uri("1.9", "py38", "ml.p3.2xlarge", "us-east-1")
    assert image == "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.9-gpu-py38"


def test_launch_without_py_version_takes_the_tables_python(tmp_path: Path) -> None:
    """py311 was the default for every version; 1.9 has only py38 images."""
    image = dry_run_image(tmp_path, "--framework-version", "1.9", "--instance-type", "ml.m5.xlarge")
    assert image.endswith("pytorch-training:1.9-cpu-py38")


def test_the_default_image_is_unchanged(tmp_path: Path) -> None:
    assert dry_run_image(tmp_path).endswith("pytorch-training:2.5-cpu-py311")
