"""The `pbs:` section of the job spec (validated; unknown keys are errors)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from cloudddp.providers.batch.base import BatchSettings, yaml_number_as_text

# PBS's size values (mem): digits, then k/m/g/t/p and an optional b or w, or b or w alone; any case
# (openpbs/openpbs src/lib/Libattr/attr_fn_size.c to_size, commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a).
PBS_SIZE = re.compile(r"^[0-9]+([kmgtp][bw]?|[bw])?$", re.IGNORECASE)
# qsub -l walltime= as OpenPBS reads it: qsub checks the value with decode_time (walltime's verify function
# verify_datatype_time in src/lib/Libattr/master_resc_def_all.xml and src/lib/Libecl/ecl_verify_datatypes.c), the
# server decodes it with the same function (openpbs/openpbs src/lib/Libattr/attr_fn_time.c decode_time, commit
# cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a): ASCII digits and at most two ':', each right after a digit, read as
# [[HOURS:]MINUTES:]SECONDS with no field bounded ("90:00" is 90 minutes, "3600" an hour); a trailing ':' adds
# an empty field, read as 0 (strtol of ""). Then optionally '.' right after a digit and digits only: a fraction
# of a second (its first three digits: 500 or more adds a second). No sign, space or other character; at most
# PBS_MAX_TIME (LONG_MAX - 1) seconds. An empty value unsets the limit there: refused here, it is no walltime.
PBS_WALLTIME = re.compile(r"[0-9]+(?::[0-9]+){0,2}(?:\.[0-9]*)?|[0-9]+(?::[0-9]+)?:")
PBS_MAX_TIME = 2**63 - 2
PBS_WALLTIME_ERROR = (
    "must be a PBS walltime (qsub -l walltime): SECONDS, MINUTES:SECONDS or HOURS:MINUTES:SECONDS in whole "
    "numbers, the seconds optionally with a fraction (e.g. 3600, 90:00, 36:00:00, 1:30.5), hours unbounded"
)


def pbs_walltime_seconds(value: str) -> int:
    """Whole seconds in a walltime PBS_WALLTIME matches, before decode_time rounds the fraction."""
    seconds = 0
    for field in value.partition(".")[0].split(":"):
        seconds = seconds * 60 + int(field or "0")
    return seconds


def check_pbs_walltime(value: str) -> str:
    """`value` if qsub -l walltime takes it (see PBS_WALLTIME), passed on unchanged; ValueError if not."""
    if not PBS_WALLTIME.fullmatch(value) or pbs_walltime_seconds(value) > PBS_MAX_TIME:
        raise ValueError(PBS_WALLTIME_ERROR)
    return value


# `-l place=[arrangement][:sharing][:grouping]`, each at most once, in any order (openpbs doc/man1/qalter.1B).
PLACE_KINDS = {"arrangement": {"free", "pack", "scatter", "vscatter"}, "sharing": {"excl", "shared", "exclhost"}}


def check_place(value: str) -> str:
    seen: set[str] = set()
    for element in value.split(":"):
        kind = next((k for k, words in PLACE_KINDS.items() if element in words), None)
        if kind is None and re.fullmatch(r"group=[A-Za-z][\w-]*", element):
            kind = "grouping"
        if kind is None or kind in seen:
            raise ValueError(
                f"{value!r} is not a PBS placement: [free|pack|scatter|vscatter][:excl|shared|exclhost]"
                f"[:group=RESOURCE], each at most once"
            )
        seen.add(kind)
    return value


class PBSSettings(BatchSettings):
    """PBS Professional / OpenPBS / Torque batch jobs, submitted with `qsub` from a login node."""

    # The shared fields that PBS words for its nodes (node.sh runs them on each).
    setup: list[str] = Field(default_factory=list, description="shell lines run on every node first (module load ...)")
    launcher: str = Field(default="cloudddp-launch", description="how the nodes start cloudddp's launcher")
    queue: str | None = None
    walltime: str | None = Field(
        default=None, description="seconds or [[HH:]MM:]SS; default: the spec's max_runtime, else the queue's"
    )
    ncpus: int = Field(default=1, ge=1, description="CPUs per node (select chunk)")
    ngpus: int = Field(default=0, ge=0, description="GPUs per node (select chunk)")
    mem: str | None = Field(default=None, description="memory per node, e.g. 32gb")
    resources: Literal["select", "nodes"] = Field(
        default="select",
        description="select (PBS Pro/OpenPBS: -l select=N:ncpus=..) or nodes (Torque: -l nodes=N:ppn=..)",
    )
    place: str | None = Field(default="scatter", description="PBS Pro placement: one chunk per host")
    starter: Literal["pbsdsh", "mpiexec"] = Field(
        default="pbsdsh", description="how one launcher per node starts: pbsdsh -h HOST, or mpiexec -n N -ppn 1"
    )
    qsub_args: list[str] = Field(default_factory=list)

    # YAML reads `walltime: 3600` as a number: PBS takes it as seconds, as the README says (OpenPBS decode_time).
    _walltime_number = field_validator("walltime", mode="before")(yaml_number_as_text)

    @field_validator("walltime")
    @classmethod
    def _walltime(cls, value: str | None) -> str | None:
        return check_pbs_walltime(value) if value is not None else None

    @field_validator("place")
    @classmethod
    def _place(cls, value: str | None) -> str | None:
        return check_place(value) if value is not None else None

    @field_validator("mem")
    @classmethod
    def _mem(cls, value: str | None) -> str | None:
        if value is not None and not PBS_SIZE.fullmatch(value):
            raise ValueError("must be a PBS size: a whole number with kb, mb, gb, tb or pb (e.g. 32gb, 500mb)")
        return value

    @model_validator(mode="after")
    def _mem_needs_select(self) -> PBSSettings:
        # Torque's nodes=N:ppn=.. spec has no per-node memory; dropping it silently would over-subscribe nodes.
        if self.mem is not None and self.resources == "nodes":
            raise ValueError(
                f"mem={self.mem!r} is a per-node amount of a select chunk; with resources: nodes (Torque) give "
                f"the limit Torque's way in qsub_args, e.g. ['-l pmem=4gb']"
            )
        return self
