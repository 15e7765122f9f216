"""Providers: where a job runs. One sub-package per provider declares it (see registry.py).

Importing this package imports no provider and no SDK.
"""

from __future__ import annotations

from typing import Any

from cloudddp.providers.base import JobHandle, JobRequest, JobStatus, Provider

__all__ = ["JobHandle", "JobRequest", "JobStatus", "Provider", "get_provider"]


def get_provider(name: str, **options: Any) -> Provider:
    """The provider `name` (built-in or from an entry point), its SDK imported now."""
    from cloudddp.providers import registry

    return registry.get(name).create(**options)
