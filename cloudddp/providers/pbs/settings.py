"""The `pbs:` section of the job spec (validated; unknown keys are errors)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from cloudddp.providers.slurm.shell import WALLTIME
from cloudddp.spec import Section


class PBSSettings(Section):
    """PBS Professional / OpenPBS / Torque batch jobs, submitted with `qsub` from a login node."""

    queue: str | None = None
    account: str | None = None
    walltime: str | None = Field(default=None, description="HH:MM:SS; default: the spec's max_runtime")
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
    conda_env: str | None = None
    venv: str | None = None
    setup: list[str] = Field(default_factory=list, description="shell lines run on every node first (module load ...)")
    launcher: str = Field(default="cloudddp-launch", description="how the nodes start cloudddp's launcher")
    launcher_args: list[str] = Field(default_factory=list)
    host_map: dict[str, str] = Field(default_factory=dict, description="node names that don't resolve -> addresses")
    runs_dir: str = Field(default="cloudddp-runs", description="logs and model folders (on the shared filesystem)")
    qsub_args: list[str] = Field(default_factory=list)

    @field_validator("walltime")
    @classmethod
    def _walltime(cls, value: str | None) -> str | None:
        if value is not None and not WALLTIME.match(value):
            raise ValueError("must be HH:MM:SS (hours may exceed 24, e.g. 36:00:00)")
        return value
