"""Launch's settings come in layers (cloudddp/config.py): flags > the job spec file > CLOUDDDP_<PROVIDER>_<FIELD>
variables > the project file ./cloudddp.yaml > the context of ~/.config/cloudddp/config.yaml > defaults; `config show`
says where each came from; a dry run lists every missing setting at once; `launch -p X --help` and shell completion
show X's options with the common ones."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import cli

from cloudddp import CloudDDPError, Estimator, config

ROLE = "arn:aws:iam::123456789012:role/FromContext"


def write_contexts(contexts: dict[str, Any], **top: Any) -> Path:
    path = config.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"contexts": contexts, **top}))
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with a script, and no AWS setting from this machine (region, profile, role)."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "CLOUDDDP_SAGEMAKER_ROLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    return tmp_path


def shown(output: str) -> dict[str, tuple[str, str]]:
    """`config show`'s lines as setting -> (value, origin)."""
    rows = {}
    for line in output.splitlines()[1:]:
        name, rest = line.strip().split(None, 1)
        value, _, origin = rest.partition("  (")
        rows[name] = (value.strip(), origin[:-1])
    return rows


def test_each_layer_wins_over_the_ones_below_and_config_show_names_it(project: Path) -> None:
    path = write_contexts({"default": {"nodes": 3, "sagemaker": {
        "role": ROLE, "region": "eu-west-1", "instance_type": "ml.c5.xlarge", "bucket": "ctx-bucket",
        "prefix": "ctx"}}})  # fmt: skip
    (project / "cloudddp.yaml").write_text(yaml.safe_dump({"sagemaker": {"instance_type": "ml.m5.large",
                                                                          "bucket": "project-bucket"}}))  # fmt: skip
    variables = {"CLOUDDDP_SAGEMAKER_BUCKET": "env-bucket", "CLOUDDDP_SAGEMAKER_PREFIX": "env"}
    (project / "job.yaml").write_text(yaml.safe_dump({"entry_point": "train.py", "sagemaker": {"prefix": "file"}}))

    result = cli("config", "show", "-p", "sagemaker", "-f", "job.yaml", cwd=project, env=variables)
    assert result.returncode == 0, result.stderr
    rows = shown(result.stdout)
    assert rows["nodes"] == ("3", f"context 'default' ({path})")
    assert rows["sagemaker.region"] == ("'eu-west-1'", f"context 'default' ({path})")
    assert rows["sagemaker.instance_type"] == ("'ml.m5.large'", f"the project file {project / 'cloudddp.yaml'}")
    assert rows["sagemaker.bucket"] == ("'env-bucket'", "the environment (CLOUDDDP_SAGEMAKER_BUCKET, "
                                                         "CLOUDDDP_SAGEMAKER_PREFIX)")  # fmt: skip
    assert rows["sagemaker.prefix"] == ("'file'", "job.yaml")
    assert rows["sagemaker.spot"] == ("False", "default")
    assert rows["entry_point"] == ("'train.py'", "job.yaml")
    assert "slurm.partition" not in rows  # another provider's settings are not this launch's

    # What is sent: the layers' values, and a flag over all of them.
    result = cli(
        "render", "-p", "sagemaker", "-f", "job.yaml", "--nodes", "2", "--format", "json", cwd=project, env=variables
    )
    assert result.returncode == 0, result.stderr
    sent = json.loads(result.stdout)["request"]
    assert sent["RoleArn"] == ROLE
    assert sent["ResourceConfig"]["InstanceType"] == "ml.m5.large"
    assert sent["ResourceConfig"]["InstanceCount"] == 2
    assert sent["OutputDataConfig"]["S3OutputPath"].startswith("s3://env-bucket/file/")


def test_a_context_is_chosen_by_flag_then_variable_then_default(project: Path) -> None:
    write_contexts({"default": {"nodes": 2}, "hpc": {"nodes": 4}, "big": {"nodes": 8}})
    variables: dict[str, str] = {}

    def nodes(*args: str) -> str:
        result = cli("config", "show", *args, cwd=project, env=variables)
        assert result.returncode == 0, result.stderr
        return shown(result.stdout)["nodes"][0]

    assert nodes() == "2"
    assert nodes("--context", "hpc") == "4"
    variables["CLOUDDDP_CONTEXT"] = "big"
    assert nodes() == "8"
    assert nodes("--context", "hpc") == "4"  # the flag over the variable

    result = cli("launch", "--dry-run", "--context", "hcp", "train.py", cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == (f"error: --context 'hcp': no such context in {config.config_path()}; did you mean "
                             "'hpc'? it has 'big', 'default', 'hpc'.\n")  # fmt: skip


def test_without_a_default_context_none_applies(project: Path) -> None:
    write_contexts({"hpc": {"nodes": 4}})
    result = cli("config", "show", cwd=project)
    assert shown(result.stdout)["nodes"] == ("1", "default")
    assert shown(result.stdout)["entry_point"] == ("'SCRIPT'", "launch's SCRIPT argument")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"context": {}}, "unknown key 'context'; did you mean 'contexts'?"),
        ({"contexts": {"default": {"sagemaker": {"rol": ROLE}}}},
         "invalid settings in context 'default' ({path}): sagemaker.rol: unknown field, did you mean 'role'?"),
        ({"contexts": {"default": {"nodez": 2}}},
         "invalid settings in context 'default' ({path}): nodez: unknown field, did you mean 'nodes'?"),
        ({"contexts": {"default": ["nodes"]}}, "context 'default' must be a mapping of job spec fields"),
    ],
)  # fmt: skip
def test_a_misspelt_key_in_the_config_file_is_named_with_its_context(
    project: Path, content: dict[str, Any], message: str
) -> None:
    path = config.config_path()
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(content))
    result = cli("launch", "--dry-run", "train.py", cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert message.format(path=path) in result.stderr


def test_a_misspelt_key_in_the_project_file_is_named_with_it(project: Path) -> None:
    (project / "cloudddp.yaml").write_text("slurm: {partiton: gpu}\n")
    result = cli("launch", "-p", "slurm", "--dry-run", "train.py", cwd=project)
    assert result.returncode == 2
    assert (f"invalid settings in the project file {project / 'cloudddp.yaml'}: slurm.partiton: unknown field, "
            "did you mean 'partition'?") in result.stderr  # fmt: skip


def test_only_scalar_settings_are_read_from_variables() -> None:
    names = config.variable_names("sagemaker")
    assert names["CLOUDDDP_SAGEMAKER_ROLE"] == "role" and names["CLOUDDDP_SAGEMAKER_SPOT"] == "spot"
    assert "CLOUDDDP_SAGEMAKER_SUBNETS" not in names and "CLOUDDDP_SAGEMAKER_TAGS" not in names


@pytest.mark.parametrize(
    ("provider", "missing"),
    [
        ("sagemaker", ["no IAM role for the SageMaker job", "no AWS region"]),
        ("oci", ["oci.compartment_id is required", "oci.project_id is required"]),
    ],
)
def test_a_dry_run_lists_every_missing_setting_at_once(
    project: Path, monkeypatch: pytest.MonkeyPatch, provider: str, missing: list[str]
) -> None:
    for name in (
        "NB_SESSION_COMPARTMENT_OCID",
        "PROJECT_OCID",
        "CLOUDDDP_OCI_COMPARTMENT_ID",
        "CLOUDDDP_OCI_PROJECT_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    result = cli("launch", "-p", provider, "--dry-run", "train.py", cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: 2 settings are missing for --provider {provider}:"
    assert [line[2:].split(":")[0].split(" (")[0] for line in lines[1:]] == missing
    # The Estimator's door makes the same check, and reads the same context.
    with pytest.raises(CloudDDPError, match="2 settings are missing"):
        Estimator(provider=provider, entry_point="train.py", source_dir=str(project)).dry_run()
    if provider == "sagemaker":
        write_contexts({"default": {"sagemaker": {"role": ROLE, "region": "us-east-1"}}})
        rendered = Estimator(provider=provider, entry_point="train.py", source_dir=str(project)).dry_run()
        assert f"RoleArn: {ROLE}" in rendered


def test_launch_help_with_a_provider_shows_its_options_and_the_common_ones() -> None:
    every = cli("launch", "--help").stdout
    oci = cli("launch", "-p", "oci", "--help").stdout
    slurm = cli("render", "--provider=slurm", "--help").stdout

    def options(text: str) -> set[str]:  # the options tables' first column, not the examples
        return set(re.findall(r"^│ (--[a-z-]+)", text, re.M))

    assert {"--compartment", "--partition", "--instance-type"} <= options(every)
    assert "--compartment" in options(oci) and not {"--partition", "--instance-type"} & options(oci)
    assert "--partition" in options(slurm) and "--compartment" not in options(slurm)
    assert all({"--nodes", "--dry-run", "--context"} <= options(text) for text in (every, oci, slurm))
    assert len(oci.splitlines()) < len(every.splitlines()) * 0.75


@pytest.mark.parametrize(
    ("words", "offered", "not_offered"),
    [
        ("cloudddp launch -p oci --comp", ["--compartment", "--compose"], []),
        ("cloudddp launch -p slurm --p", ["--partition"], ["--project", "--profile", "--prefix"]),
        ("cloudddp launch --p", ["--partition", "--project"], []),
        ("cloudddp con", ["config"], []),
    ],
)
def test_shell_completion_offers_the_named_providers_options(
    words: str, offered: list[str], not_offered: list[str]
) -> None:
    env = {"_CLOUDDDP_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
    result = cli(env=env)
    assert result.returncode == 0, result.stderr
    completions = result.stdout.split()
    assert set(offered) <= set(completions) and not set(not_offered) & set(completions), completions


def test_completion_installs_from_the_cli() -> None:
    # Typer finds the shell from the process tree (shellingham), here `sh`; this variable makes it take the
    # shell's name instead, as typer's own tests do.
    result = cli("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert result.returncode == 0 and "_CLOUDDDP_COMPLETE=complete_bash" in result.stdout


def test_compose_is_refused_for_a_provider_without_one_naming_those_with_one(project: Path) -> None:
    result = cli("render", "-p", "slurm", "--compose", "train.py", cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == ("error: render --compose writes a provider's docker-compose local test; slurm has none "
                             "(use it with --provider oci).\n")  # fmt: skip
