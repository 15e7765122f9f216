"""`cloudddp launch` (flags or -f job.yaml) and `Estimator(...)` are two doors to one job spec: the same settings
reach the same spec, and the same bad input gets the same one-paragraph refusal, before anything is started.

Tester findings 5-9 (findings-estimator.md): the Estimator could not run an elastic job; an absolute or
source_dir-prefixed entry_point was placed within source_dir by the CLI only; environment and hyperparameter
names the CLI refuses were taken from YAML and the Estimator; `-m train.py` ran the script, then failed; and
`--nodes ²` ended in a traceback."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypedDict

import pytest
import yaml
from helpers import cli

from cloudddp import Estimator
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import load_spec


class SageMakerOptions(TypedDict):
    """The sagemaker provider's options an Estimator takes as keywords (its **provider_options)."""

    instance_type: str
    role: str
    region: str


class NodeSettings(TypedDict, total=False):
    """The Estimator's node keywords, as a test passes some of them."""

    nodes: int | str
    instance_count: int | str
    min_nodes: int


SAGEMAKER = SageMakerOptions(
    instance_type="ml.m5.xlarge", role="arn:aws:iam::123456789012:role/SageMaker", region="us-east-1"
)
SAGEMAKER_FLAGS = ["--instance-type", "ml.m5.xlarge", "--role", SAGEMAKER["role"], "--region", "us-east-1"]


@pytest.fixture
def src(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A source folder holding train.py, with tmp_path as the current folder and runs kept under it."""
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "train.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLOUDDDP_RUNS_DIR", str(tmp_path / "runs"))
    return folder


def nothing_ran(folder: Path) -> bool:
    """No run folder (the Estimator's runs/, the CLI's ./cloudddp-runs) and the script never started."""
    return not any((folder / name).exists() for name in ("runs", "cloudddp-runs", "ran"))


def elastic_lines(dry_run: str) -> list[str]:
    """The launcher flags of an elastic job in a local dry run (the rendezvous id is a time stamp: left out)."""
    return [
        line.strip().removeprefix("- ")
        for line in dry_run.splitlines()
        if re.search(r"--(nnodes|max-restarts|rdzv-backend)=", line)
    ]


# -- finding 5: elastic jobs from the Estimator ------------------------------------------------------------------


@pytest.mark.parametrize("nodes", [{"nodes": "2:3"}, {"nodes": 3, "min_nodes": 2}, {"instance_count": "2:3"}])
def test_the_estimator_runs_an_elastic_range_as_launch_does(src: Path, nodes: NodeSettings) -> None:
    est = Estimator(provider="local", entry_point="train.py", source_dir=str(src), max_restarts=2, emulate="none",
                    **nodes)  # fmt: skip
    spec = est.spec(None)
    assert (spec.min_nodes, spec.nodes, spec.max_restarts, spec.local.emulate) == (2, 3, 2, "none")
    from_cli = cli("render", "-p", "local", "--emulate", "none", "--nodes", "2:3", "--max-restarts", "2",
                  str(src / "train.py"), cwd=src.parent)  # fmt: skip
    assert from_cli.returncode == 0, from_cli.stderr
    assert "--nnodes=2:3" in elastic_lines(est.dry_run())
    assert elastic_lines(est.dry_run()) == elastic_lines(from_cli.stdout)


def test_the_estimator_takes_the_rendezvous_settings(src: Path) -> None:
    est = Estimator(provider="local", entry_point="train.py", source_dir=str(src), nodes="2:4", emulate="kubeflow",
                    rdzv_backend="etcd-v2", rdzv_endpoint="127.0.0.1:2379")  # fmt: skip
    spec = est.spec(None)
    assert (spec.min_nodes, spec.nodes, spec.rdzv_backend, spec.rdzv_endpoint) == (2, 4, "etcd-v2", "127.0.0.1:2379")
    assert "--rdzv-backend=etcd-v2" in elastic_lines(est.dry_run())


@pytest.mark.parametrize(
    ("nodes", "message"),
    [({"nodes": "2:x"}, "nodes='2:x': expected a number of nodes (3) or MIN:MAX for elastic mode (2:3)."),
     ({"nodes": "²"}, "nodes='²': expected a number of nodes (3) or MIN:MAX for elastic mode (2:3)."),
     ({"nodes": "2:3", "min_nodes": 1}, "nodes='2:3' and min_nodes=1 disagree; give the range once.")],
)  # fmt: skip
def test_a_bad_node_range_is_named_as_the_estimator_spells_it(src: Path, nodes: NodeSettings, message: str) -> None:
    with pytest.raises(CloudDDPError) as error:
        Estimator(provider="local", entry_point="train.py", source_dir=str(src), **nodes)
    assert str(error.value) == message


def test_an_elastic_range_on_a_fixed_size_provider_is_refused_by_the_estimator_dry_run(src: Path) -> None:
    est = Estimator(provider="sagemaker", entry_point="train.py", source_dir=str(src), nodes="2:3", **SAGEMAKER)
    with pytest.raises(CloudDDPError, match="asks for elastic training, which the sagemaker provider cannot run"):
        est.dry_run()


@pytest.mark.parametrize(
    ("option", "hint"),
    [("min_node", "did you mean min_nodes for min_node"),
     ("shape", "shape is an option of the oci provider"),
     ("inputs", "inputs are fit()'s")],
)  # fmt: skip
def test_an_unknown_keyword_says_where_it_belongs(src: Path, option: str, hint: str) -> None:
    unknown: dict[str, Any] = {option: 2}  # a keyword the Estimator does not have: Any, as it is refused
    with pytest.raises(CloudDDPError) as error:
        Estimator(provider="local", entry_point="train.py", source_dir=str(src), **unknown)
    text = str(error.value)
    assert text.startswith(f"Estimator(provider='local') got unknown option(s) {option}: neither an Estimator argument")
    assert "min_nodes, max_restarts, rdzv_backend, rdzv_endpoint" in text  # the spec's settings are listed too
    assert "nor an option of the local provider (emulate, runs_dir" in text
    assert hint in text


# -- finding 6: one rule for the entry point within source_dir ---------------------------------------------------


@pytest.mark.parametrize("spelling", ["absolute", "from-here"])
def test_the_estimator_and_yaml_place_the_script_within_source_dir_as_the_cli_does(src: Path, spelling: str) -> None:
    entry = str(src / "train.py") if spelling == "absolute" else "src/train.py"
    est = Estimator(provider="sagemaker", entry_point=entry, source_dir="src", **SAGEMAKER)
    assert est.spec(None).entry_point == "train.py"
    sent = yaml.safe_load(est.dry_run())
    from_cli = cli("render", "-p", "sagemaker", *SAGEMAKER_FLAGS, "--source-dir", "src", entry, cwd=src.parent)
    assert from_cli.returncode == 0, from_cli.stderr
    for request in (sent, yaml.safe_load(from_cli.stdout)):
        job = request["before_submit"]["code"]["cloudddp_job.json"]
        assert job["entry_point"] == "train.py"  # SageMaker runs it within the unpacked source_dir
    spec_file = src.parent / "job.yaml"
    spec_file.write_text(yaml.safe_dump({"entry_point": entry, "source_dir": "src"}))
    assert load_spec(spec_file).entry_point == "train.py"


@pytest.mark.parametrize("spelling", ["absolute", "parent"])
def test_a_script_outside_source_dir_is_one_error_at_both_doors(src: Path, spelling: str) -> None:
    outside = src.parent / "other.py"
    outside.write_text("print('not shipped')\n")
    entry = str(outside) if spelling == "absolute" else "../other.py"
    message = (
        f"entry_point: the script '{outside}' is outside source_dir 'src' ({src}): only source_dir is shipped with "
        f"the job, and its nodes run the script from there. Move the script into source_dir, or give the folder "
        f"holding it as source_dir ('{src.parent}') (got '{entry}')."
    )
    with pytest.raises(CloudDDPError) as error:
        Estimator(provider="local", entry_point=entry, source_dir="src", emulate="none")
    assert str(error.value) == f"invalid job spec in Estimator(provider='local'): {message}"
    result = cli("launch", "-p", "local", "--emulate", "none", "--source-dir", "src", entry, cwd=src.parent)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert result.stderr == f"error: invalid job spec in the command line: {message}\n"
    assert nothing_ran(src.parent)


# -- finding 7: environment and hyperparameter names ---------------------------------------------------------------


BAD_NAMES = [
    ("environment", {"": "x"}, "environment: a variable's name is empty: no process can be given a variable without "
     "one (got '')"),
    ("environment", {"A=B": "x"}, "environment: a variable's name holds '=', which the environment reads as the end "
     "of the name (NAME=value): no process can be given it (got 'A=B')"),
    ("environment", {"BAD\0": "x"}, "environment: a variable's name holds a NUL character, which ends a string in "
     "the environment: no process can be given it (got 'BAD\\x00')"),
    ("environment", {"OK": "a\0b"}, "environment: this variable's value holds a NUL character, which ends a string "
     "in the environment (got 'OK')"),
    ("hyperparameters", {"": 1}, "hyperparameters: a hyperparameter's name is empty: the script would be given '--' "
     "(which ends its options) and the value as an argument (got '')"),
    ("hyperparameters", {"lr=0.1": 1}, "hyperparameters: a hyperparameter's name holds '=': the script would read "
     "--NAME=... as that option's value, and SageMaker's SM_HP_<NAME> variable cannot be named so; give the value "
     "as the value (lr: 0.1) (got 'lr=0.1')"),
]  # fmt: skip


@pytest.mark.parametrize(("field", "value", "message"), BAD_NAMES)
def test_a_name_no_process_can_take_is_refused_by_the_estimator(
    src: Path, field: str, value: dict[str, Any], message: str
) -> None:
    bad: dict[str, Any] = {field: value}  # environment or hyperparameters, named at run time: Any
    with pytest.raises(CloudDDPError) as error:
        Estimator(provider="local", entry_point="train.py", source_dir=str(src), emulate="none", **bad)
    assert str(error.value) == f"invalid job spec in Estimator(provider='local'): {message}."


@pytest.mark.parametrize(("field", "value", "message"), BAD_NAMES)
def test_a_name_no_process_can_take_is_refused_from_yaml_and_nothing_runs(
    src: Path, field: str, value: dict[str, Any], message: str
) -> None:
    spec_file = src.parent / "job.yaml"
    spec_file.write_text(yaml.safe_dump({"entry_point": "train.py", "source_dir": "src", "local": {"emulate": "none"},
                                         field: value}))  # fmt: skip
    result = cli("launch", "-f", str(spec_file), cwd=src.parent)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == f"error: invalid job spec in {spec_file} and the command line: {message}.\n"
    assert nothing_ran(src.parent)


def test_a_secret_in_a_name_with_an_equals_sign_is_not_shown(src: Path) -> None:
    with pytest.raises(CloudDDPError) as error:
        Estimator(provider="local", entry_point="train.py", source_dir=str(src), environment={"HF_TOKEN=hf_abc123": ""})
    assert "a variable's name holds '='" in str(error.value) and "hf_abc123" not in str(error.value)


def test_names_some_platform_takes_are_still_taken(src: Path) -> None:
    # The spec refuses what no platform takes; Slurm, SageMaker and OCI check their stricter rules themselves.
    est = Estimator(provider="local", entry_point="train.py", source_dir=str(src), emulate="none",
                    environment={"my.var-1": "x", "lower": "", "1ABC": "z"},
                    hyperparameters={"learning-rate": 0.1, "a.b": "c=d"})  # fmt: skip
    spec = est.spec(None)
    assert set(spec.environment) == {"my.var-1", "lower", "1ABC"}
    assert spec.script_args() == ["--learning-rate", "0.1", "--a.b", "c=d"]


# -- finding 8: -m takes a module's name, not a file's ---------------------------------------------------------


def test_a_module_named_as_a_file_is_refused_at_both_doors(src: Path) -> None:
    message = (
        "entry_point: with module true (-m) it names a module, and 'train.py' is a file's name: python -m takes a "
        "module name ('train'), not a file. Give the module's name, or run the file without -m / module: true "
        "(got 'train.py')."
    )
    with pytest.raises(CloudDDPError) as error:
        Estimator(provider="local", entry_point="train.py", source_dir=str(src), module=True, emulate="none")
    assert str(error.value) == f"invalid job spec in Estimator(provider='local'): {message}"
    dry = cli("launch", "-m", "--source-dir", "src", "--emulate", "none", "--dry-run", "train.py", cwd=src.parent)
    assert dry.returncode == 2 and dry.stdout == "", dry.stdout + dry.stderr
    assert dry.stderr == f"error: invalid job spec in the command line: {message}\n"


def test_a_spec_file_s_module_flag_with_a_script_is_refused_before_the_script_runs(src: Path) -> None:
    spec_file = src.parent / "mod.yaml"
    spec_file.write_text("entry_point: train\nmodule: true\nsource_dir: src\nlocal: {emulate: none}\n")
    result = cli("launch", "-f", str(spec_file), str(src / "train.py"), cwd=src.parent)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert "python -m takes a module name ('train'), not a file" in result.stderr
    assert nothing_ran(src.parent)


def test_a_dotted_module_name_is_still_a_module(src: Path) -> None:
    est = Estimator(provider="local", entry_point="pkg.train", source_dir=str(src), module=True)
    assert est.spec(None).entry_point == "pkg.train"


# -- finding 9: counts are ASCII digits ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--nodes", "²", "error: --nodes '²': expected a number of nodes (3) or MIN:MAX for elastic mode (2:3).\n"),
     ("--nodes", "2:²", "error: --nodes '2:²': expected a number of nodes (3) or MIN:MAX for elastic mode (2:3).\n"),
     ("--nproc-per-node", "²", "nproc_per_node.int: Input should be a valid integer, unable to parse string as an "
      "integer (got '²')")],
)  # fmt: skip
def test_a_superscript_digit_is_one_clear_error_not_a_traceback(src: Path, flag: str, value: str, message: str) -> None:
    result = cli("render", "-p", "local", flag, value, str(src / "train.py"), cwd=src.parent)
    assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
    assert "Traceback" not in result.stderr and message in result.stderr


def test_a_count_is_ascii_digits_only() -> None:
    from cloudddp.elastic import is_count  # here: the other tests also run against code without it

    assert is_count("12") and not is_count("²") and not is_count("٣") and not is_count("") and not is_count("-1")


def test_both_doors_set_every_field_of_the_spec_that_says_what_job_runs() -> None:
    """launch's spec options come from the spec's fields (cli.SPEC_OPTIONS, with the field's description as their
    help), and the Estimator takes each field by its name: a field added to the spec without a way to set it at
    either door fails here. inputs are fit()'s at the Estimator; targets and failover are the spec file's at the
    command line (a list of sections has no flag) and arguments of the Estimator."""
    import inspect

    from cloudddp import cli
    from cloudddp.spec import JobSpecBase

    set_by_flags = {option.field for option in cli.SPEC_OPTIONS} | {"entry_point", "module", "args"}
    spec_only = {"targets", "failover"}
    assert set_by_flags == set(JobSpecBase.model_fields) - spec_only
    estimator = set(inspect.signature(Estimator).parameters) - {"provider", "provider_options", "instance_count"}
    assert estimator == set(JobSpecBase.model_fields) - {"inputs"}
    helps = {p.name: p.default.help for p in cli.spec_option_parameters()}
    assert helps["max_runtime"] == JobSpecBase.model_fields["max_runtime"].description
    assert helps["env"] == f"{JobSpecBase.model_fields['environment'].description} (repeatable)"
