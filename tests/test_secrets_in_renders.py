"""Secrets stay out of every rendering of a job and out of spec errors (tester findings 1-4, "the two doors").

1. `Estimator.logs()` hides a secret-named script option's value (`--api-key VALUE`), as `fit()` does.
2. `--dry-run`, `render` and `Estimator.dry_run()` hide it too, on every provider that renders it (local,
   SageMaker), while the request sent keeps it.
3. A local run's request.yaml stays valid YAML with a masked option (a bare `***` is a YAML alias).
4. A spec error shows no secret when `environment` or `hyperparameters` is given as a list (`- HF_TOKEN=...`,
   `[{name, value}]`), nor does `-e NAME:VALUE` with the wrong separator.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from helpers import cli

from cloudddp import Estimator
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers import JobHandle
from cloudddp.providers.local.provider import LocalProvider

OPTION_SECRET = "argsecret4444"
INLINE_SECRET = "argsecret5555"
ARGS = ["--api-key", OPTION_SECRET, f"--hf-token={INLINE_SECRET}", "--epochs", "3"]
SAGEMAKER = ["-p", "sagemaker", "--instance-type", "ml.m5.xlarge", "--region", "us-east-1",
             "--role", "arn:aws:iam::123456789012:role/SageMaker"]  # fmt: skip


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "show.py").write_text("import sys\nprint('ARGV', sys.argv[1:], flush=True)\n")
    return folder


def assert_options_masked(text: str) -> None:
    """No option value in `text`, each shown as *** where it was, and `text` still YAML."""
    assert OPTION_SECRET not in text and INLINE_SECRET not in text, text
    assert re.search(r"- --api-key\n\s*- '\*\*\*'\n", text), text
    assert "--hf-token=***" in text, text
    assert re.search(r"- --epochs\n\s*- '3'\n", text), text  # a setting's value stays
    yaml.safe_load(text)


# -- 1. Estimator.logs() -------------------------------------------------------------------------


def test_estimator_logs_hide_a_secret_named_script_option(
    source: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = [f"[node-0] ARGV {ARGS}", f"[node-0] bare: {OPTION_SECRET}", f"[node-0] bare: {INLINE_SECRET}"]

    def job_logs(self: LocalProvider, job_id: str, follow: bool = False) -> Iterator[str]:
        yield from printed  # what the job wrote, as the local provider reads it back

    monkeypatch.setattr(LocalProvider, "logs", job_logs)
    est = Estimator(entry_point="show.py", source_dir=str(source), args=ARGS, emulate="none")
    est.latest_job = JobHandle(provider="local", job_id="run")
    est.logs()
    shown = capsys.readouterr().out.splitlines()
    assert shown == ["[node-0] ARGV ['--api-key', '***', '--hf-token=***', '--epochs', '3']",
                     "[node-0] bare: ***", "[node-0] bare: ***"]  # fmt: skip


@pytest.mark.slow
def test_estimator_logs_of_a_local_run_hide_what_fit_hid(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    est = Estimator(entry_point="show.py", source_dir=str(source), args=ARGS, emulate="none",
                    runs_dir=str(tmp_path / "runs"))  # fmt: skip
    est.fit()
    followed = capsys.readouterr().out
    est.logs()
    shown = capsys.readouterr().out
    assert "[node-0] ARGV ['--api-key', '***', '--hf-token=***', '--epochs', '3']" in followed
    assert "[node-0] ARGV ['--api-key', '***', '--hf-token=***', '--epochs', '3']" in shown
    assert OPTION_SECRET not in followed + shown and INLINE_SECRET not in followed + shown


# -- 2. dry runs -----------------------------------------------------------------------------------


def test_local_dry_run_hides_secret_named_script_options(source: Path, tmp_path: Path) -> None:
    result = cli("launch", "--runs-dir", str(tmp_path / "runs"), "--dry-run", str(source / "show.py"), "--", *ARGS)
    assert result.returncode == 0, result.stderr
    assert_options_masked(result.stdout)


def test_render_hides_secret_named_script_options(source: Path, tmp_path: Path) -> None:
    result = cli("render", "--runs-dir", str(tmp_path / "runs"), str(source / "show.py"), "--", *ARGS)
    assert result.returncode == 0, result.stderr
    assert_options_masked(result.stdout)


def test_sagemaker_dry_run_hides_secret_named_script_options(source: Path) -> None:
    result = cli("launch", *SAGEMAKER, "--dry-run", str(source / "show.py"), "--", *ARGS)
    assert result.returncode == 0, result.stderr
    assert_options_masked(result.stdout)


def test_estimator_dry_run_hides_them_and_the_request_keeps_them(source: Path, tmp_path: Path) -> None:
    est = Estimator(entry_point="show.py", source_dir=str(source), args=ARGS, emulate="none",
                    runs_dir=str(tmp_path / "runs"))  # fmt: skip
    assert_options_masked(est.dry_run())
    sent = LocalProvider(tmp_path / "runs").render(est.spec(None)).request
    assert sent.nodes[0].argv(29500)[-5:] == ARGS  # only what is shown is masked, not what runs


def test_sagemaker_estimator_dry_run_hides_them_and_the_upload_keeps_them(source: Path) -> None:
    est = Estimator(provider="sagemaker", entry_point="show.py", source_dir=str(source), args=ARGS,
                    instance_type="ml.m5.xlarge", role="arn:aws:iam::123456789012:role/SageMaker", region="us-east-1")  # fmt: skip
    assert_options_masked(est.dry_run())
    staged = json.dumps(est.provider.render(est.spec(None)).to_document(), default=str)
    assert OPTION_SECRET in staged and INLINE_SECRET in staged  # the job's own cloudddp_job.json keeps them


# -- 3. request.yaml -------------------------------------------------------------------------------


def test_local_request_yaml_is_valid_yaml_with_the_options_masked(source: Path, tmp_path: Path) -> None:
    provider = LocalProvider(tmp_path / "runs")
    spec = build_spec({"entry_point": "show.py", "source_dir": str(source), "args": ARGS,
                       "hyperparameters": {"db_password": "hpsecret7777"}, "local": {"emulate": "none"}})  # fmt: skip
    job = provider.render(spec)
    job.request.run_dir.mkdir(parents=True)
    provider.write_run_folder(job, launched=0)
    written = (job.request.run_dir / "request.yaml").read_text()
    assert yaml.safe_load(written) == yaml.safe_load(job.to_yaml())  # YAML, and the file is the dry run
    assert_options_masked(written)
    assert "hpsecret7777" not in written


# -- 4. spec errors --------------------------------------------------------------------------------

LIST_SPECS = {
    "name=value": "environment:\n  - HF_TOKEN=hf_listsecret123\nhyperparameters:\n  - api_key=hp_listsecret456\n",
    "name-value-pairs": "environment:\n  - {name: HF_TOKEN, value: hf_listsecret123}\n"
    "hyperparameters:\n  - {Name: api_key, Value: hp_listsecret456}\n",
    "name-colon-value": "environment:\n  - HF_TOKEN:hf_listsecret123\nhyperparameters: [[api_key, hp_listsecret456]]\n",
    "a-string": "environment: HF_TOKEN=hf_listsecret123\nhyperparameters: api_key hp_listsecret456\n",
}


@pytest.mark.parametrize("listed", LIST_SPECS.values(), ids=LIST_SPECS.keys())
def test_a_list_environment_in_a_yaml_spec_is_refused_without_its_secrets(
    source: Path, tmp_path: Path, listed: str
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(f"entry_point: show.py\nsource_dir: {source}\n{listed}")
    result = cli("launch", "-f", str(spec), "--runs-dir", str(tmp_path / "runs"), "--dry-run")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "environment: Input should be a valid dictionary" in result.stderr, result.stderr
    assert "hyperparameters: Input should be a valid dictionary" in result.stderr, result.stderr
    assert "hf_listsecret123" not in result.stderr and "hp_listsecret456" not in result.stderr, result.stderr
    assert "HF_TOKEN" in result.stderr and "***" in result.stderr and "Traceback" not in result.stderr


def test_a_list_environment_given_to_the_estimator_is_refused_without_its_secrets(source: Path) -> None:
    with pytest.raises(CloudDDPError) as raised:
        Estimator(entry_point="show.py", source_dir=str(source), emulate="none",
                  environment=["HF_TOKEN=hf_listsecret123", "DEBUG=1"],  # type: ignore[arg-type]
                  hyperparameters=[{"name": "api_key", "value": "hp_listsecret456"}])  # type: ignore[arg-type]  # fmt: skip
    message = str(raised.value)
    assert raised.value.exit_code == 2
    assert "environment: Input should be a valid dictionary (got ['HF_TOKEN=***', 'DEBUG=1'])" in message
    assert "hyperparameters: Input should be a valid dictionary (got [{'name': 'api_key', 'value': '***'}])" in message


@pytest.mark.parametrize(
    ("flag", "given", "shown"),
    [
        ("-e", "HF_TOKEN:hfsecretvalue", "--env 'HF_TOKEN:***': expected KEY=VALUE."),
        ("-H", "api_key:hpsecretvalue", "--hyperparameter 'api_key:***': expected KEY=VALUE."),
        ("-e", "DEBUG:1", "--env 'DEBUG:1': expected KEY=VALUE."),  # no secret name: the value helps
    ],
    ids=["env-secret", "hyperparameter-secret", "env-setting"],
)
def test_a_mistyped_separator_is_named_without_the_secret(
    source: Path, tmp_path: Path, flag: str, given: str, shown: str
) -> None:
    result = cli("launch", "--runs-dir", str(tmp_path / "runs"), flag, given, "--dry-run", str(source / "show.py"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip() == f"error: {shown}"


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (["HF_TOKEN=hf_x1234", "DEBUG=1"], ["HF_TOKEN=***", "DEBUG=1"]),
        ([["HF_TOKEN", "hf_x1234"], ["DEBUG", "1"]], [["HF_TOKEN", "***"], ["DEBUG", "1"]]),
        ([{"name": "HF_TOKEN", "value": "hf_x1234"}], [{"name": "HF_TOKEN", "value": "***"}]),
        ("api_key: hf_x1234", "api_key: ***"),
        (["DB_URL=postgres://u:pw12345@h/db"], ["DB_URL=postgres://u:***@h/db"]),
        (["HF_TOKEN=hf_x1234", "hf_y5678"], ["HF_TOKEN=***", "hf_y5678"]),  # a bare value names nothing: shown
    ],
    ids=["name=value", "pairs", "name-value", "name-colon", "url", "not-a-pair"],
)
def test_redact_entries_hides_the_values_under_secret_names(given: object, shown: object) -> None:
    from cloudddp.redact import redact_entries

    assert redact_entries(given) == shown
