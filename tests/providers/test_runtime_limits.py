"""Run-time limits: a job that gives no max_runtime gets each platform's own default, not a common 24 h.

Before: the spec's default max_runtime (24 h) went to every platform, so an OCI job carried
maximum_runtime_in_minutes: 1440 (ADS sends none: its train.yaml has no such field, oracle/accelerated-data-science
0e785b9fd36fb354019e0924b94ac2b0ec6f235a) and stopped at 24 h without warning, and Slurm and PBS jobs got --time /
walltime 24:00:00 instead of the partition's or queue's limit. Now (JobSpec.runtime_limit, one rule): not given is
none on OCI, Slurm and PBS (the dry run says so), 24 h on SageMaker, whose CreateTrainingJob requires a
StoppingCondition, as the SDK v2 sends it (aws/sagemaker-python-sdk v2.257.6, fc582aaa46faf7b7e16ab1e13840869712174cd0,
src/sagemaker/estimator.py EstimatorBase: max_run=24 * 60 * 60). A given max_runtime still goes everywhere.

Each case is `cloudddp render` / `launch --dry-run` run in process (typer's CliRunner), as the golden dry runs are.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from cloudddp.cli import app
from cloudddp.job_spec import build_spec

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
OCI = ["-p", "oci", "--compartment", "ocid1.compartment.oc1..aaaalimits", "--project",
       "ocid1.datascienceproject.oc1.iad.aaaalimits", "--image", "iad.ocir.io/ns/train:1", "--work-dir", "oci://b@ns/p"]  # fmt: skip


def request(output: str) -> dict[str, Any]:
    return yaml.safe_load(output)["request"]


def directive(prefix: str) -> Callable[[str], str | None]:
    """The script's line that starts with `prefix`, or its `# no ...` comment: what the dry run says of the limit."""

    def find(output: str) -> str | None:
        return next((line for line in output.splitlines() if line.startswith((prefix, "# no "))), None)

    return find


CASES: dict[str, tuple[list[str], Callable[[str], Any], Any, Any]] = {
    # platform: (command before the script, what to read, not given, --max-runtime 3601)
    "sagemaker": (["launch", "-p", "sagemaker", "--region", "us-east-1", "--role", ROLE, "--dry-run"],
                  lambda out: request(out)["StoppingCondition"]["MaxRuntimeInSeconds"], 86400, 3601),
    "oci": (["render", *OCI],
            lambda out: request(out)["create_job"]["job_node_configuration_details"]["maximum_runtime_in_minutes"],
            None, 61),
    "slurm": (["render", "-p", "slurm"], directive("#SBATCH --time"),
              "# no --time: max_runtime not given, so the partition's limit applies", "#SBATCH --time=01:01:00"),
    "pbs": (["render", "-p", "pbs"], directive("#PBS -l walltime"),
            "# no walltime: max_runtime not given, so the queue's walltime applies", "#PBS -l walltime=01:00:01"),
}  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    (root / "sources").mkdir(parents=True)
    (root / "sources" / "train.py").write_text("print('train')\n")
    monkeypatch.chdir(root)
    for name in list(os.environ):
        if name.startswith(("AWS_", "OCI_", "CLOUDDDP_", "SM_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    return root


def dry_run(argv: list[str]) -> str:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    return result.stdout


@pytest.mark.parametrize("platform", sorted(CASES))
def test_a_job_without_max_runtime_gets_the_platforms_own_limit(platform: str, project: Path) -> None:
    command, read, not_given, _ = CASES[platform]
    assert read(dry_run([*command, "sources/train.py"])) == not_given


@pytest.mark.parametrize("platform", sorted(CASES))
def test_a_given_max_runtime_still_goes_to_every_platform(platform: str, project: Path) -> None:
    command, read, _, given = CASES[platform]
    assert read(dry_run([*command, "--max-runtime", "3601", "sources/train.py"])) == given


def test_the_job_spec_leaves_max_runtime_unset_and_one_rule_fills_it(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    spec = build_spec({"entry_point": "train.py", "source_dir": str(tmp_path)})
    assert spec.max_runtime is None
    assert (spec.runtime_limit(86400), spec.runtime_limit(None)) == (86400, None)
    given = build_spec({"entry_point": "train.py", "source_dir": str(tmp_path), "max_runtime": 60})
    assert (given.runtime_limit(86400), given.runtime_limit(None)) == (60, 60)


def test_slurm_and_pbs_read_their_directives_past_the_comment(project: Path) -> None:
    """sbatch and qsub stop reading directives at the first command, not at a comment: every option after the
    `# no ...` line is still a directive (sbatch(1) "The batch script may contain options preceded with #SBATCH
    before any executable commands"; OpenPBS qsub reads directives until the first executable line)."""
    for command, prefix in (CASES["slurm"][0], "#SBATCH"), (CASES["pbs"][0], "#PBS"):
        lines = dry_run([*command, "sources/train.py"]).splitlines()
        comment = next(i for i, line in enumerate(lines) if line.startswith("# no "))
        first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
        assert comment < first_command and lines[comment + 1].startswith(prefix)
        assert not any(re.match(r"#(SBATCH|PBS)\b", line) for line in lines[first_command:])
