"""`slurm.time` / `--time`: the time limits sbatch takes, and only those, passed to `#SBATCH --time` unchanged.

The tables follow SchedMD/slurm src/common/parse_time.c, commit 284c3b95f08a2dc2478499837b03355e1b9c5c75:
_is_valid_timespec (which characters, how many '-' and ':', a number on both sides of each ':'), time_str2secs
(the forms and the "-1" / INFINITE / UNLIMITED words) and time_str2mins (seconds rounded up to a minute); 0 is
"no limit" in src/common/slurm_opt.c arg_set_time_limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SOURCES, cli
from pydantic import ValidationError

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.slurm.provider import SlurmProvider
from cloudddp.providers.slurm.settings import SlurmSettings

# Values sbatch --time takes (parse_time.c time_str2secs, commit 284c3b95f08a2dc2478499837b03355e1b9c5c75).
ACCEPTED = [
    "90",  # minutes
    "2:0",  # minutes:seconds (sscanf "%d:%d:%d" reads 2 numbers), no two-digit rule
    "0:30",  # 30 seconds: time_str2mins rounds up to 1 minute
    "1:90",  # no field is bounded: 1 minute 90 seconds, rounded up to 3 minutes
    "36:00:00",  # hours:minutes:seconds, hours unbounded
    "100:0:0",
    "1-12",  # days-hours
    "1-12:30",  # days-hours:minutes
    "2-00:00:00",  # days-hours:minutes:seconds
    "2-",  # "%d-%d:%d:%d" stops after the days: two days
    "007",
    "0",  # 0 minutes: no limit (slurm_opt.c arg_set_time_limit)
    "INFINITE",  # xstrcasecmp: any case
    "unlimited",
    "Infinite",
    "-1",  # no limit too
    "24855-3:13:8",  # 2147483588 seconds: the most that time_str2mins rounds up inside a C int
]

# Values sbatch refuses (time_str2secs returns NO_VAL), or that it reads wrongly (marked), refused by cloudddp.
REFUSED = [
    "",  # time_str2secs: empty is NO_VAL
    "2h",  # _is_valid_timespec: only '0'-'9', '-' and ':'
    "1d",
    "1.5",
    "+90",
    " 90",
    "90 ",
    "1:00:00\n",
    "\u0669\u0660",  # Arabic-Indic digits: not '0'-'9'
    "infinity",
    "INF",
    "-",  # no digit
    ":",
    "1:2:3:4",  # more than two ':'
    "1-2-3",  # more than one '-'
    "1:2-3",  # a '-' after a ':'
    "1:",  # one ':' needs two numbers
    ":30",
    "1::2",  # two ':' need three numbers
    "1:2:",
    "1-2:",  # with a '-': one ':' needs three numbers, two need four
    "1-:30",
    "1-2:3:",
    "-1:00",
    "-5",  # marked: sscanf reads a negative day count
    "-0",
    "-01",
    "35791394",  # marked: 2147483640 seconds, past a C int once rounded up (wraps negative)
    "99999999999",
]


def test_every_time_form_sbatch_takes_is_accepted_unchanged() -> None:
    kept = {value: SlurmSettings(time=value).time for value in ACCEPTED}
    assert kept == {value: value for value in ACCEPTED}


def refused(value: str) -> bool:
    try:
        SlurmSettings(time=value)
    except ValidationError:
        return True
    return False


def test_every_time_sbatch_refuses_or_misreads_is_refused() -> None:
    assert [value for value in REFUSED if not refused(value)] == []


def test_a_refused_time_names_the_field_its_value_and_the_forms() -> None:
    data = {"entry_point": "train_ddp.py", "source_dir": str(SOURCES), "slurm": {"time": "1:2:3:4"}}
    with pytest.raises(CloudDDPError) as caught:
        SlurmProvider().render(build_spec(data))
    message = str(caught.value)
    assert "slurm.time: Value error, must be a Slurm time limit (sbatch --time)" in message
    assert "(got '1:2:3:4')" in message and "\n" not in message
    forms = ("MINUTES", "MINUTES:SECONDS", "HOURS:MINUTES:SECONDS", "DAYS-HOURS", "DAYS-HOURS:MINUTES:SECONDS")
    assert all(form in message for form in forms) and "UNLIMITED" in message


def test_the_cli_passes_minutes_and_seconds_to_the_directive(tmp_path: Path) -> None:
    result = cli("launch", "-p", "slurm", "--time", "2:0", "--dry-run", str(SOURCES / "train_ddp.py"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\n#SBATCH --time=2:0\n" in result.stdout and not list(tmp_path.iterdir())


def test_a_yaml_number_is_minutes(tmp_path: Path) -> None:
    # YAML reads `time: 90` as an integer; sbatch --time=90 is 90 minutes (parse_time.c time_str2secs).
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(f"name: t\nentry_point: train_ddp.py\nsource_dir: {SOURCES}\nslurm: {{time: 90}}\n")
    result = cli("launch", "-p", "slurm", "-f", str(spec_file), "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\n#SBATCH --time=90\n" in result.stdout
    assert SlurmSettings.model_validate({"time": -1}).time == "-1" and refused(True)  # type: ignore[arg-type]
