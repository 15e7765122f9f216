"""Keeping secrets out of everything cloudddp prints or writes.

Two kinds of secret are recognised: the value of a variable whose name looks secret
(`DB_PASSWORD`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`...), and the user-info part of any
URL-like value (`postgres://user:pass@host/db` -> `postgres://user:***@host/db`;
`https://ghp_token@github.com` -> `https://***@github.com`), wherever it appears in a
string: dry runs, generated files, log lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SECRET_NAME = re.compile(r"(SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|SESSION_?KEY)", re.I)
REDACTED = "***"
# scheme://userinfo@host: userinfo runs to the last '@' before the path (passwords may hold '@' unencoded).
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s@]*(?:@[^/?#\s@]*)*)@")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def _hide_userinfo(match: re.Match[str]) -> str:
    if match.group("scheme").lower() == "oci://":
        return match.group(0)  # oci://bucket@namespace/prefix: a bucket name, not credentials (OCI's URI format)
    user, has_password, _ = match.group("userinfo").partition(":")
    # With a password the user name stays (it helps debugging); alone, it may itself be a token.
    shown = f"{user}:{REDACTED}" if has_password else REDACTED
    return f"{match.group('scheme')}{shown}@"


def redact_text(text: str) -> str:
    """`text` with the user-info part of every URL in it replaced."""
    return URL_USERINFO.sub(_hide_userinfo, text) if "@" in text else text


def has_url_credentials(text: str) -> bool:
    return redact_text(text) != text


def redact(value: Any) -> Any:
    """A copy of `value` with secrets replaced, at any depth.

    Values of secret-looking keys become `***`, in plain mappings and in AWS-style
    `[{"Name": ..., "Value": ...}]` pairs; every other string loses its URL user-info.
    """
    if isinstance(value, dict):
        if set(value) >= {"Name", "Value"} and is_secret_name(str(value["Name"])):
            return {**value, "Value": REDACTED}
        return {k: (REDACTED if is_secret_name(str(k)) and isinstance(v, str) else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value


def secret_variables(environment: Mapping[str, str]) -> list[str]:
    """Names of the variables that look like they carry a secret (by name, or a password in a URL)."""
    return sorted(k for k, v in environment.items() if is_secret_name(k) or has_url_credentials(str(v)))


def secret_environment_warning(environment: Mapping[str, str], platform: str, secret_store: str) -> str | None:
    """A warning for cloud jobs: their environment is readable by anyone who may describe the job."""
    names = secret_variables(environment)
    if not names:
        return None
    return (
        f"{', '.join(names)} look{'s' if len(names) == 1 else ''} like {'a secret' if len(names) == 1 else 'secrets'} "
        f"in the job's environment: on {platform} anyone who can describe the job can read "
        f"{'it' if len(names) == 1 else 'them'} (cloudddp shows *** only in its own output). Keep secrets in "
        f"{secret_store}; read them in the training script instead (see the README, 'Secrets')."
    )
