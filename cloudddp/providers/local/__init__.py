"""`--provider local`: the multi-node emulation on this machine (the default provider).

This file only declares the provider (see cloudddp.providers.registry); the work is in
provider.py, imported when the provider is created.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.spec import Section


class LocalSettings(Section):
    """The local multi-node emulation (no cloud, no Docker)."""

    emulate: Literal["sagemaker", "oci", "kubeflow", "slurm", "none"] = "sagemaker"
    runs_dir: str = "cloudddp-runs"
    master_port: int | None = Field(default=None, ge=1024, le=65535)
    link_inputs: bool = True
    # Elastic jobs: seconds the rendezvous waits for more nodes once min_nodes have met (torchrun's
    # default is 30). The emulated nodes all start at once, so a short wait only delays recovery less.
    elastic_last_call: float = Field(default=2.0, gt=0)
    # SageMaker emulation: after this many seconds every host is stopped (SIGTERM) and started again
    # from the checkpoints, as managed spot training does when capacity is reclaimed (interruption.py).
    interrupt_after: float | None = Field(default=None, gt=0)


PROVIDER = ProviderInfo(
    name="local",
    title="Local",
    summary="N emulated nodes on this machine, DDP over 127.0.0.1, under a platform's environment contract",
    settings=LocalSettings,
    options=(
        Option("--emulate", "emulate", help="sagemaker, oci, kubeflow, slurm or none"),
        Option("--runs-dir", "runs_dir", help="where local runs live"),
        Option(
            "--interrupt-after",
            "interrupt_after",
            type=float,
            help="SageMaker emulation: interrupt the job after SECONDS and restart it from its checkpoints, "
            "as managed spot training does",
        ),
    ),
    interrupt_stops_job=True,  # the nodes are this machine's processes: Ctrl-C stops them
    supports_elastic=True,  # --emulate kubeflow, slurm or none (providers/local/elastic.py)
    factory="cloudddp.providers.local.provider:LocalProvider",
    runs_on_this_machine=True,
)

__all__ = ["PROVIDER", "LocalSettings"]
