"""Providers: where a job runs. Each one's SDK is imported only inside its own module."""

from __future__ import annotations

import importlib
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.providers.base import JobHandle, JobRequest, JobStatus, Provider

MODULES = {
    "local": "cloudddp.providers.local",
    "sagemaker": "cloudddp.providers.sagemaker",
    "oci": "cloudddp.providers.oci",
}

__all__ = ["MODULES", "JobHandle", "JobRequest", "JobStatus", "Provider", "get_provider"]


def get_provider(name: str, **options: Any) -> Provider:
    if name not in MODULES:
        raise CloudDDPError(f"unknown provider {name!r}; choose one of: {', '.join(MODULES)}.")
    try:
        module = importlib.import_module(MODULES[name])
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("cloudddp"):
            raise CloudDDPError(
                f"the {name} provider needs the Python package {exc.name!r}: pip install 'cloudddp[{name}]'."
            ) from None
        raise
    return module.create(**options)
