"""The launcher's exit record: its code first, as the Slurm batch script reads it, and which node stopped it."""

from __future__ import annotations

from pathlib import Path

from cloudddp.launcher.exit_record import read_exit, record_exit


def test_a_node_stopped_because_of_another_says_which_and_keeps_the_code_first(tmp_path: Path) -> None:
    environ = {"CLOUDDDP_EXIT_DIR": str(tmp_path)}
    record_exit(environ, 0, 7, stopped_by=1)
    record_exit(environ, 1, 7)
    # The Slurm batch script compares the whole record with "0": a stopped node still counts as failed.
    assert (tmp_path / "node-0").read_text().split("\n")[0] == "7"
    assert read_exit(tmp_path / "node-0") == (7, 1)
    assert read_exit(tmp_path / "node-1") == (7, None)
    assert read_exit(tmp_path / "node-2") == (None, None)  # no record: a lost node
