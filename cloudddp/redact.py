"""Keeping secrets out of everything cloudddp prints or writes."""

from __future__ import annotations

import re
from typing import Any

SECRET_NAME = re.compile(r"(SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|SESSION_?KEY)", re.I)
REDACTED = "***"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact(value: Any) -> Any:
    """A copy of `value` with the values of secret-looking keys replaced, at any depth.

    Handles plain mappings and AWS-style `[{"Name": ..., "Value": ...}]` pairs.
    """
    if isinstance(value, dict):
        if set(value) >= {"Name", "Value"} and is_secret_name(str(value["Name"])):
            return {**value, "Value": REDACTED}
        return {k: (REDACTED if is_secret_name(str(k)) and isinstance(v, str) else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
