"""The `slurm:` section of the job spec (validated; unknown keys are errors)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from cloudddp.providers.slurm.shell import walltime
from cloudddp.spec import Section

# Slurm's own time formats (sbatch --time): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
SLURM_TIME = re.compile(r"^(\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+|\d+-\d+:\d{2}|\d+-\d+:\d{2}:\d{2})$")

# sbatch --mem: a whole number of megabytes, or with K, M, G or T and an optional B, any case (SchedMD/slurm
# src/common/proc_args.c str_to_mbytes, commit 284c3b95f08a2dc2478499837b03355e1b9c5c75).
SLURM_SIZE = re.compile(r"^\d+([KMGT]B?)?$", re.IGNORECASE)


class SlurmSettings(Section):
    """Slurm batch jobs, submitted with `sbatch` from a login node (no SDK)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = Field(default=None, description="sbatch --time; default: the spec's max_runtime")
    gpus_per_node: int = Field(default=0, ge=0)
    cpus_per_task: int | None = Field(default=None, ge=1)
    mem: str | None = Field(default=None, description="per node, e.g. 64G")
    container_image: str | None = Field(default=None, description="enroot/pyxis image (srun --container-image)")
    container_mounts: list[str] = Field(default_factory=list)
    conda_env: str | None = None
    venv: str | None = None
    setup: list[str] = Field(default_factory=list, description="shell lines run before the job step (module load ...)")
    launcher: str = Field(default="cloudddp-launch", description="how the compute nodes start cloudddp's launcher")
    launcher_args: list[str] = Field(default_factory=list)
    host_map: dict[str, str] = Field(default_factory=dict, description="node names that don't resolve -> addresses")
    signal_seconds: int = Field(default=120, ge=0, le=65535, description="USR1 this long before the end; 0: off")
    requeue: bool = False
    runs_dir: str = Field(default="cloudddp-runs", description="logs and model folders (on the shared filesystem)")
    sbatch_args: list[str] = Field(default_factory=list)

    @field_validator("time")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None and not SLURM_TIME.fullmatch(value):
            raise ValueError("must be a Slurm time: MINUTES, HH:MM:SS, D-HH:MM:SS, ...")
        return value

    @field_validator("mem")
    @classmethod
    def _slurm_size(cls, value: str | None) -> str | None:
        if value is not None and not SLURM_SIZE.fullmatch(value):
            raise ValueError("must be a Slurm size: a whole number of megabytes, or with K, M, G or T (e.g. 64G)")
        return value


def slurm_walltime(settings: SlurmSettings, max_runtime: int) -> str:
    """`--time`: the user's Slurm time, else the spec's max_runtime rounded up to a minute."""
    if settings.time:
        return settings.time
    return walltime(-(-max_runtime // 60) * 60)
