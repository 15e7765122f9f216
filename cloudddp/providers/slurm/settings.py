"""The `slurm:` section of the job spec (validated; unknown keys are errors)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from cloudddp.providers.batch.base import BatchSettings, yaml_number_as_text
from cloudddp.providers.batch.shell import walltime

# sbatch --time as Slurm reads it (SchedMD/slurm src/common/parse_time.c, commit
# 284c3b95f08a2dc2478499837b03355e1b9c5c75): _is_valid_timespec lets through only digits, '-' and ':' (one '-' at
# most, before any ':'; two ':' at most, with a number on both sides of each); time_str2secs reads
# "days-[hours[:minutes[:seconds]]]" (sscanf "%d-%d:%d:%d", so "2-" is two days), else hours:minutes:seconds,
# else minutes[:seconds], no field bounded ("1:90" is 2.5 minutes); time_str2mins rounds up to a minute.
# "-1", "INFINITE" and "UNLIMITED" (any case: xstrcasecmp) mean no limit, as does 0 (src/common/slurm_opt.c
# arg_set_time_limit). Refused here though the timespec check passes them: "-N" other than "-1" (sscanf reads
# a negative day count), and more than 2**31 - 60 seconds (the sums and ROUNDUP are C int arithmetic).
SLURM_TIME = re.compile(r"(?:[0-9]+-)?[0-9]+(?::[0-9]+){0,2}|[0-9]+-")
SLURM_NO_LIMIT = ("-1", "infinite", "unlimited")
SLURM_MAX_SECONDS = 2**31 - 1 - 59
SLURM_TIME_ERROR = (
    "must be a Slurm time limit (sbatch --time) in whole numbers: MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, "
    "DAYS-HOURS, DAYS-HOURS:MINUTES or DAYS-HOURS:MINUTES:SECONDS (e.g. 90, 2:0, 36:00:00, 1-12, 2-00:00:00; "
    f"at most {SLURM_MAX_SECONDS} seconds), or INFINITE, UNLIMITED or -1 for no limit"
)

# sbatch --mem: a whole number of megabytes, or with K, M, G or T and an optional B, any case (SchedMD/slurm
# src/common/proc_args.c str_to_mbytes, commit 284c3b95f08a2dc2478499837b03355e1b9c5c75).
SLURM_SIZE = re.compile(r"^\d+([KMGT]B?)?$", re.IGNORECASE)


class SlurmSettings(BatchSettings):
    """Slurm batch jobs, submitted with `sbatch` from a login node (no SDK)."""

    partition: str | None = None
    qos: str | None = None
    time: str | None = Field(
        default=None, description="sbatch --time; default: the spec's max_runtime, else the partition's"
    )
    gpus_per_node: int = Field(default=0, ge=0)
    cpus_per_task: int | None = Field(default=None, ge=1)
    mem: str | None = Field(default=None, description="per node, e.g. 64G")
    container_image: str | None = Field(default=None, description="enroot/pyxis image (srun --container-image)")
    container_mounts: list[str] = Field(default_factory=list)
    signal_seconds: int = Field(default=120, ge=0, le=65535, description="USR1 this long before the end; 0: off")
    requeue: bool = False
    sbatch_args: list[str] = Field(default_factory=list)

    # YAML reads `time: 90` as a number: sbatch --time=90 is 90 minutes (parse_time.c time_str2secs, above).
    _slurm_time_number = field_validator("time", mode="before")(yaml_number_as_text)

    @field_validator("time")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        return check_slurm_time(value) if value is not None else None

    @field_validator("mem")
    @classmethod
    def _slurm_size(cls, value: str | None) -> str | None:
        if value is not None and not SLURM_SIZE.fullmatch(value):
            raise ValueError("must be a Slurm size: a whole number of megabytes, or with K, M, G or T (e.g. 64G)")
        return value


def slurm_time_seconds(value: str) -> int:
    """Seconds in a time SLURM_TIME matches, summed as time_str2secs does (before the round-up to a minute)."""
    numbers = [int(part) for part in re.split("[-:]", value) if part]
    if "-" in value:
        weights: tuple[int, ...] = (86400, 3600, 60, 1)  # days-hours:minutes:seconds
    else:
        weights = {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}[len(numbers)]
    return sum(number * weight for number, weight in zip(numbers, weights, strict=False))


def check_slurm_time(value: str) -> str:
    """`value` if sbatch --time takes it (see SLURM_TIME), passed on unchanged; ValueError if not."""
    if value.isascii() and value.lower() in SLURM_NO_LIMIT:
        return value
    if not SLURM_TIME.fullmatch(value) or slurm_time_seconds(value) > SLURM_MAX_SECONDS:
        raise ValueError(SLURM_TIME_ERROR)
    return value


def slurm_walltime(settings: SlurmSettings, max_runtime: int | None) -> str | None:
    """`--time`: the user's Slurm time, else the spec's max_runtime rounded up to a minute, else none (the
    partition's DefaultTime, else its MaxTime, applies)."""
    if settings.time:
        return settings.time
    return walltime(-(-max_runtime // 60) * 60) if max_runtime is not None else None
