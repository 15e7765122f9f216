"""`targets:` in a job spec: each a partial spec merged over the job's common fields, the context filling what
neither sets; a bad target is one paragraph naming its field (exit 2); `--dry-run` prints every target's request,
`--target N|NAME` one; a target whose provider cannot read the job's inputs is refused before anything runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import cli

from cloudddp import config
from cloudddp.config import target_specs
from cloudddp.errors import CloudDDPError
from cloudddp.failover import pick, targets_from

ROLE = "arn:aws:iam::123456789012:role/FromContext"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "CLOUDDDP_SAGEMAKER_ROLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.chdir(tmp_path)
    path = config.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    context = {"nodes": 3, "sagemaker": {"role": ROLE, "region": "eu-west-1", "instance_type": "ml.c5.xlarge"}}
    path.write_text(yaml.safe_dump({"contexts": {"default": context}}))
    return tmp_path


def write_job(folder: Path, **fields: Any) -> Path:
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump({"name": "fo", "entry_point": "train.py", **fields}))
    return path


TWO_TARGETS = [
    {"name": "big", "provider": "sagemaker", "nodes": 4, "sagemaker": {"instance_type": "ml.p4d.24xlarge"}},
    {"provider": "local", "nproc_per_node": 1},
]


def test_a_target_wins_over_the_common_fields_and_the_context_fills_the_rest(project: Path) -> None:
    job = write_job(project, nproc_per_node=2, sagemaker={"volume_size_gb": 50}, targets=TWO_TARGETS)
    spec = config.job_spec("local", job, {})
    found = targets_from(target_specs(spec, job, {}))
    big, local = found
    assert (big.name, big.provider, local.name, local.provider) == ("big", "sagemaker", "local", "local")
    assert big.spec.nodes == 4 and big.spec.sagemaker.instance_type == "ml.p4d.24xlarge"  # the target's
    assert big.spec.sagemaker.volume_size_gb == 50 and big.spec.nproc_per_node == 2  # the job's common fields
    assert big.spec.sagemaker.role == ROLE and big.spec.sagemaker.region == "eu-west-1"  # the context's
    assert local.spec.nodes == 3 and local.spec.nproc_per_node == 1  # context, target
    assert big.spec.targets == [] and local.spec.targets == []


def test_a_targets_provider_variables_apply_to_it(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUDDDP_SAGEMAKER_REGION", "us-west-2")
    job = write_job(project, targets=TWO_TARGETS)
    spec = config.job_spec("local", job, {})
    assert targets_from(target_specs(spec, job, {}))[0].spec.sagemaker.region == "us-west-2"


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ({"provider": "azure"}, "targets.0.provider: Input should be 'local'"),
        ({"provider": "local", "sagemaker": {"role": ROLE}}, "a local target sets only its own section"),
        ({"provider": "local", "nodes": 0}, "targets.0.nodes: Input should be greater than or equal to 1"),
        ({"provider": "sagemaker", "sagemaker": {"instance_typ": "x"}}, "did you mean 'instance_type'"),
        ({"nodes": 2}, "targets.0.provider: Field required"),
        ({"provider": "local", "image": "x"}, "targets.0.image: unknown field"),
    ],
)
def test_a_bad_target_is_one_paragraph_naming_its_field(project: Path, target: dict[str, Any], says: str) -> None:
    write_job(project, targets=[target])
    result = cli("launch", "-f", "job.yaml", "--dry-run", cwd=project)
    assert result.returncode == 2, result.stdout
    assert says in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_two_targets_with_one_name_are_refused(project: Path) -> None:
    write_job(project, targets=[{"provider": "local"}, {"provider": "local"}])
    result = cli("launch", "-f", "job.yaml", "--dry-run", cwd=project)
    assert result.returncode == 2 and "two targets are called 'local'" in result.stderr


def test_the_dry_run_prints_every_targets_request_in_order(project: Path) -> None:
    write_job(project, targets=TWO_TARGETS, environment={"HF_TOKEN": "hf_secret_value_1234"})
    result = cli("launch", "-f", "job.yaml", "--dry-run", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "# target 1/2: big (sagemaker)" in result.stdout and "# target 2/2: local (local)" in result.stdout
    assert result.stdout.index("InstanceType: ml.p4d.24xlarge") < result.stdout.index("# target 2/2")
    assert "hf_secret_value_1234" not in result.stdout  # through session.render and the request's masking
    # Each job is named after its attempt (failover.attempt_spec), SageMaker and local adding their time stamp.
    sagemaker, local = re.findall(r"^name: (\S+)$", result.stdout, flags=re.MULTILINE)
    assert re.fullmatch(r"fo-1-[0-9a-f]{10}-\d{8}-\d{6}-\d{3}", sagemaker), sagemaker
    assert re.fullmatch(r"fo-2-[0-9a-f]{10}-\d{8}-\d{6}", local), local


def test_target_picks_one_by_number_or_name(project: Path) -> None:
    write_job(project, targets=TWO_TARGETS)
    by_number = cli("launch", "-f", "job.yaml", "--dry-run", "--target", "2", cwd=project)
    by_name = cli("launch", "-f", "job.yaml", "--dry-run", "--target", "big", cwd=project)
    assert by_number.returncode == by_name.returncode == 0, by_number.stderr + by_name.stderr
    assert by_number.stdout.startswith("provider: local") and by_name.stdout.startswith("provider: sagemaker")
    missing = cli("launch", "-f", "job.yaml", "--dry-run", "--target", "3", cwd=project)
    assert missing.returncode == 2 and "it has 1 (big), 2 (local)" in missing.stderr


def test_target_without_targets_is_refused(project: Path) -> None:
    write_job(project)
    result = cli("launch", "-f", "job.yaml", "--dry-run", "--target", "1", cwd=project)
    assert result.returncode == 2 and "has no `targets:` list" in result.stderr


def test_a_target_that_cannot_read_the_inputs_is_refused_at_dry_run(project: Path) -> None:
    write_job(project, targets=TWO_TARGETS, inputs={"train": "s3://my-data-bucket/train"})
    result = cli("launch", "-f", "job.yaml", "--dry-run", cwd=project)
    assert result.returncode == 2, result.stdout
    assert "1 of the 2 targets cannot run this job" in result.stderr
    assert "target 2 (local, local): inputs.train='s3://my-data-bucket/train'" in result.stderr
    assert "target 1" not in result.stderr  # SageMaker reads s3:// inputs


def test_pick_refuses_zero_and_unknown_names() -> None:
    with pytest.raises(CloudDDPError, match="no such target; it has none"):
        pick([], "0")
