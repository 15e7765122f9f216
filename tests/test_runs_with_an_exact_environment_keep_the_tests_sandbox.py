"""A test that runs the CLI with an exact environment (`inherit_env=False`, to see what a user without some variable
sees) still runs inside its own sandbox: its job index, contexts and temp folder (tests/conftest.py). Without them
such a run read the developer's job index under ~/.local/state, and wrote it once that index needed a new column
(a fresh-clone CI run's guard caught it)."""

from __future__ import annotations

import os

from helpers import SANDBOX_VARIABLES, cli, exact_env

from cloudddp import job_index


def test_the_cli_run_with_an_exact_environment_lists_the_tests_own_jobs() -> None:
    job_index.record("sagemaker", "sandboxed-job-1", "sandboxed", "cloudddp launch")
    result = cli("list", "--all", env={"PATH": os.environ["PATH"]}, inherit_env=False)
    assert result.returncode == 0, result.stderr
    assert "sandboxed-job-1" in result.stdout


def test_the_given_environment_still_wins() -> None:
    assert exact_env({"XDG_STATE_HOME": "/elsewhere"})["XDG_STATE_HOME"] == "/elsewhere"
    assert set(exact_env(None)) == {name for name in SANDBOX_VARIABLES if name in os.environ}
