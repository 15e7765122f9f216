"""How long any AWS call cloudddp makes may take, on the client side and on the job side alike.

Standard library only (the job side imports it): the values go into a botocore `Config` by the caller.
At most about attempts x (connect + read) seconds per call, so an unreachable endpoint ends in seconds.
"""

from __future__ import annotations

import math
import os
from typing import Any

from cloudddp.errors import CloudDDPError

CONNECT_TIMEOUT = "CLOUDDDP_AWS_CONNECT_TIMEOUT"  # seconds to open a connection
READ_TIMEOUT = "CLOUDDDP_AWS_READ_TIMEOUT"  # seconds to wait for an answer
MAX_ATTEMPTS = "CLOUDDDP_AWS_MAX_ATTEMPTS"  # attempts in all
DEFAULTS: dict[str, float] = {CONNECT_TIMEOUT: 10.0, READ_TIMEOUT: 60.0, MAX_ATTEMPTS: 3}
# A socket timeout past about 9.2e9 s overflows (OverflowError from settimeout); a day is past any useful bound.
MAX_TIMEOUT = 86400.0


def limit(name: str) -> float:
    """The variable's value, or its default; anything else than a usable bound is the user's error, named with its
    value (never a traceback from botocore or int() later): attempts a whole number >= 1, timeouts finite seconds."""
    raw = os.environ.get(name)
    if raw is None:
        return DEFAULTS[name]
    try:
        value = float(raw)
    except ValueError:
        value = math.nan  # "abc": refused below, like nan and inf
    if name == MAX_ATTEMPTS:
        if not (math.isfinite(value) and value >= 1 and value.is_integer()):
            raise CloudDDPError(
                f"{name}={raw!r} must be a whole number of attempts, at least 1 (default {DEFAULTS[name]:g})."
            )
    elif not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise CloudDDPError(
            f"{name}={raw!r} must be a positive number of seconds, at most {MAX_TIMEOUT:g} (default {DEFAULTS[name]:g})."
        )
    return value


def attempts() -> int:
    return int(limit(MAX_ATTEMPTS))


def botocore_config_arguments() -> dict[str, Any]:
    """`botocore.config.Config(**these)`: bounded connect/read timeouts and attempts."""
    return {"connect_timeout": limit(CONNECT_TIMEOUT), "read_timeout": limit(READ_TIMEOUT),
            "retries": {"max_attempts": attempts(), "mode": "standard"}}  # fmt: skip


def time_bound() -> str:
    """The bound in words, for an error that says how long cloudddp waited and what to set."""
    return (
        f"{attempts()} attempts, {limit(CONNECT_TIMEOUT):g} s to connect and {limit(READ_TIMEOUT):g} s to answer "
        f"each ({CONNECT_TIMEOUT}, {READ_TIMEOUT}, {MAX_ATTEMPTS})"
    )
