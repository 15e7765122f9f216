"""Every shell command of the quickstart page (docs/getting-started.md) runs as written, in order, in one folder.

AWS is a moto server on 127.0.0.1 (`AWS_ENDPOINT_URL`, fake credentials for moto's account 123456789012, the
page's example role account); the commands find `cloudddp` on PATH in this venv. A block preceded by
`<!-- test: skip -->` is not run (the installs, `make`), and a block preceded by `<!-- test: file PATH -->` is
written to PATH first (the example training script). Everything else must exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO, run_tree

pytestmark = pytest.mark.slow

PAGE = REPO / "docs" / "getting-started.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
MARKER = re.compile(r"<!--\s*test:\s*(skip|file\s+(\S+))\s*-->\s*$")


@dataclass
class Block:
    language: str
    text: str
    marker: str  # "", "skip" or "file PATH"


def page_blocks(text: str) -> list[Block]:
    """The page's fenced code blocks, each with the marker on the last non-blank line before it (if any)."""
    found = []
    for match in FENCE.finditer(text):
        before = [line for line in text[: match.start()].splitlines() if line.strip()]
        marker = MARKER.search(before[-1]) if before else None
        found.append(Block(match.group(1), match.group(2), marker.group(1) if marker else ""))
    return found


def shell_commands(text: str) -> list[str]:
    """One command per line, a trailing backslash joining the next line; blank and comment lines dropped."""
    commands, current = [], ""
    for line in text.splitlines():
        current += line
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        if current.strip() and not current.lstrip().startswith("#"):
            commands.append(current.strip())
        current = ""
    return commands


def test_the_page_marks_what_it_does_not_run() -> None:
    blocks = page_blocks(PAGE.read_text(encoding="utf-8"))
    run = [b for b in blocks if b.language in ("bash", "sh", "shell") and b.marker != "skip"]
    assert run, "the quickstart runs no command"
    for block in run:
        for command in shell_commands(block.text):
            assert not re.match(r"(pip|python -m pip|make|git)\b", command), f"mark its block `test: skip`: {command}"
    assert any(b.marker.startswith("file ") for b in blocks), "the example script is no longer marked"


def test_every_quickstart_command_runs_against_moto(moto_server: dict[str, str], tmp_path: Path) -> None:
    env = dict(moto_server)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for name in ("CLOUDDDP_RUNS_DIR", "CLOUDDDP_PROVIDER", "CLOUDDDP_CACHE_DIR"):
        env.pop(name, None)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # cloudddp stage's hash cache: not the user's
    ran: list[tuple[str, str]] = []
    for block in page_blocks(PAGE.read_text(encoding="utf-8")):
        if block.marker.startswith("file "):
            target = tmp_path / block.marker.split(None, 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            continue
        if block.marker == "skip" or block.language not in ("bash", "sh", "shell"):
            continue
        for command in shell_commands(block.text):
            result = run_tree(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, env=env, timeout=600,
                              stdin=subprocess.DEVNULL)  # fmt: skip
            output = result.stdout + result.stderr
            shown = (
                output if len(output) < 6000 else f"{output[:2500]}\n[...]\n{output[-3500:]}"
            )  # the cause is often early
            assert result.returncode == 0, f"$ {command}\nexit {result.returncode}\n{shown}"
            ran.append((command, output))

    said = {command.split(" --", 1)[0]: output for command, output in ran}
    assert len(ran) >= 5, [command for command, _ in ran]
    local = next(output for command, output in ran if "-p local" in command)
    assert "epoch 2:" in local and "2 processes" in local, local[-2000:]
    assert list((tmp_path / "cloudddp-runs").glob("*/model/model.pt")), "the local run saved no model"
    assert "SUCCEEDED" in said["cloudddp status latest"]
    dry_run = next(output for command, output in ran if "--dry-run" in command)
    assert "TrainingJobName:" in dry_run and "ml.g5.12xlarge" in dry_run
    launched = next(output for command, output in ran if "-p sagemaker" in command and "--dry-run" not in command)
    assert "SUCCEEDED" in launched and "model.tar.gz" in launched, launched[-2000:]
