"""Pieces of batch scripts shared by the Slurm and PBS renderers (both run bash on a login node's
shared filesystem): quoting, walltime, the environment block and the cloudddp-launch command line.

Secrets never go into a script file: variables whose names look secret are passed by name
through the scheduler's environment export (`sbatch --export`, `qsub -v NAME`) instead.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from cloudddp.errors import CloudDDPError
from cloudddp.providers.base import JobRequest
from cloudddp.redact import is_secret_name

if TYPE_CHECKING:  # the spec module builds JobSpec from the registry, which imports this package
    from cloudddp.spec import JobSpec

# HH:MM:SS with any number of hours (Slurm and PBS both accept it; PBS also takes plain seconds).
WALLTIME = re.compile(r"^(\d+):([0-5]\d):([0-5]\d)$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ScriptJobRequest(JobRequest):
    """A batch job's request: its dry run prints the script itself, ready for `sbatch` or `qsub`.

    The script holds no secret values (those travel by name through the scheduler's export).
    """

    def to_yaml(self) -> str:
        return str(self.request.script)


def walltime(seconds: int) -> str:
    """Seconds as HH:MM:SS, hours unbounded (`90000` -> `25:00:00`)."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def check_walltime(value: str, field: str) -> str:
    if not WALLTIME.match(value):
        raise CloudDDPError(
            f"{field}={value!r} is not a walltime: write HH:MM:SS (hours may exceed 24, e.g. 36:00:00)."
        )
    return value


def quote(words: list[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


def split_environment(spec: JobSpec) -> tuple[dict[str, str], list[str]]:
    """(variables written into the script, names of secret ones passed through the scheduler's export)."""
    plain: dict[str, str] = {}
    secret: list[str] = []
    for name, value in spec.environment.items():
        if not ENV_NAME.match(name):
            raise CloudDDPError(f"environment variable name {name!r} is not a valid shell variable name.")
        if is_secret_name(name):
            secret.append(name)
        else:
            plain[name] = value
    return plain, secret


def data_variables(spec: JobSpec, provider: str) -> dict[str, str]:
    """CLOUDDDP_CHANNEL_<NAME> for each input: folders on the cluster's shared filesystem."""
    variables = {}
    for channel, where in sorted(spec.inputs.items()):
        if "://" in where:
            raise CloudDDPError(
                f"inputs.{channel}={where!r}: the {provider} provider reads folders on the cluster's shared "
                f"filesystem; copy the data there first and pass its path."
            )
        path = Path(where).expanduser().resolve()
        if not path.exists():
            raise CloudDDPError(f"inputs.{channel}={where!r} does not exist (looked for {path}).")
        variables[f"CLOUDDDP_CHANNEL_{channel.upper().replace('-', '_').replace('.', '_')}"] = str(path)
    return variables


def export_lines(variables: dict[str, str]) -> list[str]:
    return [f"export {name}={shlex.quote(value)}" for name, value in variables.items()]


def activation_lines(conda_env: str | None, venv: str | None, setup: list[str]) -> list[str]:
    """The user's environment on the compute nodes: setup commands, then conda or a venv.

    Run with `set +u`: module and conda activation scripts read variables that may be unset.
    """
    if conda_env and venv:
        raise CloudDDPError(f"conda_env={conda_env!r} and venv={venv!r}: choose one environment to activate.")
    lines = list(setup)
    if conda_env:
        # `conda activate` needs conda's shell hook in a non-interactive batch shell.
        lines += ['eval "$(conda shell.bash hook)"', f"conda activate {shlex.quote(conda_env)}"]
    if venv:
        lines.append(f"source {shlex.quote(str(Path(venv).expanduser()) + '/bin/activate')}")
    return ["set +u", *lines, "set -u"] if lines else []


def launcher_words(spec: JobSpec, launcher: str, host_map: dict[str, str], extra: list[str]) -> list[str]:
    """`cloudddp-launch [options] SCRIPT ARGS...` as a list of words."""
    words = shlex.split(launcher)
    if host_map:
        words += ["--host-map", ",".join(f"{name}={addr}" for name, addr in host_map.items())]
    if spec.nproc_per_node is not None:
        words.append(f"--nproc-per-node={spec.nproc_per_node}")
    words += extra
    words += ["-m", spec.entry_point] if spec.module else [spec.entry_point]
    return [*words, *spec.script_args()]
