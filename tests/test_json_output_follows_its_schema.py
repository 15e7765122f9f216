"""`--format json` of status, list, launch --no-wait and render: one document each, valid against the published
schema (cloudddp/json_output.py OUTPUT_SCHEMA), secrets masked as in the text output."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import cli, run_cli

from cloudddp import job_index
from cloudddp.json_output import OUTPUT_SCHEMA, SCHEMA_VERSION

VALIDATOR = jsonschema.Draft202012Validator(OUTPUT_SCHEMA, format_checker=jsonschema.FormatChecker())


def printed(stdout: str, kind: str) -> dict[str, Any]:
    document = json.loads(stdout)  # the whole output is the one document
    VALIDATOR.validate(document)
    assert (document["schema_version"], document["kind"]) == (SCHEMA_VERSION, kind)
    return document  # type: ignore[no-any-return]


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(OUTPUT_SCHEMA)


def test_render_prints_the_request_with_secrets_masked(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = cli("render", "--format", "json", "-e", "HF_TOKEN=hf_secret_value", str(tmp_path / "train.py"),
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = printed(result.stdout, "request")
    assert document["provider"] == "local" and document["request"]["nodes"][0]["env"]["HF_TOKEN"] == "***"
    assert "hf_secret_value" not in result.stdout


def test_status_of_a_local_run(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "done"
    run.mkdir(parents=True)
    state = {"state": "SUCCEEDED", "launched": time.time_ns(), "exit_code": 0, "nodes": {"algo-1": {"exit_code": 0}}}
    (run / "state.json").write_text(json.dumps(state))
    result = cli("status", "latest", "--format", "json", env={"CLOUDDDP_RUNS_DIR": str(tmp_path / "runs")})
    document = printed(result.stdout, "status")
    assert document["state"] == "SUCCEEDED" and document["nodes"] == {"algo-1": "exit 0"}
    assert document["artifacts"] == str(run / "model") and document["provider"] == "local"


def test_list_says_which_states_are_current() -> None:
    job_index.record("local", "/nowhere/run", "gone", "cloudddp launch x.py", nodes=2)
    document = printed(cli("list", "--format", "json").stdout, "list")
    (job,) = document["jobs"]
    assert job["name"] == "gone" and job["command"] == "cloudddp launch x.py" and job["nodes"] == 2
    assert job["state"] is None and job["state_is_current"] is False  # the local provider has no such run
    assert job["duration_s"] is None  # nor a state to time it by


def test_list_gives_an_ended_jobs_duration_and_null_for_what_is_unknown(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "done"
    run.mkdir(parents=True)
    (run / "state.json").write_text(json.dumps({"state": "SUCCEEDED", "launched": time.time_ns(), "nodes": {}}))
    job_index.record("local", str(run), "done", "")  # launched as an older cloudddp would record it: no nodes
    document = printed(cli("list", "--format", "json").stdout, "list")
    (job,) = document["jobs"]
    assert (job["state"], job["state_is_current"], job["nodes"]) == ("SUCCEEDED", True, None)
    assert 0 <= job["duration_s"] < 60  # from its submission to now, when it was first seen finished
    again = printed(cli("list", "--format", "json").stdout, "list")["jobs"][0]
    assert again["state_is_current"] is False  # not asked again: the end kept the first time is its end
    assert again["duration_s"] == pytest.approx(job["duration_s"], abs=0.5)  # (kept while that list ran)


@pytest.mark.parametrize("args", [["launch", "--format", "json"], ["status", "latest", "--format", "yaml"]])
def test_json_that_cannot_be_one_document_is_refused(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = cli(*args, *(["train.py"] if args[0] == "launch" else []), cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == "" and "--format" in result.stderr, result.stderr


@pytest.mark.process
def test_launch_no_wait_prints_the_job_it_submitted(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = run_cli("launch", "--no-wait", "--format", "json", "--emulate", "none", "--name", "quick",
                     "--runs-dir", str(tmp_path / "runs"), str(tmp_path / "train.py"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = printed(result.stdout, "submitted")
    assert document["name"] == "quick" and document["provider"] == "local"
    assert Path(document["job_id"]).parent == tmp_path / "runs"


def test_schema_prints_the_job_specs_json_schema_and_a_spec_file_validates_against_it(tmp_path: Path) -> None:
    import yaml

    result = cli("schema")
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = yaml.safe_load("entry_point: train.py\nnodes: 2\nsagemaker:\n  instance_type: ml.g5.12xlarge\n")
    assert list(validator.iter_errors(good)) == []
    typo = {"entry_point": "train.py", "nodez": 2}  # unknown keys are errors, as in cloudddp itself
    assert [error.message for error in validator.iter_errors(typo)] != []
