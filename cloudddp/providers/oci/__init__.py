"""OCI Data Science multi-node jobs (`--provider oci`), and reading Oracle ADS specs.

The `oci` SDK is imported only when a provider is created (`create`), never when this
package is: `cloudddp.spec` imports `cloudddp.providers.oci.ads` to read ADS YAML, and
that must work without the `oci` extra installed.
"""

from __future__ import annotations

from typing import Any

from cloudddp.errors import CloudDDPError


def create(**options: Any) -> Any:
    """The OCI provider; a clear error if the `oci` SDK is missing."""
    try:
        from cloudddp.providers.oci.provider import OCIProvider
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "oci":
            raise CloudDDPError(
                "the oci provider needs the Python package 'oci': pip install 'cloudddp[oci]'."
            ) from None
        raise
    return OCIProvider(**options)


__all__ = ["create"]
