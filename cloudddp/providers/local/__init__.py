"""The local multi-node emulation: the embedded default provider."""

from cloudddp.providers.local.provider import LocalProvider, create

__all__ = ["LocalProvider", "create"]
