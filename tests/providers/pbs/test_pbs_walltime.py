"""`pbs.walltime` / `--walltime`: the walltimes qsub takes, and only those, passed to `#PBS -l walltime=` unchanged.

The tables follow openpbs/openpbs src/lib/Libattr/attr_fn_time.c decode_time, commit
cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a: qsub checks -l walltime with it (verify_datatype_time,
src/lib/Libecl/ecl_verify_datatypes.c) and the server decodes the value with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SOURCES, cli
from pydantic import ValidationError

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.pbs.provider import PBSProvider
from cloudddp.providers.pbs.settings import PBSSettings

# Values qsub -l walltime= takes (attr_fn_time.c decode_time, commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a).
ACCEPTED = [
    "3600",  # seconds
    "0",
    "0007",
    "90:00",  # minutes:seconds
    "1:30",
    "36:00:00",  # hours:minutes:seconds, hours unbounded
    "100:99:99",  # no field is bounded
    "1:30.5",  # a fraction of a second: .5 and up adds a second
    "3600.25",
    "1.4999",  # only the first three digits count
    "5.",  # '.' right after a digit, then no digit: a zero fraction
    "1:",  # a trailing ':' adds a field strtol reads as 0: 60 seconds
    "1:2:",
    "9223372036854775806",  # PBS_MAX_TIME, LONG_MAX - 1
]

# Values decode_time refuses (PBSE_BADATVAL), or that unset the limit (marked), refused by cloudddp.
REFUSED = [
    "",  # marked: decode_time unsets the limit
    "2h",  # only digits, ':' and '.'
    "1d",
    "-5",
    "+5",
    " 3600",
    "3600 ",
    "01:00:00\n",
    "INFINITE",
    "\u0661:\u0660\u0660:\u0660\u0660",  # Arabic-Indic digits: isdigit is '0'-'9'
    "1:00:00:00",  # more than two ':'
    "1-12:00:00",  # Slurm's days form
    ":30",  # a ':' first
    "1::30",  # a ':' not right after a digit
    ".5",  # a '.' first
    "1:.5",  # a '.' not right after a digit
    "1.5.5",  # after the '.', digits only
    "1.5:00",
    "1:30.5s",
    "9223372036854775807",  # over PBS_MAX_TIME
    "99999999999999999999:00:00",  # strtol: ERANGE
]


def test_every_walltime_qsub_takes_is_accepted_unchanged() -> None:
    kept = {value: PBSSettings(walltime=value).walltime for value in ACCEPTED}
    assert kept == {value: value for value in ACCEPTED}


def refused(value: str) -> bool:
    try:
        PBSSettings(walltime=value)
    except ValidationError:
        return True
    return False


def test_every_walltime_qsub_refuses_is_refused() -> None:
    assert [value for value in REFUSED if not refused(value)] == []


def test_a_refused_walltime_names_the_field_its_value_and_the_forms() -> None:
    data = {"entry_point": "train_ddp.py", "source_dir": str(SOURCES), "pbs": {"walltime": "1-12:00:00"}}
    with pytest.raises(CloudDDPError) as caught:
        PBSProvider().render(build_spec(data))
    message = str(caught.value)
    assert "pbs.walltime: Value error, must be a PBS walltime (qsub -l walltime)" in message
    assert "(got '1-12:00:00')" in message and "\n" not in message
    assert all(form in message for form in ("SECONDS", "MINUTES:SECONDS", "HOURS:MINUTES:SECONDS", "fraction"))


def test_the_cli_passes_plain_seconds_to_the_directive(tmp_path: Path) -> None:
    result = cli("launch", "-p", "pbs", "--walltime", "3600", "--dry-run", str(SOURCES / "train_ddp.py"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\n#PBS -l walltime=3600\n" in result.stdout and not list(tmp_path.iterdir())


def test_a_refused_walltime_from_the_cli_exits_2_in_one_paragraph(tmp_path: Path) -> None:
    result = cli("launch", "-p", "pbs", "--walltime=-5", "--dry-run", str(SOURCES / "train_ddp.py"), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stdout == ""
    assert "pbs.walltime: Value error, must be a PBS walltime" in result.stderr and "(got '-5')" in result.stderr


def test_a_yaml_number_is_seconds(tmp_path: Path) -> None:
    # YAML reads `walltime: 3600` as an integer; qsub reads a plain number as seconds (decode_time).
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(f"name: t\nentry_point: train_ddp.py\nsource_dir: {SOURCES}\npbs: {{walltime: 3600}}\n")
    result = cli("launch", "-p", "pbs", "-f", str(spec_file), "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\n#PBS -l walltime=3600\n" in result.stdout
    assert refused(-5) and refused(True)  # type: ignore[arg-type]
