"""The CLI says what it did not find: `logs` of a job that has printed nothing yet (it printed nothing and
exited 0), and a misspelled provider name (a did-you-mean, whatever its case)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import cli


def test_logs_of_a_job_without_lines_says_so_with_its_state(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "quiet"
    run.mkdir(parents=True)
    (run / "state.json").write_text(json.dumps({"state": "PENDING", "launched": time.time_ns(), "nodes": {}}))
    result = cli("logs", "latest", env={"CLOUDDDP_RUNS_DIR": str(tmp_path / "runs")})
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr
    assert result.stderr.strip() == "cloudddp: no log lines for latest yet (the job is PENDING)."


@pytest.mark.parametrize(("given", "meant"), [("Sagemaker", "sagemaker"), ("sagemkr", "sagemaker"), ("SLURM", "slurm"),
                                              ("kube", None)])  # fmt: skip
def test_a_misspelled_provider_gets_a_did_you_mean(given: str, meant: str | None) -> None:
    result = cli("status", "-p", given, "some-job")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert f"unknown provider {given!r}" in result.stderr
    assert (f"Did you mean {meant!r}?" in result.stderr) if meant else ("Did you mean" not in result.stderr)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"nodez": 2}, "nodez: unknown field, did you mean 'nodes'?"),
        ({"sagemaker": {"instance_typ": "x"}}, "sagemaker.instance_typ: unknown field, did you mean 'instance_type'?"),
        ({"sagemakr": {}}, "sagemakr: unknown field, did you mean 'sagemaker'?"),
        ({"zzzzz": 1}, "zzzzz: unknown field (check the spelling;"),
    ],
)
def test_a_misspelled_job_spec_key_gets_a_did_you_mean(data: dict[str, object], said: str) -> None:
    from cloudddp import CloudDDPError
    from cloudddp.job_spec import build_spec

    with pytest.raises(CloudDDPError) as raised:
        build_spec({"entry_point": "train.py", **data})
    assert said in str(raised.value)
