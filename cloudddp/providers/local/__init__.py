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


PROVIDER = ProviderInfo(
    name="local",
    title="Local",
    summary="N emulated nodes on this machine, DDP over 127.0.0.1, under a platform's environment contract",
    settings=LocalSettings,
    options=(
        Option("--emulate", "emulate", help="sagemaker, oci, kubeflow, slurm or none"),
        Option("--runs-dir", "runs_dir", help="where local runs live"),
    ),
    interrupt_stops_job=True,  # the nodes are this machine's processes: Ctrl-C stops them
    factory="cloudddp.providers.local.provider:create",
)

__all__ = ["PROVIDER", "LocalSettings"]
