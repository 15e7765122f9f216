"""The #PBS lines for values qsub must read whole (paths with spaces and commas, queues with spaces), and secret
variables named in qsub's -v list (values a directive cannot carry, and secrets: tests/providers/batch).

No PBS server or qsub runs here: each line is split the way OpenPBS's qsub splits it (`split_like_qsub`, from
openpbs/openpbs src/cmds/qsub.c make_argv and copy_env_value, commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cloudddp.job_spec import build_spec
from cloudddp.providers.pbs.provider import PBSProvider


def split_like_qsub(line: str) -> list[str]:
    """make_argv: whitespace separates words, ' or " group them (nothing escaped inside), \\ escapes outside."""
    words: list[str] = []
    word, at, started = "", 0, False
    while at < len(line):
        char = line[at]
        if char in "\"'":
            end = line.index(char, at + 1)  # ValueError: qsub's "unmatched" quote
            word, at, started = word + line[at + 1 : end], end + 1, True
        elif char == "\\":
            word, at, started = word + line[at + 1], at + 2, True
        elif char.isspace():
            words += [word] if started else []
            word, at, started = "", at + 1, False
        else:
            word, at, started = word + char, at + 1, True
    return words + ([word] if started else [])


def variable_list(value: str) -> dict[str, str]:
    """set_job_env / copy_env_value on -v's value: NAME=VALUE or NAME, comma-separated; a quoted value keeps its
    commas. (A NAME alone takes its value from qsub's environment: shown here as None.)"""
    variables: dict[str, Any] = {}
    at = 0
    while at < len(value):
        name_end = min((i for i in (value.find(",", at), value.find("=", at)) if i >= 0), default=len(value))
        name = value[at:name_end]
        if name_end == len(value) or value[name_end] == ",":
            variables[name], at = None, name_end + 1
            continue
        at, text, quote = name_end + 1, "", ""
        while at < len(value) and (quote or value[at] != ","):
            if value[at] in "\"'" and (not quote or value[at] == quote):
                quote = "" if quote else value[at]
            else:
                text += value[at]
            at += 1
        assert not quote, f"unterminated quote in {value!r}"
        variables[name], at = text, at + 1
    return variables


def directives(script: str) -> dict[str, list[str]]:
    """Each #PBS line's words as qsub reads them, by option (the last line of an option wins)."""
    lines = [split_like_qsub(line.removeprefix("#PBS")) for line in script.splitlines() if line.startswith("#PBS")]
    return {words[0]: words[1:] for words in lines}


def spec_data(tmp_path: Path, **pbs: Any) -> dict[str, Any]:
    source = tmp_path / "sp ace"
    source.mkdir(exist_ok=True)
    (source / "my script.py").write_text("print(1)\n")
    return {"name": "check", "entry_point": "my script.py", "source_dir": str(source), "nodes": 2,
            "environment": {"MY_SECRET": "swordfish"}, "pbs": {"runs_dir": str(tmp_path / "runs"), **pbs}}  # fmt: skip


def render(tmp_path: Path, **fields: Any) -> Any:
    data = spec_data(tmp_path, **fields.pop("pbs", {}))
    return PBSProvider().render(build_spec({**data, **fields}))


@pytest.mark.parametrize("folder", ["runs dir", "runs,dir", "runs #1"])
def test_the_run_folder_reaches_qsubs_variable_list_whole(tmp_path: Path, folder: str) -> None:
    runs = tmp_path / "sp ace" / folder
    read = directives(render(tmp_path, pbs={"runs_dir": str(runs)}).request.script)
    assert variable_list(" ".join(read["-v"])) == {"CLOUDDDP_RUNS_DIR": str(runs), "MY_SECRET": None}
    assert len(read["-v"]) == 1  # one word: the list is not cut at the space


def test_a_queue_and_account_are_one_word_each(tmp_path: Path) -> None:
    read = directives(render(tmp_path, pbs={"queue": "gpu a", "account": "proj'1"}).request.script)
    assert (read["-q"], read["-A"]) == (["gpu a"], ["proj'1"])


def test_a_password_in_a_variable_is_named_in_the_variable_list(tmp_path: Path) -> None:
    request = render(tmp_path, environment={"URL": "https://user:pw@host/x", "MODE": "fast"})
    assert variable_list(" ".join(directives(request.request.script)["-v"]))["URL"] is None  # by name
