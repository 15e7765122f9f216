"""Secrets never reach cloudddp's output or the files it writes (issue 9, point 16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import cli, run_cli

from cloudddp.errors import CloudDDPError
from cloudddp.redact import (
    is_secret_name,
    redact,
    redact_log_line,
    redact_text,
    secret_environment_warning,
    secret_values,
    secret_variables,
)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgres://user:pass@host/db", "postgres://user:***@host/db"),
        ("mysql+pymysql://app:p%40ss@db.internal:3306/x?ssl=1", "mysql+pymysql://app:***@db.internal:3306/x?ssl=1"),
        ("redis://:p@ss@cache:6379/0", "redis://:***@cache:6379/0"),  # an unencoded '@' in the password
        ("https://ghp_abc123@github.com/org/repo.git", "https://***@github.com/org/repo.git"),  # a token as user
        ("see amqp://u:pw@mq/ and mongodb://a:b@h1,h2/db", "see amqp://u:***@mq/ and mongodb://a:***@h1,h2/db"),
    ],
)
def test_the_user_info_of_a_url_is_hidden_wherever_it_appears(text: str, shown: str) -> None:
    assert redact_text(text) == shown
    assert redact_text(shown) == shown  # applying it twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "s3://bucket/key",
        "oci://bucket@namespace/prefix",
        "user@example.com",
        "git@github.com:org/repo",
        "http://host/path?to=a@b",
        "no url",
    ],
)
def test_text_without_url_credentials_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


def test_redact_handles_names_and_urls_at_any_depth() -> None:
    document = {
        "Environment": {"DB_URL": "postgres://user:pass@host/db", "HF_TOKEN": "hf_x", "PLAIN": "ok"},
        "env": [{"Name": "API_KEY", "Value": "k"}, {"Name": "URL", "Value": "https://u:p@h/"}],
        "args": ("--db", "postgres://a:b@c/d"),
    }
    assert redact(document) == {
        "Environment": {"DB_URL": "postgres://user:***@host/db", "HF_TOKEN": "***", "PLAIN": "ok"},
        "env": [{"Name": "API_KEY", "Value": "***"}, {"Name": "URL", "Value": "https://u:***@h/"}],
        "args": ("--db", "postgres://a:***@c/d"),
    }


def test_secret_looking_variables_are_named_in_one_warning() -> None:
    environment = {"DB_URL": "postgres://u:p@h/d", "WANDB_API_KEY": "x", "EPOCHS": "3", "HOME_URL": "https://h/"}
    assert secret_variables(environment) == ["DB_URL", "WANDB_API_KEY"]
    warning = secret_environment_warning(environment, "SageMaker", "AWS Secrets Manager")
    assert warning is not None
    assert "DB_URL, WANDB_API_KEY" in warning and "AWS Secrets Manager" in warning and "p@h" not in warning
    assert secret_environment_warning({"EPOCHS": "3"}, "SageMaker", "AWS Secrets Manager") is None


def test_local_dry_run_hides_a_password_inside_a_url(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text("print('hi')\n")
    result = cli("launch", "--dry-run", "--nodes", "1", "--runs-dir", str(tmp_path / "runs"),
                     "-e", "DB_URL=postgres://user:s3cr3t@db/x", str(script))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "s3cr3t" not in result.stdout + result.stderr
    assert "postgres://user:***@db/x" in result.stdout
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("DB_PASSWORD=hunter2 EPOCHS=3", "DB_PASSWORD=*** EPOCHS=3"),
        ('{"HF_TOKEN": "hf_abc", "lr": 0.1}', '{"HF_TOKEN": "***", "lr": 0.1}'),
        ("AWS_SECRET_ACCESS_KEY: wJalr/K7MDENG", "AWS_SECRET_ACCESS_KEY: ***"),
        ("export API_KEY='k-123'", "export API_KEY='***'"),
        ("tokens: 1024, Password: fine", "tokens: 1024, Password: fine"),  # prose and counts: not variables
        ("step 3 loss=0.25 TOKEN_COUNT=17", "step 3 loss=0.25 TOKEN_COUNT=***"),  # secret-looking: hidden anyway
    ],
)
def test_a_log_line_hides_what_is_assigned_to_a_secret_looking_variable(line: str, shown: str) -> None:
    assert redact_log_line(line) == shown


def test_a_log_line_hides_the_jobs_own_secret_values_wherever_they_appear() -> None:
    line = "logged in as hf_abcdef (token hf_abcdef, db postgres://u:pw@h/x) after 3 tries"
    assert (
        redact_log_line(line, ["hf_abcdef", "3"])
        == "logged in as *** (token ***, db postgres://u:***@h/x) after 3 tries"
    )


def test_an_error_message_never_carries_a_url_password() -> None:
    error = CloudDDPError("inputs.train='https://user:tok123@host/data' is not an s3:// URI")
    assert str(error) == "inputs.train='https://user:***@host/data' is not an s3:// URI"


def test_the_cli_error_paragraph_hides_a_url_password(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text("print('hi')\n")
    role = ["--role", "arn:aws:iam::123456789012:role/R", "--region", "us-east-1"]  # no missing setting comes first
    result = cli("render", "-p", "sagemaker", *role, "-i", "train=https://user:tok123@host/data", str(script))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "https://user:***@host/data" in result.stderr and "tok123" not in result.stderr


@pytest.mark.slow
def test_local_run_keeps_the_password_out_of_request_yaml_and_printed_logs(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(
        "import os\nprint('connecting to', os.environ['DB_URL'], flush=True)\n"
        "print('DB_PASSWORD=' + os.environ['DB_PASSWORD'])\nprint('hub login', os.environ['HF_TOKEN'], flush=True)\n"
    )
    runs = tmp_path / "runs"
    result = run_cli("launch", "--nodes", "1", "--nproc-per-node", "1", "--runs-dir", str(runs),
                     "-e", "DB_URL=postgres://user:s3cr3t@db/x", "-e", "DB_PASSWORD=hunter2",
                     "-e", "HF_TOKEN=hf_abcdef", str(script), timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert "connecting to postgres://user:***@db/x" in result.stdout  # the job's own line, as cloudddp printed it
    assert "DB_PASSWORD=***" in result.stdout and "hub login ***" in result.stdout
    for secret in ("s3cr3t", "hunter2", "hf_abcdef"):
        assert secret not in result.stdout + result.stderr, secret
    (request,) = runs.glob("*/request.yaml")
    assert "s3cr3t" not in request.read_text()
    assert "postgres://user:***@db/x" in yaml.safe_load(request.read_text()).__repr__()
    logs = run_cli("logs", str(request.parent))
    assert logs.returncode == 0 and "DB_PASSWORD=***" in logs.stdout, logs.stdout + logs.stderr
    assert "hunter2" not in logs.stdout and "s3cr3t" not in logs.stdout
    # The bare token: the runner masked the run's secret values as it wrote the logs, so `logs` hides it from any
    # shell, as launch did; and where this shell holds it too.
    assert "hub login ***" in logs.stdout and "hf_abcdef" not in logs.stdout, logs.stdout
    assert "hf_abcdef" not in "".join(p.read_text(errors="replace") for p in request.parent.rglob("*.json"))
    logs = run_cli("logs", str(request.parent), env={"HF_TOKEN": "hf_abcdef"})
    assert logs.returncode == 0 and "hub login ***" in logs.stdout and "hf_abcdef" not in logs.stdout, logs.stdout


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_a_secret_value_is_hidden_where_json_escaped_it(ensure_ascii: bool) -> None:
    secret = 'sk"Live\\Key\u00e9'  # a quote, a backslash, an e-acute: each changes under json.dumps
    line = json.dumps({"hyperparameters": {"api_key": secret}, "lr": 0.1}, ensure_ascii=ensure_ascii)
    shown = redact_log_line(line, [secret])
    assert shown == '{"hyperparameters": {"api_key": "***"}, "lr": 0.1}', shown


@pytest.mark.process
def test_a_secret_with_characters_json_escapes_is_hidden_in_sm_training_env(tmp_path: Path) -> None:
    # SM_TRAINING_ENV and SM_HPS carry the hyperparameters JSON-encoded (ensure_ascii): the value masked as given
    # did not match the escaped copy a job printed.
    script = tmp_path / "job.py"
    script.write_text("import os\nprint(os.environ['SM_TRAINING_ENV'], os.environ['SM_HPS'], flush=True)\n")
    secret = 'sk"Live\\Key\u00e9'
    result = run_cli("launch", "--nodes", "1", "--runs-dir", str(tmp_path / "runs"), "-H", f"api_key={secret}",
                     str(script), timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    printed = result.stdout + result.stderr
    assert '"api_key":"***"' in printed and "Live" not in printed, printed[-3000:]


@pytest.mark.process
def test_a_secret_named_hyperparameter_is_hidden_in_every_value_built_from_it(tmp_path: Path) -> None:
    # SM_HP_API_KEY and hyperparameters.json showed ***, while SM_HPS, SM_USER_ARGS (and the job's log
    # lines as launch printed them) showed the key beside them.
    script = tmp_path / "job.py"
    script.write_text("import os, sys\nprint('args', sys.argv[1:], os.environ.get('SM_HPS'), flush=True)\n")
    render = run_cli("render", "--nodes", "2", "-H", "api_key=sk_LiveKey9999", "-H", "lr=0.1", str(script),
                     cwd=tmp_path)  # fmt: skip
    assert render.returncode == 0, render.stderr
    assert "sk_LiveKey9999" not in render.stdout + render.stderr
    assert """SM_USER_ARGS: '["--api_key","***","--lr","0.1"]'""" in render.stdout
    runs = tmp_path / "runs"
    result = run_cli("launch", "--nodes", "1", "--runs-dir", str(runs), "-H", "api_key=sk_LiveKey9999",
                     str(script), timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert """args ['--api_key', '***'] {"api_key":"***"}""" in result.stdout
    assert "sk_LiveKey9999" not in result.stdout + result.stderr
    (request,) = runs.glob("*/request.yaml")
    assert "sk_LiveKey9999" not in request.read_text()


@pytest.mark.parametrize(
    ("provider", "advice"),
    [("slurm", "--env API_KEY=VALUE"), ("pbs", "--env API_KEY=VALUE"),
     ("kubernetes", "kubernetes.secret_env: {API_KEY: SECRET/KEY}")],
)  # fmt: skip
def test_a_secret_named_hyperparameter_is_refused_where_it_would_be_written_into_the_job(
    tmp_path: Path, provider: str, advice: str
) -> None:
    # Hyperparameters become the script's arguments in the batch script or the manifest, which anyone who can
    # read the job reads; secret-named variables travel by name (Slurm, PBS) or as Secret references instead.
    (tmp_path / "job.py").write_text("print('hi')\n")
    extra = ["--image", "registry.example.com/train:1"] if provider == "kubernetes" else []
    result = cli("render", "-p", provider, *extra, "-H", "api_key=sk_LiveKey9999", "job.py", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert "hyperparameters.api_key looks like a secret" in result.stderr and advice in result.stderr
    assert "sk_LiveKey9999" not in result.stdout + result.stderr


def oci_checks(environment: dict[str, str]) -> None:
    """OCI's secrets policy (its PROVIDER.in_clear, applied as session.render applies it) on a job environment."""
    from types import SimpleNamespace

    from cloudddp.providers.oci import PROVIDER
    from cloudddp.secrets_policy import check_secrets

    check_secrets(SimpleNamespace(environment=environment, hyperparameters={}, args=[]), PROVIDER.in_clear)


def test_oci_refuses_a_url_password_in_the_job_environment_and_names_the_vault() -> None:
    from cloudddp.errors import CloudDDPError

    with pytest.raises(CloudDDPError) as info:
        oci_checks({"DB_URL": "postgres://user:s3cr3t@db/x", "EPOCHS": "3"})
    assert "DB_URL" in str(info.value) and "OCI Vault" in str(info.value) and "s3cr3t" not in str(info.value)
    oci_checks({"DB_URL": "postgres://db/x"})  # no credentials in it: fine


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("AWS_SESSION_TOKEN", True),
        ("HUGGING_FACE_HUB_TOKEN", True),
        ("GITHUB_TOKEN_FILE", True),
        ("SSH_PRIVATE_KEY", True),
        ("OCI_KEY_PASSPHRASE", True),
        ("PGPASSWORD", True),
        ("TOKENIZERS_PARALLELISM", False),  # HuggingFace tokenizers' fork warning switch
        ("MAX_NEW_TOKENS", False),
        ("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", False),  # what the awsbatch detection reads
    ],
)
def test_a_secret_name_is_told_from_a_setting_that_only_mentions_tokens(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_a_log_line_keeps_a_tokenizer_setting_and_its_value() -> None:
    line = "TOKENIZERS_PARALLELISM=false MAX_NEW_TOKENS=256 done: false"
    assert redact_log_line(line, secret_values({"TOKENIZERS_PARALLELISM": "false", "HF_TOKEN": "hf_abcdef"})) == line


def test_kubernetes_takes_tokenizers_parallelism_in_the_environment(tmp_path: Path) -> None:
    """It was refused as a secret ("keep it in a Kubernetes Secret"), as on OCI."""
    result = cli("render", "-p", "kubernetes", "--image", "ghcr.io/org/train:1", "-e", "TOKENIZERS_PARALLELISM=false",
                     "-e", "MAX_NEW_TOKENS=256", "sources/train_ddp.py", env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip
    assert result.returncode == 0, result.stderr
    container = yaml.safe_load(result.stdout)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
        "containers"
    ][0]
    shown = {item["name"]: item.get("value") for item in container["env"]}
    assert shown["TOKENIZERS_PARALLELISM"] == "false" and shown["MAX_NEW_TOKENS"] == "256"


def test_oci_takes_tokenizers_parallelism_and_still_refuses_a_token() -> None:
    oci_checks({"TOKENIZERS_PARALLELISM": "false"})  # raised "looks like a secret"
    with pytest.raises(CloudDDPError, match=r"environment\.HF_TOKEN looks like a secret"):
        oci_checks({"HF_TOKEN": "hf_abcdef"})


def test_a_hyperparameter_whose_value_is_a_setting_is_no_secret() -> None:
    from cloudddp.redact import secret_named_hyperparameter

    settings = {"pad_token_id": 0, "eos_token_id": "2", "use_auth_token": True, "token_dropout": "0.1",
                "tokeniser": "bpe", "secret_sharing": "false", "api_key": None}  # fmt: skip
    assert secret_named_hyperparameter(settings) is None
    assert secret_named_hyperparameter({**settings, "hf_token": "hf_abcdef"}) == "hf_token"


@pytest.mark.parametrize("provider", ["kubernetes", "oci", "slurm", "pbs"])
def test_a_secret_given_to_the_scripts_option_is_refused_and_a_setting_is_not(tmp_path: Path, provider: str) -> None:
    # The script's arguments are written into the manifest, the batch script or the container's CMD, as the
    # hyperparameters are: `-- --hf-token VALUE` was let through where `-H hf_token=VALUE` was refused.
    (tmp_path / "job.py").write_text("print('hi')\n")
    extra = {"kubernetes": ["--image", "registry.example.com/train:1"],
             "oci": ["--image", "iad.ocir.io/ns/train:1", "--work-dir", "oci://b@ns/p", "--compartment",
                     "ocid1.compartment.oc1..aaaa", "--project", "ocid1.datascienceproject.oc1.iad.aaaa"]}  # fmt: skip
    base = ["render", "-p", provider, *extra.get(provider, []), "job.py", "--"]
    refused = cli(*base, "--epochs", "2", "--hf-token", "hf_LiveKey9999", cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stdout + refused.stderr
    assert "hf-token" in refused.stderr and "hf_LiveKey9999" not in refused.stdout + refused.stderr
    kept = cli(*base, "--pad-token-id", "0", "--token-file", "/run/secrets/hf", cwd=tmp_path)
    assert kept.returncode == 0, kept.stdout + kept.stderr


@pytest.mark.process
def test_launch_hides_the_value_of_a_secret_named_script_option_it_prints(tmp_path: Path) -> None:
    # request.yaml and `cloudddp logs` hid `--api-key=...`; launch's own live log lines showed it.
    script = tmp_path / "show.py"
    script.write_text("import sys\nprint('ARGV', sys.argv[1:], flush=True)\n")
    result = run_cli("launch", "--emulate", "none", "--runs-dir", str(tmp_path / "runs"), str(script), "--",
                     "--api-key=argkey555", "--hf-token", "tok98765", "--lr", "0.1", timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "ARGV ['--api-key=***', '--hf-token', '***', '--lr', '0.1']" in result.stdout, result.stdout[-2000:]
    assert "argkey555" not in result.stdout + result.stderr and "tok98765" not in result.stdout + result.stderr
