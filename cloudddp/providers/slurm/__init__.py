"""Slurm batch jobs from a login node: sbatch, scontrol/sacct, the output file, scancel (see provider.py).

Declares the provider only; nothing here imports the provider's modules (the registry reads this first).
"""

from collections.abc import Callable

from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.providers.slurm.settings import SlurmSettings
from cloudddp.secrets_policy import ARGS, HYPERPARAMETERS, InClear


def by_name(provider: str) -> Callable[[str], str]:
    """The advice for a secret in the batch script: {provider} passes secret variables by name, never in it."""
    return lambda variable: (
        f"Pass it in a variable instead (--env {variable}=VALUE, or `environment:` in the spec: {provider} hands "
        f"secret-named variables, and variables whose value holds a password in a URL, to the job through the "
        f"scheduler's environment, never in the script) and read it there in the training script."
    )


PROVIDER = ProviderInfo(
    name="slurm",
    summary="Slurm batch jobs submitted with sbatch from a login node",
    settings=SlurmSettings,
    options=(
        Option("--partition", "partition", help="Slurm partition (sbatch --partition)"),
        Option("--account", "account", help="account charged (sbatch --account)"),
        Option("--qos", "qos", help="quality of service (sbatch --qos)"),
        Option("--time", "time", help="time limit, e.g. 02:00:00 (default: --max-runtime, else the partition's)"),
        Option("--gpus-per-node", "gpus_per_node", type=int, help="GPUs per node (sbatch --gpus-per-node)"),
        Option("--cpus-per-task", "cpus_per_task", type=int, help="CPUs for each node's launcher"),
        Option("--mem", "mem", help="memory per node, e.g. 64G"),
        Option("--container-image", "container_image", help="enroot/pyxis image (srun --container-image)"),
        Option("--conda-env", "conda_env", help="conda environment activated on the nodes"),
        Option("--venv", "venv", help="virtual environment activated on the nodes"),
        Option("--requeue", "requeue", type=bool, help="requeue the job when it is preempted"),
    ),
    interrupt_stops_job=False,
    supports_elastic=True,  # --nodes MIN:MAX: a node range, survivors carry on (script.py)
    factory="cloudddp.providers.slurm.provider:create",
    # The environment is not: secret variables travel by name through sbatch's exported environment (script.py).
    in_clear=InClear(
        fields=("slurm.setup", "slurm.launcher_args", "slurm.sbatch_args", ARGS, HYPERPARAMETERS),
        where="written into the slurm batch script",
        by_reference=by_name("slurm"),
    ),
)
