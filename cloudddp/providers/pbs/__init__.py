"""PBS Pro / OpenPBS / Torque batch jobs from a login node: qsub, qstat, qdel (see provider.py).

Declares the provider only; nothing here imports the provider's modules (the registry reads this first).
"""

from cloudddp.providers.batch.base import script_in_clear
from cloudddp.providers.pbs.settings import PBSSettings
from cloudddp.providers.registry import Option, ProviderInfo

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
    factory="cloudddp.providers.pbs.provider:PBSProvider",
    in_clear=script_in_clear("pbs", "qsub_args"),
)
