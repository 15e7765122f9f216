"""`cloudddp --version` / `-V` print the installed version, and `-h` is help at every level (in process)."""

from __future__ import annotations

from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from cloudddp.cli import app

runner = CliRunner()


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_installed_version(flag: str) -> None:
    result = runner.invoke(app, [flag])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"cloudddp {version('cloudddp')}"


def test_version_wins_over_a_command() -> None:
    result = runner.invoke(app, ["-V", "status", "latest"])
    assert result.exit_code == 0 and result.output.startswith("cloudddp "), result.output


def subcommands() -> list[str]:
    group = typer.main.get_command(app)  # typer's own click (typer._click), not the click package
    return sorted(group.commands)  # type: ignore[attr-defined]


def test_every_command_is_covered() -> None:
    assert {"launch", "render", "status", "logs", "cancel", "demo-data", "stage"} <= set(subcommands())


@pytest.mark.parametrize("args", [[], *[[name] for name in subcommands()]], ids=lambda a: " ".join(a) or "cloudddp")
def test_dash_h_is_help_at_every_level(args: list[str]) -> None:
    short = runner.invoke(app, [*args, "-h"])
    assert short.exit_code == 0, short.output
    assert "usage:" in short.output.lower()
    if args != ["stage"]:  # stage passes its arguments to its own parser; its -h is argparse's
        assert short.output == runner.invoke(app, [*args, "--help"]).output


@pytest.mark.parametrize("name", subcommands())
def test_usage_lines_name_arguments_as_the_help_texts_do(name: str) -> None:
    """In capitals (`SCRIPT`, `JOB`): typer's usage line would show the parameter's name (`{job}`)."""
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    names = [param.metavar for param in command.params if param.param_type_name == "argument"]
    assert all(metavar and metavar.rstrip(".").isupper() for metavar in names), names


def test_click_command_is_the_app_for_the_docs() -> None:
    import cloudddp.cli

    command = cloudddp.cli.click_command
    assert hasattr(command, "context_class") and "launch" in command.commands
