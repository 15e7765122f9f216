"""`--provider oci`: OCI Data Science multi-node jobs, and reading Oracle ADS specs.

This file only declares the provider (see cloudddp.providers.registry). The `oci` SDK is
imported by provider.py when the provider is created, never when this package is:
`cloudddp.spec` imports `cloudddp.providers.oci.ads` to read ADS YAML, and that must work
without the `oci` extra installed.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.secrets_policy import ARGS, ENVIRONMENT, HYPERPARAMETERS, InClear
from cloudddp.spec import Section

# A Vault secret's OCID (validation.OCID with the type `vaultsecret`): it names the secret, and only a principal the
# Vault's policy allows can read it.
VAULT_SECRET_ID = re.compile(r"ocid1\.vaultsecret\.[a-z0-9]+\.[a-z0-9-]*(?:\.[a-z0-9-]+)?\.[a-z0-9]{1,255}")


def is_vault_secret_id(_name: str, value: str) -> bool:
    return VAULT_SECRET_ID.fullmatch(value) is not None


# What the job's definition holds in clear (GetJob shows it), and the way a secret goes instead.
IN_CLEAR = InClear(
    fields=(ENVIRONMENT, HYPERPARAMETERS, ARGS),
    where="stored in clear in the job's definition (its environment, and its container command, CMD, which holds "
    "the script's arguments)",
    by_reference=lambda variable: (
        f"Keep the secret in an OCI Vault secret, pass the secret's OCID in a variable (-e {variable.removesuffix('_SECRET_ID')}_SECRET_ID="
        f"ocid1.vaultsecret...) and read it in the script with the job run's resource principal "
        f"(docs/guides/secrets.md)."
    ),
    is_reference=is_vault_secret_id,
)


class OCISettings(Section):
    """OCI Data Science multi-node jobs (submitted with the oci SDK)."""

    region: str | None = None
    config_file: str = "~/.oci/config"
    profile: str = "DEFAULT"
    auth: Literal["api_key", "security_token", "resource_principal", "instance_principal"] = "api_key"
    compartment_id: str | None = None
    project_id: str | None = None
    shape: str = "VM.Standard.E4.Flex"
    ocpus: float | None = Field(default=None, gt=0)
    memory_in_gbs: float | None = Field(default=None, gt=0)
    block_storage_gb: int = 100
    image: str | None = None
    subnet_id: str | None = None
    log_group_id: str | None = None
    log_id: str | None = None
    work_dir: str | None = None  # oci://bucket@namespace/prefix for staged inputs and outputs


PROVIDER = ProviderInfo(
    name="oci",
    title="OCI",
    summary="OCI Data Science multi-node jobs (oci SDK), data staged to Object Storage",
    settings=OCISettings,
    options=(
        Option("--region", "region", help="OCI region"),
        Option("--compartment", "compartment_id", help="compartment OCID"),
        Option("--project", "project_id", help="Data Science project OCID"),
        Option("--shape", "shape"),
        Option("--ocpus", "ocpus", type=float),
        Option("--memory-gb", "memory_in_gbs", type=float),
        Option("--block-storage-gb", "block_storage_gb", type=int),
        Option("--subnet-id", "subnet_id"),
        Option("--log-group", "log_group_id", help="log group OCID"),
        Option("--log", "log_id", help="log OCID"),
        Option("--work-dir", "work_dir", help="oci://bucket@namespace/prefix"),
        Option("--profile", "profile", help="~/.oci/config profile"),
        Option("--config-file", "config_file", help="OCI config file"),
        Option("--auth", "auth", help="api_key, security_token, resource_principal or instance_principal"),
        Option("--image", "image", help="container image URI"),
    ),
    interrupt_stops_job=False,  # Ctrl-C asks before cancelling a cloud job
    factory="cloudddp.providers.oci.provider:OCIProvider",
    compose="cloudddp.providers.oci.compose:compose_yaml",
    in_clear=IN_CLEAR,
)

__all__ = ["PROVIDER", "OCISettings"]
