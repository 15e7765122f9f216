"""`cloudddp render -p oci --compose` writes what the user asked, or refuses: never silently something else.

Docker Compose interpolates `$NAME` and `${NAME}` in every value of the file from the host's
environment and reads `$$` as one literal `$` (Compose specification, "Interpolation":
https://docs.docker.com/reference/compose-file/interpolation/). `interpolate` below does what
that chapter describes, so the tests read the written file back as Compose would.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import run_cli

from cloudddp.providers.oci.compose import ENTRYPOINT

# `$$`, `$NAME`, `${NAME}` (the forms cloudddp may write); any other `$` is kept, as the spec says.
REFERENCE = re.compile(r"\$(?:(?P<escaped>\$)|(?P<named>[_a-zA-Z][_a-zA-Z0-9]*)|\{(?P<braced>[^}]*)\})")
HOST = {"b": "FROM-HOST", "y": "FROM-HOST", "HOME": "/root", "HF_TOKEN": "token-from-the-host"}


def interpolate(value: Any, environ: Mapping[str, str]) -> Any:
    """A value of the file as the container gets it (unset variables become "", as Compose does after a warning)."""
    if isinstance(value, dict):
        return {key: interpolate(item, environ) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, environ) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        name = match.group("named") or match.group("braced")
        assert re.fullmatch(r"[_a-zA-Z][_a-zA-Z0-9]*", name), f"cloudddp wrote ${{{name}}}"
        return environ.get(name, "")

    return REFERENCE.sub(substitute, value)


def render(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return run_cli("render", "-p", "oci", "--compose", *args, cwd=tmp_path, timeout=120)


def written(tmp_path: Path, *args: str) -> dict[str, Any]:
    result = render(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)["services"]


def refused(tmp_path: Path, *args: str) -> str:
    result = render(tmp_path, *args)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert "Traceback" not in result.stderr
    return " ".join(result.stderr.split())  # the console wraps long lines


# -- finding 4a: dollar signs ------------------------------------------------------------------------
@pytest.mark.process
def test_dollar_signs_are_written_as_double_dollars_and_read_back_as_the_users_literals(tmp_path: Path) -> None:
    services = written(tmp_path, "--nodes", "2", "-e", "FOO=a$b", "-e", "PRICE=$5 ${HOME}", "train.py",
                       "--", "--pattern", "x$y")  # fmt: skip
    assert len(services) == 2
    for service in services.values():
        environment = service["environment"]
        assert (environment["FOO"], environment["PRICE"]) == ("a$$b", "$$5 $${HOME}")
        assert service["command"] == ["train.py", "--pattern", "x$$y"]
        assert environment["OCI__ENTRY_SCRIPT_ARGS"] == "--pattern 'x$$y'"
        seen = interpolate(service, HOST)  # what the container gets
        assert (seen["environment"]["FOO"], seen["environment"]["PRICE"]) == ("a$b", "$5 ${HOME}")
        assert seen["command"] == ["train.py", "--pattern", "x$y"]
        assert shlex.split(seen["environment"]["OCI__ENTRY_SCRIPT_ARGS"]) == ["--pattern", "x$y"]
        assert seen["entrypoint"] == ENTRYPOINT  # its own `$(...)` and `"$@"` reach sh unchanged


@pytest.mark.process
def test_secret_variables_stay_references_to_the_hosts_environment(tmp_path: Path) -> None:
    services = written(tmp_path, "-e", "HF_TOKEN=s3cr$t-value", "-e", "PLAIN=p$q", "train.py")
    result = render(tmp_path, "-e", "HF_TOKEN=s3cr$t-value", "train.py")
    assert "s3cr" not in result.stdout
    (service,) = services.values()
    assert service["environment"]["HF_TOKEN"] == "${HF_TOKEN}"  # not $${HF_TOKEN}: Compose must substitute it
    seen = interpolate(service, HOST)["environment"]
    assert (seen["HF_TOKEN"], seen["PLAIN"]) == ("token-from-the-host", "p$q")


@pytest.mark.process
def test_a_source_folder_with_a_dollar_is_mounted_from_that_folder(tmp_path: Path) -> None:
    folder = tmp_path / "co$t"
    folder.mkdir()
    (service,) = written(folder, "train.py").values()
    assert f"{tmp_path}/co$$t:/code:ro" in service["volumes"]
    assert f"{folder}:/code:ro" in interpolate(service, HOST)["volumes"]


@pytest.mark.process
def test_a_secret_name_compose_cannot_substitute_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, "-e", "MY-TOKEN=abc", "train.py")
    assert (
        "environment.MY-TOKEN: a secret-named variable reaches the compose file as a ${MY-TOKEN} reference" in message
    )
    assert "abc" not in message


# -- finding 4b: --output and --checkpoint -------------------------------------------------------------
@pytest.mark.process
def test_a_local_output_takes_the_main_services_model_and_a_local_checkpoint_is_shared(tmp_path: Path) -> None:
    services = written(tmp_path, "--nodes", "2", "--output", "out", "--checkpoint", str(tmp_path / "ck"), "train.py")
    main, worker = services["cloudddp-job-main"], services["cloudddp-job-worker-0"]
    assert f"{tmp_path / 'out'}:/output" in main["volumes"]
    assert main["environment"]["CLOUDDDP_MODEL_DIR"] == "/output"
    assert worker["environment"]["CLOUDDDP_MODEL_DIR"] == "/outputs/model"  # its own, under ./cloudddp-compose
    assert not any(volume.endswith(":/output") for volume in worker["volumes"])
    for service in (main, worker):
        assert f"{tmp_path / 'ck'}:/checkpoints" in service["volumes"]
        assert service["environment"]["CLOUDDDP_CHECKPOINT_DIR"] == "/checkpoints"
    header = render(tmp_path, "--output", "out", "train.py").stdout.splitlines()[2]
    assert f"the main service's in '{tmp_path / 'out'}'" in header


@pytest.mark.process
@pytest.mark.parametrize("flag", ["--output", "--checkpoint"])
def test_an_oci_uri_output_or_checkpoint_is_refused_naming_it(tmp_path: Path, flag: str) -> None:
    message = refused(tmp_path, flag, "oci://bucket@namespace/models", "train.py")
    field = flag.removeprefix("--")
    assert message.startswith(
        f"error: {field}='oci://bucket@namespace/models': the docker-compose test (render -p oci --compose) mounts "
        f"folders of this host"
    )


# -- finding 4c: an elastic node range -----------------------------------------------------------------
@pytest.mark.process
def test_an_elastic_node_range_is_refused_as_render_refuses_it(tmp_path: Path) -> None:
    message = refused(tmp_path, "--nodes", "1:3", "train.py")
    assert message.startswith("error: min_nodes=1 (nodes 1:3) asks for elastic training")
    plain = run_cli("render", "-p", "oci", "--nodes", "1:3", "train.py", cwd=tmp_path, timeout=120)
    assert plain.returncode == 2
    assert " ".join(plain.stderr.split()) == message  # the same refusal, word for word


# -- a secret in the script's arguments: the compose file's command is as readable as the OCI job's CMD ---------
@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "named"),
    [(["-H", "api_key=hpsecret123"], "hyperparameters.api_key"), (["train.py", "--", "--hf-token", "argsecret456"],
     "hf-token")],
)  # fmt: skip
def test_a_secret_in_the_scripts_arguments_is_refused_not_written(tmp_path: Path, args: list[str], named: str) -> None:
    # Before: `command:` held `--api_key hpsecret123` (and the value in OCI__ENTRY_SCRIPT_ARGS), in clear.
    argv = args if "train.py" in args else [*args, "train.py"]
    result = render(tmp_path, *argv)
    assert result.returncode == 2, result.stdout
    assert named in result.stderr and "${" in result.stderr  # what to do instead: a variable Compose fills in
    assert "secret123" not in result.stderr + result.stdout and "secret456" not in result.stderr + result.stdout
