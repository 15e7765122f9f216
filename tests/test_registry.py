"""The provider registry: built-ins declare themselves, the rest is derived from the declarations."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import yaml
from helpers import REPO, SOURCES, cli, run_cli

from cloudddp import Estimator
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec, job_spec_model
from cloudddp.providers import registry
from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.spec import Section


class TinySettings(Section):
    queue: str = "default"


def tiny(**changes: object) -> ProviderInfo:
    fields: dict[str, object] = {"name": "tiny", "summary": "a test provider", "settings": TinySettings,
                                 "options": (Option("--queue", "queue"),), "factory": "tiny_module:create"}  # fmt: skip
    fields.update(changes)
    return ProviderInfo(**fields)  # type: ignore[arg-type]


def test_the_built_in_providers_are_found_by_scanning_their_folders() -> None:
    found = registry.providers()
    assert next(iter(found)) == "local"  # the default comes first
    assert {"local", "sagemaker", "oci"} <= set(found)
    assert found["local"].interrupt_stops_job and not found["sagemaker"].interrupt_stops_job


def test_the_job_spec_has_one_section_per_provider_from_its_settings_model() -> None:
    fields = job_spec_model().model_fields
    for name, info in registry.providers().items():
        assert fields[name].annotation is info.settings


def test_the_type_checkers_job_spec_has_the_built_in_sections() -> None:
    """job_spec.py's `JobSpec` under TYPE_CHECKING (what pyright checks `spec.sagemaker.role` against) names each
    built-in provider's section with its settings class, as the run-time model has them."""
    import ast

    import cloudddp.job_spec

    tree = ast.parse(Path(cloudddp.job_spec.__file__).read_text())
    (typed,) = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == "JobSpec"]
    declared = {item.target.id: ast.unparse(item.annotation) for item in typed.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}  # fmt: skip
    builtin = {name: info.settings.__name__ for name, info in registry.providers().items()
               if info.settings.__module__.startswith("cloudddp.providers.")}  # fmt: skip
    assert declared == builtin


@pytest.mark.process
def test_declaring_a_provider_imports_no_sdk() -> None:
    import subprocess
    import sys

    code = "import sys; from cloudddp.providers import registry; registry.providers(); " \
           "print(sorted({'boto3', 'oci', 'kubernetes', 'torch'} & set(sys.modules)))"  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_an_unknown_provider_is_one_sentence_listing_the_known_ones() -> None:
    with pytest.raises(CloudDDPError, match=r"unknown provider 'nope'; choose one of: local, "):
        registry.get("nope")


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"settings": dict}, "subclass of cloudddp.spec.Section"),
        ({"options": (Option("--queue", "qeue"),)}, "sets 'qeue', which TinySettings does not have"),
        ({"options": (Option("--queue", "queue", type=list),)}, "of type str, int, float or bool"),
        ({"options": (Option("queue", "queue"),)}, "a --flag"),
        ({"name": "Tiny-One"}, "lower-case Python identifier"),
        ({"factory": ""}, "factory is empty"),
    ],
)
def test_a_declaration_that_does_not_fit_names_its_origin_and_problem(changes: dict, fragment: str) -> None:
    with pytest.raises(CloudDDPError, match="my origin: ") as caught:
        registry.check_declaration(tiny(**changes), "my origin")
    assert fragment in str(caught.value)


def test_a_missing_sdk_is_a_pip_hint_naming_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "needs_sdk.py").write_text("import some_missing_sdk_xyz\ndef create(): ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(CloudDDPError, match=r"the tiny provider needs the Python package 'some_missing_sdk_xyz': "
                                            r"pip install 'cloudddp\[tiny\]'"):  # fmt: skip
        tiny(factory="needs_sdk:create").create()


# -- a third-party provider: one file plus its entry point --------------------------------------

THROWAWAY = Path(__file__).parent / "helpers" / "throwaway_provider.py"
SCRIPT = """\
import os, sys
print(os.environ["GREETING"], "from the script", *sys.argv[1:])
"""


def install_throwaway(site: Path) -> Path:
    """The provider's one file, and the metadata pip would write for a distribution that ships it."""
    site.mkdir()
    (site / "throwaway_provider.py").write_text(THROWAWAY.read_text())
    dist = site / "throwaway_provider-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: throwaway-provider\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[cloudddp.providers]\nthrowaway = throwaway_provider:PROVIDER\n")
    return site


@pytest.fixture
def throwaway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The throwaway provider installed on sys.path (in-process) and PYTHONPATH (subprocesses); a project."""
    site = install_throwaway(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hello.py").write_text(SCRIPT)
    registry.refresh()
    yield site
    monkeypatch.undo()
    registry.refresh()


def test_an_entry_point_provider_is_registered_with_its_spec_section(throwaway: Path) -> None:
    info = registry.get("throwaway")
    assert info.settings.__name__ == "ThrowawaySettings" and info.interrupt_stops_job
    assert job_spec_model().model_fields["throwaway"].annotation is info.settings


@pytest.mark.process
def test_the_cli_launches_a_job_on_the_entry_point_provider(throwaway: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(throwaway)}
    help_text = run_cli("launch", "--help", cwd=tmp_path, env=env).stdout
    assert "Throwaway options" in help_text and "--greeting" in help_text and "--throwaway-folder" in help_text
    dry = run_cli("launch", "-p", "throwaway", "--greeting", "hi", "--dry-run", "src/hello.py", cwd=tmp_path, env=env)
    assert dry.returncode == 0, dry.stderr
    assert yaml.safe_load(dry.stdout)["request"]["env"] == {"GREETING": "hi"}
    assert not (tmp_path / "throwaway-runs").exists()
    result = run_cli("launch", "-p", "throwaway", "--greeting", "hi", "src/hello.py", "--", "--x", "1",
                     cwd=tmp_path, env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "[throwaway] hi from the script --x 1" in result.stdout and "cloudddp: job SUCCEEDED" in result.stdout


def test_the_cli_refuses_another_providers_flag_for_the_entry_point_provider(throwaway: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(throwaway)}
    result = cli("launch", "-p", "throwaway", "--shape", "BM.GPU4.8", "src/hello.py", cwd=tmp_path, env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--shape is an option of oci, not of --provider throwaway" in result.stderr
    assert not (tmp_path / "throwaway-runs").exists()


@pytest.mark.process
def test_the_estimator_fits_on_the_entry_point_provider(throwaway: Path, capsys: pytest.CaptureFixture[str]) -> None:
    est = Estimator(provider="throwaway", entry_point="hello.py", source_dir="src", greeting="bonjour",
                    hyperparameters={"epochs": 2})  # fmt: skip
    status = est.fit()
    assert status is not None and status.succeeded
    assert "[throwaway] bonjour from the script --epochs 2" in capsys.readouterr().out
    with pytest.raises(CloudDDPError, match="unknown option"):
        Estimator(provider="throwaway", entry_point="hello.py", source_dir="src", shape="BM.GPU4.8")


@pytest.mark.process
def test_a_failing_job_on_the_entry_point_provider_fails_fit_and_launch(throwaway: Path, tmp_path: Path) -> None:
    (tmp_path / "src" / "fail.py").write_text("import sys; print('failing'); sys.exit(3)\n")
    est = Estimator(provider="throwaway", entry_point="fail.py", source_dir="src")
    with pytest.raises(CloudDDPError, match="ended FAILED") as caught:
        est.fit()
    assert caught.value.exit_code == 3  # the job's own code, as launch exits with
    result = run_cli("launch", "-p", "throwaway", "src/fail.py", cwd=tmp_path, env={"PYTHONPATH": str(throwaway)})
    assert result.returncode == 3 and "cloudddp: job FAILED" in result.stdout


# -- the CLI and the Estimator, derived from the declarations ----------------------------------


def help_panels(text: str) -> dict[str, str]:
    """`launch --help` split into its rich panels: title -> the panel's text."""
    panels: dict[str, str] = {}
    title = ""
    for line in text.splitlines():
        if line.startswith("╭─ "):
            title = line.removeprefix("╭─ ").split(" ─")[0]
            panels[title] = ""
        elif title:
            panels[title] += line + "\n"
    return panels


def test_launch_help_groups_each_providers_options_under_its_title() -> None:
    result = cli("launch", "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    panels = help_panels(result.stdout)
    for name, info in registry.providers().items():
        shared = {o.flag for other in registry.providers().values() if other is not info for o in other.options}
        for option in info.options:
            panel = "Options of several providers" if option.flag in shared else f"{info.display_title} options"
            assert f" {option.flag} " in panels[panel], (name, option.flag)
        assert f"{name}: {info.summary}" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-p", "local", "--instance-type", "ml.g5.xlarge"],
            "--instance-type is an option of sagemaker, not of --provider local",
        ),
        (
            ["-p", "local", "--region", "us-east-1"],
            "--region is an option of oci and sagemaker, not of --provider local",
        ),
        (["-p", "sagemaker", "--emulate", "oci"], "--emulate is an option of local, not of --provider sagemaker"),
        (["-p", "nope"], "unknown provider 'nope'; choose one of: local, "),
    ],
)
def test_a_flag_of_another_provider_is_refused_not_ignored(tmp_path: Path, args: list[str], message: str) -> None:
    result = cli("launch", *args, "--runs-dir" if args[1] == "local" else "--name", "x", "--dry-run",
                     "sources/allreduce_check.py", cwd=REPO)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and message in result.stderr


def test_estimator_nodes_and_its_sagemaker_alias_instance_count_are_one_setting() -> None:
    estimator = partial(Estimator, provider="local", entry_point="allreduce_check.py", source_dir=str(SOURCES))
    assert estimator(nodes=3).spec(None).nodes == 3
    assert estimator(instance_count=3).spec(None).nodes == 3
    with pytest.raises(CloudDDPError, match="nodes=2 and instance_count=3: they are one setting"):
        estimator(nodes=2, instance_count=3)


@pytest.mark.process
def test_a_broken_third_party_declaration_is_one_paragraph_exit_2(tmp_path: Path) -> None:
    site = install_throwaway(tmp_path / "site")
    module = site / "throwaway_provider.py"
    module.write_text(module.read_text().replace('Option("--greeting", "greeting"', 'Option("--greeting", "greting"'))
    result = run_cli("launch", "--help", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: entry point throwaway = throwaway_provider:PROVIDER")
    assert "option --greeting sets 'greting', which ThrowawaySettings does not have" in result.stderr


@pytest.mark.process
def test_a_third_party_provider_cannot_take_a_built_in_name(tmp_path: Path) -> None:
    site = install_throwaway(tmp_path / "site")
    (site / "throwaway_provider-0.1.dist-info" / "entry_points.txt").write_text(
        "[cloudddp.providers]\nthrowaway = throwaway_provider:PROVIDER\nlocal = throwaway_provider:LOCAL\n"
    )
    with open(site / "throwaway_provider.py", "a") as module:
        module.write("\nimport dataclasses\nLOCAL = dataclasses.replace(PROVIDER, name='local')\n")
    result = run_cli("status", "latest", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "two providers are named 'local'" in result.stderr


@pytest.fixture
def extra_provider_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A second folder searched for cloudddp.providers sub-packages, as if they were in the source tree."""
    import cloudddp.providers as package

    folder = tmp_path / "providers"
    folder.mkdir()
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    registry.refresh()
    yield folder
    monkeypatch.undo()
    for name in [m for m in sys.modules if m.startswith("cloudddp.providers.halfway")]:
        del sys.modules[name]
    registry.refresh()


def test_a_provider_folder_without_a_declaration_is_skipped_and_named_when_asked_for(
    extra_provider_folder: Path,
) -> None:
    (extra_provider_folder / "halfway").mkdir()
    (extra_provider_folder / "halfway" / "__init__.py").write_text('"""Work in progress."""\n')
    assert "halfway" not in registry.names() and "local" in registry.names()
    with pytest.raises(CloudDDPError, match=r"unknown provider 'halfway' \(cloudddp/providers/halfway/__init__.py "
                                            r"declares no PROVIDER = ProviderInfo\(\.\.\.\)\)"):  # fmt: skip
        registry.get("halfway")


def test_a_folder_of_shared_code_is_no_provider_and_no_half_written_one() -> None:
    """providers/batch holds what Slurm and PBS share and says PROVIDER = None: not listed, and `-p batch` is an
    unknown provider without the hint meant for a provider being written."""
    assert "batch" not in registry.names()
    with pytest.raises(CloudDDPError) as refused:
        registry.get("batch")
    assert str(refused.value).startswith("unknown provider 'batch'; choose one of: local,")


def test_a_provider_folder_must_declare_its_own_name(extra_provider_folder: Path) -> None:
    (extra_provider_folder / "halfway").mkdir()
    (extra_provider_folder / "halfway" / "__init__.py").write_text(
        "import dataclasses\nfrom cloudddp.providers.local import PROVIDER as LOCAL\n"
        "PROVIDER = dataclasses.replace(LOCAL, name='elsewhere')\n"
    )
    with pytest.raises(
        CloudDDPError, match=r"halfway/__init__\.py: PROVIDER\.name is .elsewhere.; it must be the folder"
    ):
        registry.providers()


@pytest.mark.process
def test_run_job_submits_the_very_request_its_dry_run_prints(throwaway: Path) -> None:
    """The one door (`launch` and `fit` both call run_job): what is submitted is the object the dry run printed."""
    # the module the entry point names, importable once the fixture installed it (on sys.path at run time only)
    import throwaway_provider  # pyright: ignore[reportMissingImports]

    from cloudddp.session import JobRecord, run_job

    submitted: list[object] = []

    class Recording(throwaway_provider.ThrowawayProvider):
        def submit(self, job: object) -> object:
            submitted.append(job)
            return super().submit(job)  # type: ignore[arg-type]

    spec = build_spec({"entry_point": "hello.py", "source_dir": "src"})
    printed: list[str] = []
    dry, sent = JobRecord(), JobRecord()
    assert run_job(Recording(), spec, dry_run=True, say=printed.append, record=dry) == 0
    assert submitted == [] and printed == [dry.request.to_yaml().rstrip()]  # type: ignore[union-attr]
    assert run_job(Recording(), spec, logs=False, say=lambda line: None, record=sent) == 0
    assert submitted == [sent.request] and submitted[0] is sent.request
    assert sent.request.to_yaml() == dry.request.to_yaml()  # type: ignore[union-attr]
