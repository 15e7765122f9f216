"""No secret in the script's arguments where the platform writes them where others read them (a manifest, a
container's command): a secret-named hyperparameter, a password in a URL, or a long option named for a secret
and given a value (cloudddp.redact decides each). The value is never shown."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.redact import argument_with_url_password, secret_named_hyperparameter, secret_option_in


def refuse_secret_arguments(
    args: Sequence[str], hyperparameters: Mapping[str, Any], placed: str, advice: Callable[[str], str]
) -> None:
    """Refuse the first secret among the script's arguments. `placed` says where they go ("written into the job's
    manifest"); `advice(VARIABLE)` how to pass the secret instead, for the variable that would carry it (`VAR` for
    a URL's password, which names none)."""
    secret = secret_named_hyperparameter(hyperparameters)
    if secret:
        raise CloudDDPError(
            f"hyperparameters.{secret} looks like a secret, and hyperparameters are {placed} as the script's "
            f"arguments, readable by anyone who can read the job. {advice(secret.upper())}"
        )
    found = argument_with_url_password(args, hyperparameters)
    if found:
        field_name, value = found
        raise CloudDDPError(
            f"{field_name}={value!r} holds a password in a URL, and the script's arguments are {placed}, readable by "
            f"anyone who can read the job. {advice('VAR')}"
        )
    option = secret_option_in(args)
    if option:
        index, name = option
        raise CloudDDPError(
            f"args[{index}] gives --{name}, which names a secret, a value, and the script's arguments are {placed}, "
            f"readable by anyone who can read the job. {advice(name.replace('-', '_').upper())}"
        )
