"""One secrets policy for every provider and every door (docs/guides/secrets.md).

A secret is a value under a secret-looking name (a variable, a hyperparameter, a script option or a shell variable
given a literal: `--hf-token abc`, `export HF_TOKEN=abc`) or a password in a URL; cloudddp.redact tells them. What
happens to one depends on where the job's request puts it:

- in a field the provider's request carries in clear, which the service stores or shows to anyone who may read the
  job (SageMaker's HyperParameters, OCI's environment and container command, a Kubernetes manifest, a batch script,
  a compose file): refused before anything is rendered or uploaded, in one paragraph that names the field and the
  variable, hyperparameter or option, never the value, with the provider's advice to pass it by reference;
- anywhere else, where only cloudddp shows it (a dry run, `render`, `request.yaml`, JSON output, log lines, the job
  index): masked, by `cloudddp.redact` (`job_secrets`, `redact`, `redact_log_line`).

A provider declares what its request carries in clear with `InClear` (`ProviderInfo.in_clear`); `check_secrets`
applies it, once, in `cloudddp.session.render`: the step that `cloudddp launch` / `render` (flags or a YAML spec),
`cloudddp.Estimator` and the SageMaker SDK v2 drop-in all take.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.redact import (
    argument_with_url_password,
    has_url_credentials,
    is_secret_name,
    redact_text,
    secret_named_hyperparameter,
    secret_set_in,
)

ENVIRONMENT = "environment"
HYPERPARAMETERS = "hyperparameters"
ARGS = "args"
SPEC_FIELDS = (ENVIRONMENT, HYPERPARAMETERS, ARGS)
READABLE = "readable by anyone who can read the job"


def no_advice(variable: str) -> str:
    return "Pass it by reference (the platform's secret store) and read it in the training script."


@dataclass(frozen=True)
class InClear:
    """What a provider's request carries in clear, and how a secret reaches the job instead.

    `fields`: the spec's `environment`, `hyperparameters` and `args` that the request holds as given, and settings
    of the provider's own section (`"slurm.setup"`) that hold shell lines or words written into it as given (a
    variable or a long option named for a secret and given a literal value is refused there). Checked in this order.
    `where`: how the request holds them ("written into the job's manifest"), for the message.
    `by_reference(VARIABLE)`: the advice, for the variable that would carry the secret instead (`VAR` for a URL's
    password, which names none).
    `is_reference(name, value)`: a variable whose value is a reference to a secret, not a secret (an OCI Vault
    secret's OCID under `DB_PASSWORD_SECRET_ID`).
    Nothing in clear (the default): every secret is only masked where cloudddp shows it.
    """

    fields: tuple[str, ...] = ()
    where: str = "sent with the job in clear"
    by_reference: Callable[[str], str] = no_advice
    is_reference: Callable[[str, str], bool] | None = None


NOTHING_IN_CLEAR = InClear()


def check_secrets(spec: Any, declared: InClear) -> None:
    """Refuse the first secret in a field the request carries in clear (`declared`); the value is never shown."""
    for field in declared.fields:
        if field == ENVIRONMENT:
            check_environment(spec.environment, declared)
        elif field == HYPERPARAMETERS:
            check_hyperparameters(spec.hyperparameters, declared)
        elif field == ARGS:
            check_words(ARGS, list(spec.args), declared, "the script's arguments are")
        else:
            section, _, name = field.partition(".")
            check_words(field, list(getattr(getattr(spec, section), name)), declared, f"{field} is")


def check_environment(environment: Mapping[str, str], declared: InClear) -> None:
    for name, value in environment.items():
        if declared.is_reference is not None and declared.is_reference(name, value):
            continue
        if is_secret_name(name):
            refuse(f"{ENVIRONMENT}.{name} looks like a secret, and the job's environment is", declared, name)
        if has_url_credentials(value):
            refuse(
                f"{ENVIRONMENT}.{name}={redact_text(value)!r} holds a password in a URL, and the job's environment is",
                declared,
                name,
            )


def check_hyperparameters(hyperparameters: Mapping[str, Any], declared: InClear) -> None:
    secret = secret_named_hyperparameter(hyperparameters)
    if secret:
        refuse(f"{HYPERPARAMETERS}.{secret} looks like a secret, and hyperparameters are", declared, secret.upper())
    found = argument_with_url_password((), hyperparameters)
    if found:
        refuse(f"{found[0]}={found[1]!r} holds a password in a URL, and hyperparameters are", declared, "VAR")


def check_words(field: str, words: Sequence[str], declared: InClear, subject: str) -> None:
    """Shell lines, an option list or the script's arguments: no literal given to a secret name or option, and no
    password in a URL."""
    found = secret_set_in(words)
    if found:
        index, name = found
        refuse(f"{field}[{index}] sets {name}, which looks like a secret, to a value, and {subject}", declared,
               name.replace("-", "_").upper())  # fmt: skip
    url = next((i for i, word in enumerate(words) if has_url_credentials(word)), None)
    if url is not None:
        refuse(f"{field}[{url}]={redact_text(words[url])!r} holds a password in a URL, and {subject}", declared, "VAR")


def refuse(what: str, declared: InClear, variable: str) -> None:
    raise CloudDDPError(f"{what} {declared.where}, {READABLE}. {declared.by_reference(variable)}")
