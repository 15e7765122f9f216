"""Setup lines and options of the Slurm and PBS sections that give a secret-named variable a literal value are
refused (they would be written in clear into the batch script and the dry run): exit 2, one paragraph, the value
never echoed. Values taken by reference (`"$HF_TOKEN"`, `$(cat FILE)`) are no secret in themselves and stay."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import SOURCES, cli

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.pbs.provider import PBSProvider
from cloudddp.providers.slurm.provider import SlurmProvider
from cloudddp.session import render

SECRET = "0123456789abcdef0123456789abcdef01234567"


def spec(tmp_path: Path, provider: str, **section: object) -> dict[str, object]:
    return {"name": "setupsecret", "entry_point": "train_ddp.py", "source_dir": str(SOURCES),
            provider: {"runs_dir": str(tmp_path / "runs"), **section}}  # fmt: skip


@pytest.mark.parametrize("provider", ["slurm", "pbs"])
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
    provider_class = SlurmProvider if provider == "slurm" else PBSProvider
    with pytest.raises(
        CloudDDPError, match=rf"{provider}\.{field}\[0\] sets [A-Z_]+, which looks like a secret"
    ) as caught:
        render(provider_class(), build_spec(spec(tmp_path, provider, **{field: [line]})))
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
    provider_class = SlurmProvider if provider == "slurm" else PBSProvider
    with pytest.raises(CloudDDPError, match=rf"{provider}\.{field}\[{index}\] sets {name}, which looks like") as caught:
        render(provider_class(), build_spec(spec(tmp_path, provider, **{field: entries})))
    assert SECRET not in str(caught.value)
    assert f"--env {name.replace('-', '_').upper()}=VALUE" in str(caught.value)


@pytest.mark.parametrize("provider", ["slurm", "pbs"])
def test_the_scripts_own_arguments_are_checked_too(tmp_path: Path, provider: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**spec(tmp_path, provider), "args": ["--epochs", "2", "--hf-token", SECRET]}))
    result = cli("launch", "-p", provider, "-f", str(path), "--dry-run")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and SECRET not in result.stdout + result.stderr
    assert "args[2] sets hf-token" in result.stderr and "--env HF_TOKEN=VALUE" in result.stderr


@pytest.mark.parametrize("provider", ["slurm", "pbs"])
def test_options_taking_references_or_no_value_stay(tmp_path: Path, provider: str) -> None:
    launcher_args = ["--api-key", "$API_KEY", '--hf-token="$HF_TOKEN"', "--use-token-auth", "--max-restarts", "1"]
    setup = ["python prep.py --tokenizer gpt2 --token-file-from-env --epochs 1", "python x.py --max-new-tokens 256"]
    args = ["--max-tokens", "512", "--secret-from-env", "--epochs", "1"]
    provider_class = SlurmProvider if provider == "slurm" else PBSProvider
    settings = spec(tmp_path, provider, setup=setup, launcher_args=launcher_args)
    script = str(render(provider_class(), build_spec({**settings, "args": args})).request.script)
    assert all(line in script for line in setup) and "--max-tokens 512" in script


@pytest.mark.parametrize("provider", ["slurm", "pbs"])
def test_references_and_plain_settings_in_setup_stay(tmp_path: Path, provider: str) -> None:
    setup = ['export HF_TOKEN="$HF_TOKEN"', "export WANDB_API_KEY=$(cat ~/.wandb_key)", "export TOKENIZERS_PARALLELISM=false",
             "export NCCL_DEBUG=INFO", "export API_KEY_FILE_UNUSED_=", "module load cuda/12.1"]  # fmt: skip
    provider_class = SlurmProvider if provider == "slurm" else PBSProvider
    script = str(render(provider_class(), build_spec(spec(tmp_path, provider, setup=setup))).request.script)
    assert all(line in script for line in setup)


# Ordinary options and settings a demanding user writes: none names a secret it is given (found refused by a review
# of cc7b510: a flag followed by a positional, a file's path, a number).
NOT_SECRETS = [
    ['echo "$REG_PASS" | docker login --username bob --password-stdin registry.example.com'],
    ["apptainer registry login --username bob --password-stdin docker://registry.example.com"],
    ["huggingface-cli download --token-file ~/.hf gpt2"],
    ["python prep.py --secret-file /run/secrets/x --token-budget 512 --pad_token_id=0"],
]


@pytest.mark.parametrize("setup", NOT_SECRETS)
def test_flags_files_and_settings_named_like_secrets_stay(tmp_path: Path, setup: list[str]) -> None:
    args = ["--pad-token-id", "0", "--use-auth-token=true", "--tokeniser", "bpe"]
    for provider_class, provider in ((SlurmProvider, "slurm"), (PBSProvider, "pbs")):
        request = render(provider_class(), build_spec({**spec(tmp_path, provider, setup=setup), "args": args}))
        assert setup[0] in str(request.request.script)
