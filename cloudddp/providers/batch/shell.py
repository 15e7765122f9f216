"""Pieces of batch scripts shared by the Slurm and PBS renderers (both run bash on a login node's
shared filesystem): quoting, walltime, directive values, the environment block, the run folders and the
cloudddp-launch command line.

Secrets never go into a script file: variables whose names look secret are passed by name
through the scheduler's environment export (`sbatch --export`, `qsub -v NAME`) instead.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from cloudddp.cluster.environment import channel_variable
from cloudddp.errors import CloudDDPError
from cloudddp.redact import has_url_credentials, is_secret_variable, redact_text

if TYPE_CHECKING:  # the spec module builds JobSpec from the registry, which imports this package
    from cloudddp.job_spec import JobSpec

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A directive is one line: a newline would end it and start a command, and sbatch stops reading
# directives at the first command (SchedMD/slurm src/sbatch/opt.c _opt_batch_script,
# commit 284c3b95f08a2dc2478499837b03355e1b9c5c75). Other control characters have no place there either.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def walltime(seconds: int) -> str:
    """Seconds as HH:MM:SS, hours unbounded (`90000` -> `25:00:00`): both sbatch --time and qsub -l walltime
    read it (the time formats each accepts: slurm/settings.py SLURM_TIME, pbs/settings.py PBS_WALLTIME)."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def check_directive_value(field: str, value: str) -> str:
    """`value` if it can stand in a `#SBATCH` / `#PBS` line; a newline or control character cannot."""
    if CONTROL_CHARACTERS.search(value):
        raise CloudDDPError(
            f"{field}={redact_text(value)!r}: a newline or control character cannot go into a batch script's "
            f"directive (the line would end there and the rest would run as a command, and the scheduler would "
            f"ignore every directive after it); remove it."
        )
    return value


def quote(words: list[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


def split_environment(spec: JobSpec) -> tuple[dict[str, str], list[str]]:
    """(variables written into the script, names of secret ones passed through the scheduler's export)."""
    plain: dict[str, str] = {}
    secret: list[str] = []
    for name, value in spec.environment.items():
        if not ENV_NAME.fullmatch(name):
            raise CloudDDPError(f"environment variable name {name!r} is not a valid shell variable name.")
        if is_secret_variable(name, value):  # by its name, or a password in a URL
            secret.append(name)
        else:
            plain[name] = value
    return plain, secret


def refuse_url_credentials(script: str, provider: str) -> None:
    """No password in a URL may reach the script: anyone who can read the job's script file reads it.

    Variables carrying one travel by name (split_environment); the script's arguments, hyperparameters and the
    setup lines and options are checked before rendering (the provider's in_clear, cloudddp/secrets_policy.py);
    any other field (conda_env, venv, container_image...) is caught in the rendered script itself.
    """
    leaked = [line for line in script.splitlines() if has_url_credentials(line)]
    if leaked:
        raise CloudDDPError(
            f"the {provider} batch script would hold a password in a URL ({redact_text(leaked[0].strip())!r}), "
            f"readable by anyone who can read the job. Pass secrets in variables (--env NAME=VALUE: they travel "
            f"through the scheduler's environment, never in the script) and read them there."
        )


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
        variables[channel_variable(channel)] = str(path)
    return variables


def shared_folder(where: str, field_name: str, provider: str) -> Path:
    """A folder the job writes (output, checkpoint) on the cluster's shared filesystem. A URI is refused: as a
    path it became a folder named `s3:` (and a password in it went into the script)."""
    if "://" in where:
        raise CloudDDPError(
            f"{field_name}={where!r}: the {provider} provider writes to folders on the cluster's shared filesystem; "
            f"give a path there (and copy the results to object storage from it afterwards)."
        )
    return Path(where).expanduser().resolve()


def runs_dir_of(spec: JobSpec, runs_dir: str, provider: str) -> Path:
    """Where the job's run folders go: the spec's output, else the provider's runs_dir setting."""
    if spec.output:
        return shared_folder(spec.output, "output", provider)
    return shared_folder(runs_dir, f"{provider}.runs_dir", provider)


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
    """`cloudddp-launch [options] SCRIPT ARGS...` as a list of words.

    A script whose name starts with '-' follows `--`, or the launcher would take it for an option.
    """
    words = shlex.split(launcher)
    if host_map:
        words += ["--host-map", ",".join(f"{name}={addr}" for name, addr in host_map.items())]
    if spec.nproc_per_node is not None:
        words.append(f"--nproc-per-node={spec.nproc_per_node}")
    words += extra
    if spec.module:
        words += ["-m", spec.entry_point]
    else:
        words += ["--", spec.entry_point] if spec.entry_point.startswith("-") else [spec.entry_point]
    return [*words, *spec.script_args()]
