"""`slurm.time` / `--time` and `pbs.walltime` / `--walltime`: the time limits each scheduler takes, and only those,
passed to `#SBATCH --time` / `#PBS -l walltime=` unchanged; without one, the spec's max_runtime.

Slurm's tables follow SchedMD/slurm src/common/parse_time.c, commit 284c3b95f08a2dc2478499837b03355e1b9c5c75:
_is_valid_timespec (which characters, how many '-' and ':', a number on both sides of each ':'), time_str2secs
(the forms and the "-1" / INFINITE / UNLIMITED words) and time_str2mins (seconds rounded up to a minute); 0 is
"no limit" in src/common/slurm_opt.c arg_set_time_limit. PBS's follow openpbs/openpbs src/lib/Libattr/attr_fn_time.c
decode_time, commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a: qsub checks -l walltime with it (verify_datatype_time,
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
from cloudddp.providers.slurm.provider import SlurmProvider
from cloudddp.providers.slurm.settings import SlurmSettings

# Values sbatch --time takes (parse_time.c time_str2secs, commit 284c3b95f08a2dc2478499837b03355e1b9c5c75).
SLURM_ACCEPTED = [
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
SLURM_REFUSED = [
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

# Values qsub -l walltime= takes (attr_fn_time.c decode_time, commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a).
PBS_ACCEPTED = [
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
PBS_REFUSED = [
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

# provider: (its provider, its section, the time field, the values it takes, the values it refuses)
LIMITS = {
    "slurm": (SlurmProvider, SlurmSettings, "time", SLURM_ACCEPTED, SLURM_REFUSED),
    "pbs": (PBSProvider, PBSSettings, "walltime", PBS_ACCEPTED, PBS_REFUSED),
}


def kept(provider: str, value: object) -> object:
    """The time limit as the section keeps it, None if it refuses it."""
    _, settings, field, _, _ = LIMITS[provider]
    try:
        return getattr(settings.model_validate({field: value}), field)
    except ValidationError:
        return None


@pytest.mark.parametrize("provider", LIMITS)
def test_every_time_limit_the_scheduler_takes_is_accepted_unchanged(provider: str) -> None:
    accepted = LIMITS[provider][3]
    assert {value: kept(provider, value) for value in accepted} == {value: value for value in accepted}


@pytest.mark.parametrize("provider", LIMITS)
def test_every_time_limit_the_scheduler_refuses_or_misreads_is_refused(provider: str) -> None:
    assert [value for value in LIMITS[provider][4] if kept(provider, value) is not None] == []


@pytest.mark.parametrize(
    ("provider", "value", "lead", "forms"),
    [
        ("slurm", "1:2:3:4", "slurm.time: Value error, must be a Slurm time limit (sbatch --time)",
         ("MINUTES", "MINUTES:SECONDS", "HOURS:MINUTES:SECONDS", "DAYS-HOURS", "DAYS-HOURS:MINUTES:SECONDS", "UNLIMITED")),
        ("pbs", "1-12:00:00", "pbs.walltime: Value error, must be a PBS walltime (qsub -l walltime)",
         ("SECONDS", "MINUTES:SECONDS", "HOURS:MINUTES:SECONDS", "fraction")),
    ],
)  # fmt: skip
def test_a_refused_time_limit_names_the_field_its_value_and_the_forms(
    provider: str, value: str, lead: str, forms: tuple[str, ...]
) -> None:
    provider_class, _, field, _, _ = LIMITS[provider]
    data = {"entry_point": "train_ddp.py", "source_dir": str(SOURCES), provider: {field: value}}
    with pytest.raises(CloudDDPError) as caught:
        provider_class().render(build_spec(data))
    message = str(caught.value)
    assert lead in message
    assert f"(got {value!r})" in message and "\n" not in message
    assert all(form in message for form in forms)


@pytest.mark.parametrize(
    ("provider", "flag", "value", "line"),
    [("slurm", "--time", "2:0", "#SBATCH --time=2:0"), ("pbs", "--walltime", "3600", "#PBS -l walltime=3600")],
)
def test_the_cli_passes_the_time_limit_to_the_directive_unchanged(
    tmp_path: Path, provider: str, flag: str, value: str, line: str
) -> None:
    result = cli("launch", "-p", provider, flag, value, "--dry-run", str(SOURCES / "train_ddp.py"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"\n{line}\n" in result.stdout and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("provider", "flag", "message"),
    [("slurm", "--time=-5", "slurm.time: Value error, must be a Slurm time"),
     ("pbs", "--walltime=-5", "pbs.walltime: Value error, must be a PBS walltime")],
)  # fmt: skip
def test_a_refused_time_limit_from_the_cli_exits_2_in_one_paragraph(
    tmp_path: Path, provider: str, flag: str, message: str
) -> None:
    result = cli("launch", "-p", provider, flag, "--dry-run", str(SOURCES / "train_ddp.py"), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stdout == ""
    assert message in result.stderr and "(got '-5')" in result.stderr


# YAML reads `time: 90` as an integer: sbatch --time=90 is 90 minutes (parse_time.c time_str2secs), and qsub reads a
# plain number as seconds (decode_time). A negative number: -1 is Slurm's "no limit", PBS takes none.
@pytest.mark.parametrize(
    ("provider", "number", "line", "negative", "negative_kept"),
    [("slurm", 90, "#SBATCH --time=90", -1, "-1"), ("pbs", 3600, "#PBS -l walltime=3600", -5, None)],
)
def test_a_yaml_number_is_the_schedulers_plain_number(
    tmp_path: Path, provider: str, number: int, line: str, negative: int, negative_kept: str | None
) -> None:
    field = LIMITS[provider][2]
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(
        f"name: t\nentry_point: train_ddp.py\nsource_dir: {SOURCES}\n{provider}: {{{field}: {number}}}\n"
    )
    result = cli("launch", "-p", provider, "-f", str(spec_file), "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"\n{line}\n" in result.stdout
    assert kept(provider, negative) == negative_kept and kept(provider, True) is None


@pytest.mark.parametrize(
    ("provider", "max_runtime", "line"),
    [("slurm", 3601, "#SBATCH --time=01:01:00"), ("pbs", 90061, "#PBS -l walltime=25:01:01")],
)  # Slurm's rounded up to a minute
def test_without_a_limit_the_specs_max_runtime_is_used(
    tmp_path: Path, provider: str, max_runtime: int, line: str
) -> None:
    data = {"entry_point": "train_ddp.py", "source_dir": str(SOURCES), "max_runtime": max_runtime,
            provider: {"runs_dir": str(tmp_path / "runs")}}  # fmt: skip
    assert f"\n{line}\n" in LIMITS[provider][0]().render(build_spec(data)).request.script
