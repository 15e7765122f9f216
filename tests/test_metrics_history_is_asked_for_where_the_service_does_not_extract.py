"""The job spec's metric definitions reach the job as CLOUDDDP_METRICS (the launcher keeps a history with them) on
every provider whose service does not extract them itself; SageMaker sends MetricDefinitions and gets no variable.
One step in session.render, for every door (launch, Estimator, the drop-in)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import cli

from cloudddp.job_spec import build_spec
from cloudddp.metrics import with_history_asked
from cloudddp.providers import registry

# Quotes of both kinds, a backslash, a dollar and a backtick: the JSON must come through every script's quoting.
AWKWARD = {"loss": r"""loss: "([0-9.]+)'\s$x`"""}
SETTINGS = {
    "local": [],
    "oci": [
        "--compartment",
        "ocid1.compartment.oc1..aaaa",
        "--project",
        "ocid1.datascienceproject.oc1..aaaa",
        "--image",
        "iad.ocir.io/ns/train:1",
        "--work-dir",
        "oci://bucket@ns/prefix",
    ],
    "kubernetes": ["--image", "registry.example/train:1"],
    "slurm": [],
    "pbs": [],
}
SAGEMAKER = ["--region", "us-east-1", "--role", "arn:aws:iam::123456789012:role/SageMaker"]


def dry_run(provider: str, *extra: str, cwd: Path) -> str:
    (cwd / "t.py").write_text("print(1)\n")
    metric = [f"--metric={name}={regex}" for name, regex in AWKWARD.items()]
    done = cli("launch", "-p", provider, "--dry-run", "--nodes", "2", *metric, *extra, "t.py", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("provider", ["local", "oci", "kubernetes"])
def test_the_definitions_are_in_the_jobs_environment(provider: str, tmp_path: Path) -> None:
    rendered = dry_run(provider, *SETTINGS[provider], cwd=tmp_path)
    values = re.findall(r"CLOUDDDP_METRICS\W+(?:value: )?('.*'|\".*\")\s*$", rendered, re.MULTILINE)
    assert values, rendered
    assert {json.dumps(json.loads(yaml.safe_load(v))) for v in values} == {json.dumps(AWKWARD)}


@pytest.mark.process
@pytest.mark.parametrize("provider", ["slurm", "pbs"])
def test_the_batch_scripts_export_survives_bashs_quoting(provider: str, tmp_path: Path) -> None:
    script = dry_run(provider, cwd=tmp_path)
    exports = [line for line in script.splitlines() if line.startswith("export CLOUDDDP_METRICS=")]
    assert len(exports) == 1, script
    read = subprocess.run(["bash", "-c", f'{exports[0]}\nprintf %s "$CLOUDDDP_METRICS"'],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(read.stdout) == AWKWARD


def test_sagemaker_gets_metric_definitions_and_no_variable(tmp_path: Path) -> None:
    rendered = dry_run("sagemaker", *SAGEMAKER, cwd=tmp_path)
    assert "CLOUDDDP_METRICS" not in rendered
    assert "MetricDefinitions" in rendered
    assert registry.get("sagemaker").applies_metric_definitions
    assert not any(registry.get(name).applies_metric_definitions for name in SETTINGS)


def test_a_spec_without_definitions_or_with_the_users_own_variable_is_left_as_it_is() -> None:
    plain = build_spec({"entry_point": "t.py"})
    assert with_history_asked(plain, applied_by_service=False) is plain  # no history asked: the job runs as before
    own = build_spec({"entry_point": "t.py", "metrics": AWKWARD, "environment": {"CLOUDDDP_METRICS": "default"}})
    assert with_history_asked(own, applied_by_service=False).environment == {"CLOUDDDP_METRICS": "default"}
    asked = build_spec({"entry_point": "t.py", "metrics": AWKWARD})
    assert json.loads(with_history_asked(asked, applied_by_service=False).environment["CLOUDDDP_METRICS"]) == AWKWARD
    assert asked.environment == {}  # the caller's spec is not changed
    assert with_history_asked(asked, applied_by_service=True) is asked
