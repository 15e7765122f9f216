"""What the Slurm and PBS batch scripts (and their dry runs) never hold: secret variables travel by name through
the scheduler's environment (sbatch's export, qsub -v), and setup lines, options, arguments and hyperparameters that
give a secret a literal value are refused: exit 2, one paragraph, the value never echoed. Values taken by reference
(`"$HF_TOKEN"`, `$(cat FILE)`) are no secret in themselves and stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SOURCES, cli

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.pbs.provider import PBSProvider
from cloudddp.providers.slurm.provider import SlurmProvider
from cloudddp.session import render

SECRET = "0123456789abcdef0123456789abcdef01234567"
PROVIDERS = {"slurm": SlurmProvider, "pbs": PBSProvider}


def spec(tmp_path: Path, provider: str, **section: object) -> dict[str, Any]:
    return {"name": "setupsecret", "entry_point": "train_ddp.py", "source_dir": str(SOURCES),
            provider: {"runs_dir": str(tmp_path / "runs"), **section}}  # fmt: skip


def rendered(tmp_path: Path, provider: str, section: dict[str, object] | None = None, **fields: object) -> Any:
    """As every door renders: the secrets policy first (cloudddp/secrets_policy.py), then the provider."""
    return render(PROVIDERS[provider](), build_spec({**spec(tmp_path, provider, **(section or {})), **fields}))


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("name", "value", "hidden"), [("URL", "https://user:pw@host/x", "pw@"), ("MY_SECRET", "swordfish", "swordfish")]
)
def test_a_secret_variable_travels_by_name_and_never_reaches_the_script(
    tmp_path: Path, provider: str, name: str, value: str, hidden: str
) -> None:
    request = rendered(tmp_path, provider, environment={name: value, "MODE": "fast"})
    assert request.request.secret_names == [name]
    assert hidden not in request.request.script and hidden not in request.to_yaml()
    assert "export MODE=fast" in request.request.script and f"{name}=" not in request.request.script


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("fields", "section", "shown"),
    [
        ({"hyperparameters": {"db": "postgres://u:hunter2@db/x"}}, {}, "hyperparameters.db='postgres://u:***@db/x'"),
        ({"args": ["https://ghp_tok@github.com/x"]}, {}, "args[0]='https://***@github.com/x'"),
        ({}, {"setup": ["pip install git+https://ghp_tok@github.com/x"]}, "pip install git+https://***@"),
        ({}, {"launcher_args": ["--x=https://ghp_tok@github.com/x"]}, "--x=https://***@github.com/x"),
    ],
)
def test_a_password_in_an_argument_or_setting_is_refused_without_showing_it(
    tmp_path: Path, provider: str, fields: dict[str, Any], section: dict[str, Any], shown: str
) -> None:
    with pytest.raises(CloudDDPError) as caught:
        rendered(tmp_path, provider, section, **fields)
    assert shown in str(caught.value) and "hunter2" not in str(caught.value) and "ghp_tok" not in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_cli_render_of_url_passwords_prints_none_of_them(provider: str) -> None:
    result = cli("render", "-p", provider, "-e", "URL=https://user:pw@host/x", "train_ddp.py", cwd=SOURCES)
    assert result.returncode == 0, result.stderr
    assert "pw@" not in result.stdout and "export URL" not in result.stdout
    refused = cli("render", "-p", provider, "-H", "db=postgres://u:hunter2@db/x", "train_ddp.py", cwd=SOURCES)
    assert refused.returncode == 2 and "hyperparameters.db" in refused.stderr
    assert "hunter2" not in refused.stdout + refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_secret_exported_in_setup_is_refused_by_the_dry_run_without_its_value(tmp_path: Path, provider: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        yaml.safe_dump(spec(tmp_path, provider, setup=["module load cuda", f"export WANDB_API_KEY={SECRET}"]))
    )
    result = cli("launch", "-p", provider, "-f", str(path), "--dry-run")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and SECRET not in result.stdout + result.stderr
    assert f"{provider}.setup[1] sets WANDB_API_KEY" in result.stderr and "--env WANDB_API_KEY=VALUE" in result.stderr


@pytest.mark.parametrize(
    ("provider", "field", "line"),
    [("slurm", "setup", f"HF_TOKEN='{SECRET}' python prep.py"), ("slurm", "sbatch_args", f"--export=ALL,HF_TOKEN={SECRET}"),
     ("slurm", "launcher_args", f"--env=DB_PASSWORD={SECRET}"), ("pbs", "setup", f"module load x; export GH_TOKEN={SECRET}"),
     ("pbs", "qsub_args", f"-v MY_SECRET={SECRET}"), ("pbs", "launcher_args", f"AWS_SECRET_ACCESS_KEY={SECRET}")],
)  # fmt: skip
def test_every_written_field_is_checked(tmp_path: Path, provider: str, field: str, line: str) -> None:
    with pytest.raises(
        CloudDDPError, match=rf"{provider}\.{field}\[0\] sets [A-Z_]+, which looks like a secret"
    ) as caught:
        rendered(tmp_path, provider, {field: [line]})
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("provider", "field", "entries", "index", "name"),
    [("slurm", "launcher_args", [f"--api-key={SECRET}"], 0, "api-key"),
     ("pbs", "launcher_args", ["--nproc-per-node", "2", "--hf-token", SECRET], 2, "hf-token"),
     ("slurm", "setup", [f"python prep.py --wandb-api-key {SECRET} --out /data"], 0, "wandb-api-key"),
     ("pbs", "setup", [f"python prep.py --db_password='{SECRET}'"], 0, "db_password")],
)  # fmt: skip
def test_a_secret_named_option_given_a_literal_is_refused(
    tmp_path: Path, provider: str, field: str, entries: list[str], index: int, name: str
) -> None:
    with pytest.raises(CloudDDPError, match=rf"{provider}\.{field}\[{index}\] sets {name}, which looks like") as caught:
        rendered(tmp_path, provider, {field: entries})
    assert SECRET not in str(caught.value)
    assert f"--env {name.replace('-', '_').upper()}=VALUE" in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_scripts_own_arguments_are_checked_too(tmp_path: Path, provider: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**spec(tmp_path, provider), "args": ["--epochs", "2", "--hf-token", SECRET]}))
    result = cli("launch", "-p", provider, "-f", str(path), "--dry-run")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and SECRET not in result.stdout + result.stderr
    assert "args[2] sets hf-token" in result.stderr and "--env HF_TOKEN=VALUE" in result.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_options_taking_references_or_no_value_stay(tmp_path: Path, provider: str) -> None:
    launcher_args = ["--api-key", "$API_KEY", '--hf-token="$HF_TOKEN"', "--use-token-auth", "--max-restarts", "1"]
    setup = ["python prep.py --tokenizer gpt2 --token-file-from-env --epochs 1", "python x.py --max-new-tokens 256"]
    args = ["--max-tokens", "512", "--secret-from-env", "--epochs", "1"]
    script = str(
        rendered(tmp_path, provider, {"setup": setup, "launcher_args": launcher_args}, args=args).request.script
    )
    assert all(line in script for line in setup) and "--max-tokens 512" in script


@pytest.mark.parametrize("provider", PROVIDERS)
def test_references_and_plain_settings_in_setup_stay(tmp_path: Path, provider: str) -> None:
    setup = ['export HF_TOKEN="$HF_TOKEN"', "export WANDB_API_KEY=$(cat ~/.wandb_key)", "export TOKENIZERS_PARALLELISM=false",
             "export NCCL_DEBUG=INFO", "export API_KEY_FILE_UNUSED_=", "module load cuda/12.1"]  # fmt: skip
    script = str(rendered(tmp_path, provider, {"setup": setup}).request.script)
    assert all(line in script for line in setup)


# Ordinary options and settings a demanding user writes: none names a secret it is given (found refused by a review
# of cc7b510: a flag followed by a positional, a file's path, a number).
NOT_SECRETS = [
    ['echo "$REG_PASS" | docker login --username bob --password-stdin registry.example.com'],
    ["apptainer registry login --username bob --password-stdin docker://registry.example.com"],
    ["huggingface-cli download --token-file ~/.hf gpt2"],
    ["python prep.py --secret-file /run/secrets/x --token-budget 512 --pad_token_id=0"],
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("setup", NOT_SECRETS)
def test_flags_files_and_settings_named_like_secrets_stay(tmp_path: Path, provider: str, setup: list[str]) -> None:
    args = ["--pad-token-id", "0", "--use-auth-token=true", "--tokeniser", "bpe"]
    request = rendered(tmp_path, provider, {"setup": setup}, args=args)
    assert setup[0] in str(request.request.script)
