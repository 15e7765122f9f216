"""PBS Pro / OpenPBS / Torque batch jobs from a login node: qsub, qstat, qdel (see provider.py).

Declares the provider only; nothing here imports the provider's modules (the registry reads this first).
"""

from collections.abc import Callable

from cloudddp.providers.pbs.settings import PBSSettings
from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.secrets_policy import ARGS, HYPERPARAMETERS, InClear


def by_name(provider: str) -> Callable[[str], str]:
    """The advice for a secret in the batch script: {provider} passes secret variables by name, never in it."""
    return lambda variable: (
        f"Pass it in a variable instead (--env {variable}=VALUE, or `environment:` in the spec: {provider} hands "
        f"secret-named variables, and variables whose value holds a password in a URL, to the job through the "
        f"scheduler's environment, never in the script) and read it there in the training script."
    )


PROVIDER = ProviderInfo(
    name="pbs",
    summary="PBS Pro / OpenPBS / Torque batch jobs submitted with qsub from a login node",
    settings=PBSSettings,
    options=(
        Option("--queue", "queue", help="PBS queue (qsub -q)"),
        Option("--pbs-account", "account", help="account charged (qsub -A)"),
        Option(
            "--walltime",
            "walltime",
            help="seconds or [[HH:]MM:]SS, e.g. 3600 (default: --max-runtime, else the queue's)",
        ),
        Option("--ncpus", "ncpus", type=int, help="CPUs per node"),
        Option("--ngpus", "ngpus", type=int, help="GPUs per node"),
        Option("--pbs-mem", "mem", help="memory per node, e.g. 32gb"),
        Option("--starter", "starter", help="pbsdsh (default) or mpiexec"),
    ),
    interrupt_stops_job=False,
    factory="cloudddp.providers.pbs.provider:create",
    # The environment is not: secret variables travel by name in qsub -v (script.py).
    in_clear=InClear(
        fields=("pbs.setup", "pbs.launcher_args", "pbs.qsub_args", ARGS, HYPERPARAMETERS),
        where="written into the pbs batch script",
        by_reference=by_name("pbs"),
    ),
)
