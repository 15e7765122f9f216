"""Slurm batch jobs from a login node: sbatch, scontrol/sacct, the output file, scancel (see provider.py).

Declares the provider only; nothing here imports the provider's modules (the registry reads this first).
"""

from cloudddp.providers.batch.base import script_in_clear
from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.providers.slurm.settings import SlurmSettings

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
    factory="cloudddp.providers.slurm.provider:SlurmProvider",
    in_clear=script_in_clear("slurm", "sbatch_args"),
)
