"""cloudddp: one job spec, one CLI and one notebook API for PyTorch DDP on any cluster.

Importing the package is cheap on purpose: the job side (`cloudddp.launcher`) runs in
training images with the standard library only, so client-side names load lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from cloudddp.errors import CloudDDPError
    from cloudddp.estimator import Estimator

__all__ = ["CloudDDPError", "Estimator", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Estimator":
        from cloudddp.estimator import Estimator

        return Estimator
    if name == "CloudDDPError":
        from cloudddp.errors import CloudDDPError

        return CloudDDPError
    raise AttributeError(f"module 'cloudddp' has no attribute {name!r}")
