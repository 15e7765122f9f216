"""Variable_List as qstat prints it: a comma, quote or backslash in a value (the run folder) reads back intact.

The server stores each NAME=value with `"`, `'`, `,` and `\\` escaped by a backslash (openpbs/openpbs at
cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a, src/lib/Libattr/attr_fn_arst.c encode_arst_bs); `qstat -f` prints
that string, folded onto tab-indented lines; `qstat -F json` (src/cmds/qstat.c prt_attr) splits it into an
object, dropping only the commas' escapes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from cloudddp.providers.pbs.provider import PBSProvider, parse_full_text, split_variable_list

RUNS = '/scratch/o\'neil, "x"\\y/runs'  # a comma, both quotes and a backslash


def encode_arst_bs(value: str) -> str:
    """What the server escapes (attr_fn_arst.c encode_arst_bs)."""
    return "".join("\\" + c if c in "\"',\\" else c for c in value)


def qstat(tmp_path: Path, text: str, json_record: Mapping[str, object] | None) -> PBSProvider:
    """A `qstat` printing `json_record` for -F json (or failing, as Torque's does), else `text`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "record.txt").write_text(text)
    (tmp_path / "record.json").write_text(json.dumps(json_record))
    json_answer = f"cat {tmp_path / 'record.json'}" if json_record else "echo 'qstat: invalid option -- F' >&2; exit 2"
    (bin_dir / "qstat").write_text(
        f'#!/bin/sh\ncase "$*" in *json*) {json_answer} ;; *) cat {tmp_path / "record.txt"} ;; esac\n'
    )
    (bin_dir / "qstat").chmod(0o755)
    return PBSProvider(environ={"PATH": f"{bin_dir}:/usr/bin:/bin"})


@pytest.mark.process
def test_the_text_form_splits_only_at_unescaped_commas(tmp_path: Path) -> None:
    variables = f"PBS_O_HOME=/home/me,CLOUDDDP_RUNS_DIR={encode_arst_bs(RUNS)},PBS_O_SHELL=/bin/bash"
    folded = variables[:40] + "\n\t" + variables[40:]  # qstat folds long values onto tab-indented lines
    text = (
        f"Job Id: 7.pbs\n    Job_Name = resnet\n    job_state = F\n    Exit_status = 0\n    Variable_List = {folded}\n"
    )
    assert parse_full_text(text)["Variable_List"] == {
        "PBS_O_HOME": "/home/me", "CLOUDDDP_RUNS_DIR": RUNS, "PBS_O_SHELL": "/bin/bash",
    }  # fmt: skip
    status = qstat(tmp_path, text, None).status("7.pbs")
    assert status.artifacts == f"{RUNS}/resnet-7.pbs/model"


@pytest.mark.process
def test_the_json_form_keeps_the_other_escapes_which_are_removed(tmp_path: Path) -> None:
    as_qstat_json_prints_it = encode_arst_bs(RUNS).replace("\\,", ",")
    record = {"Jobs": {"7.pbs": {"Job_Name": "resnet", "job_state": "F", "Exit_status": 0,
                                 "Variable_List": {"CLOUDDDP_RUNS_DIR": as_qstat_json_prints_it, "N": 3}}}}  # fmt: skip
    provider = qstat(tmp_path, "", record)
    assert provider.status("7.pbs").artifacts == f"{RUNS}/resnet-7.pbs/model"
    assert provider.describe("7.pbs")["Variable_List"]["N"] == "3"  # a number-like value, parsed by qstat


@pytest.mark.parametrize(
    ("printed", "expected"),
    [
        ("A=1,B=2", {"A": "1", "B": "2"}),
        ("A=x\\,y, B = 2 ,", {"A": "x,y", "B ": " 2"}),  # items stripped (parse_comma_string_bs), not around =
        ("A=c:\\temp\\\\d", {"A": "c:\\temp\\d"}),  # an unknown escape keeps its backslash
        ("A=a=b", {"A": "a=b"}),
        ("", {}),
    ],
)
def test_split_variable_list(printed: str, expected: dict[str, str]) -> None:
    assert split_variable_list(printed) == expected
