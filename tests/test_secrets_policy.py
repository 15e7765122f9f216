"""One secrets policy (cloudddp/secrets_policy.py): a secret in a field a provider's request carries in clear is
refused, naming the field and never the value, exit 2, by every door alike; a secret anywhere else is masked where
cloudddp shows it. The table runs over every built-in provider's own declaration (ProviderInfo.in_clear)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import cli

from cloudddp import Estimator
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers import registry
from cloudddp.secrets_policy import ARGS, ENVIRONMENT, HYPERPARAMETERS, InClear, check_secrets

SECRET = "s3cr3tValue9876"
# Each kind of secret, as each kind of field holds it: (what the field gets, what the message must name).
KINDS: dict[str, dict[str, tuple[Any, str]]] = {
    ENVIRONMENT: {
        "secret-named variable": ({"HF_TOKEN": SECRET}, "environment.HF_TOKEN"),
        "password in a URL": ({"DB_URL": f"postgres://user:{SECRET}@db/x"}, "environment.DB_URL"),
    },
    HYPERPARAMETERS: {
        "secret-named hyperparameter": ({"api_key": SECRET, "lr": "0.1"}, "hyperparameters.api_key"),
        "password in a URL": ({"data": f"https://{SECRET}@github.com/o/d.git"}, "hyperparameters.data"),
    },
    ARGS: {
        "--token VALUE": (["--epochs", "2", "--token", SECRET], "args[2] sets token"),
        "--api-key=VALUE": ([f"--api-key={SECRET}"], "args[0] sets api-key"),
        "password in a URL": (["--db", f"postgres://user:{SECRET}@db/x"], "args[1]="),
    },
    "lines": {  # a provider's own settings written into its request as shell lines or options (slurm.setup)
        "export NAME=VALUE": (["module load cuda", f"export WANDB_API_KEY={SECRET}"], "[1] sets WANDB_API_KEY"),
        "--token VALUE": ([f"python prep.py --hf-token {SECRET}"], "[0] sets hf-token"),
        "password in a URL": ([f"pip install git+https://{SECRET}@github.com/o/x"], "[0]="),
    },
}


def spec_with(provider: str, field: str, value: Any) -> Any:
    data: dict[str, Any] = {"name": "policy", "entry_point": "train.py", "source_dir": "."}
    if "." in field:
        section, _, name = field.partition(".")
        data[section] = {name: value}
    else:
        data[field] = value
    return build_spec(data)


def cases() -> list[Any]:
    found = []
    for info in registry.builtin_declarations():
        for field in info.in_clear.fields:
            for kind, (value, named) in KINDS[field if field in KINDS else "lines"].items():
                named = named if field in KINDS else field + named
                found.append(pytest.param(info.name, field, value, named, id=f"{info.name}-{field}-{kind}"))
    return found


@pytest.mark.parametrize(("provider", "field", "value", "named"), cases())
def test_a_secret_in_a_field_the_request_carries_in_clear_is_refused_naming_the_field_not_the_value(
    provider: str, field: str, value: Any, named: str
) -> None:
    declared = registry.get(provider).in_clear
    with pytest.raises(CloudDDPError) as caught:
        check_secrets(spec_with(provider, field, value), declared)
    message = str(caught.value)
    assert caught.value.exit_code == 2
    assert named in message and SECRET not in message, message
    assert declared.where in message and "\n" not in message  # where it would go, in one paragraph


def test_every_built_in_provider_declares_what_its_request_carries_in_clear() -> None:
    declared = {info.name: set(info.in_clear.fields) for info in registry.builtin_declarations()}
    assert declared["local"] == set()  # nothing leaves this machine: masked only
    assert declared["sagemaker"] == {HYPERPARAMETERS}  # the arguments travel in S3 with the code
    assert declared["kubernetes"] == declared["oci"] == {ENVIRONMENT, HYPERPARAMETERS, ARGS}
    assert declared["slurm"] == {ARGS, HYPERPARAMETERS, "slurm.setup", "slurm.launcher_args", "slurm.sbatch_args"}
    assert declared["pbs"] == {ARGS, HYPERPARAMETERS, "pbs.setup", "pbs.launcher_args", "pbs.qsub_args"}


@pytest.mark.parametrize("provider", ["local", "sagemaker", "slurm", "pbs"])
def test_a_secret_in_a_field_not_carried_in_clear_is_not_refused(provider: str) -> None:
    # Slurm and PBS pass secret variables by name through the scheduler; SageMaker stages the arguments to S3.
    spec: dict[str, Any] = (  # a job spec's data, as build_spec takes it
        {"environment": {"HF_TOKEN": SECRET}} if provider != "local" else {"hyperparameters": {"api_key": SECRET}}
    )
    if provider == "sagemaker":
        spec["args"] = ["--token", SECRET]
    check_secrets(build_spec({"entry_point": "train.py", "source_dir": ".", **spec}), registry.get(provider).in_clear)


def test_a_reference_the_provider_declares_is_no_secret() -> None:
    vault_id = "ocid1.vaultsecret.oc1.iad.amaaaaaagpihjxqadwyc4kjhpeis2bylhzmp5r2si6mz2h4eujevnmf3zoca"
    oci = registry.get("oci").in_clear
    check_secrets(spec_with("oci", ENVIRONMENT, {"DB_PASSWORD_SECRET_ID": vault_id}), oci)
    with pytest.raises(CloudDDPError, match=r"environment\.DB_PASSWORD_SECRET_ID looks like a secret"):
        check_secrets(spec_with("oci", ENVIRONMENT, {"DB_PASSWORD_SECRET_ID": "ocid1.vault.oc1.iad.aaaa"}), oci)


def test_settings_and_references_named_like_secrets_are_not_refused() -> None:
    everything = InClear(fields=(ENVIRONMENT, HYPERPARAMETERS, ARGS))
    spec = build_spec({"entry_point": "train.py", "source_dir": ".",
                       "environment": {"TOKENIZERS_PARALLELISM": "false", "MAX_NEW_TOKENS": "256"},
                       "hyperparameters": {"pad_token_id": 0, "use_auth_token": True},
                       "args": ["--token-file", "/run/secrets/hf", "--api-key", "$API_KEY", "--max-tokens", "512"]})  # fmt: skip
    check_secrets(spec, everything)


def test_a_declaration_naming_a_field_the_provider_does_not_have_is_the_authors_error() -> None:
    from dataclasses import replace

    slurm = registry.get("slurm")
    with pytest.raises(CloudDDPError, match=r"in_clear names 'slurm\.nonsense'"):
        registry.check_declaration(replace(slurm, in_clear=InClear(fields=("slurm.nonsense",))), "test")


# -- the same spec through every door gets the same refusal ---------------------------------------------------------

KUBERNETES = ["-p", "kubernetes", "--image", "registry.example.com/train:1"]
SAGEMAKER = ["-p", "sagemaker", "--instance-type", "ml.m5.xlarge", "--region", "us-east-1",
             "--role", "arn:aws:iam::123456789012:role/SageMaker"]  # fmt: skip
REFUSED = "hyperparameters.api_key looks like a secret, and hyperparameters are"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    return folder


def refusal_of(result: Any) -> str:
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert SECRET not in result.stdout + result.stderr
    return str(result.stderr).removeprefix("error: ").strip()


@pytest.mark.parametrize("flags", [KUBERNETES, SAGEMAKER], ids=["kubernetes", "sagemaker"])
def test_every_door_refuses_the_same_secret_with_the_same_message(  # the SDK v2 drop-in: tests/providers/sagemaker_sdk
    source: Path, tmp_path: Path, flags: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    provider = flags[1]
    by_flags = refusal_of(cli("launch", *flags, "--dry-run", "-H", f"api_key={SECRET}", str(source / "train.py")))
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"entry_point": "train.py", "source_dir": str(source),
                                    "hyperparameters": {"api_key": SECRET}}))  # fmt: skip
    by_yaml = refusal_of(cli("launch", *flags, "-f", str(spec), "--dry-run"))
    # the provider's options (the Estimator's **provider_options), named by the flags at run time: Any
    settings: dict[str, Any] = {
        flag.lstrip("-").replace("-", "_"): value for flag, value in zip(flags[2::2], flags[3::2], strict=True)
    }
    est = Estimator(provider=provider, entry_point="train.py", source_dir=str(source),
                    hyperparameters={"api_key": SECRET}, **settings)  # fmt: skip
    with pytest.raises(CloudDDPError) as by_estimator:
        est.dry_run()
    assert by_estimator.value.exit_code == 2
    assert REFUSED in by_flags and by_flags == by_yaml == str(by_estimator.value), (by_flags, by_yaml)


def test_where_nothing_is_carried_in_clear_the_dry_run_masks_instead(source: Path, tmp_path: Path) -> None:
    result = cli("launch", "--runs-dir", str(tmp_path / "runs"), "--dry-run", "-e", f"HF_TOKEN={SECRET}",
                 "-H", f"api_key={SECRET}", str(source / "train.py"), "--", "--token", SECRET)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr and "***" in result.stdout
