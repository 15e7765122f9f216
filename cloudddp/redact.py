"""Keeping secrets out of everything cloudddp prints or writes.

Two kinds of secret are recognised: the value of a variable whose name looks secret
(`DB_PASSWORD`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`...), and the user-info part of any
URL-like value (`postgres://user:pass@host/db` -> `postgres://user:***@host/db`;
`https://ghp_token@github.com` -> `https://***@github.com`), wherever it appears in a
string: dry runs, generated files, log lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

# TOKEN but not TOKENIZER/TOKENS: HuggingFace's TOKENIZERS_PARALLELISM=false and MAX_NEW_TOKENS=256 are settings (a
# job that set them was refused on OCI and Kubernetes, and every "false" in its logs was hidden). PRIVATE only as
# PRIVATE_KEY: AWS Batch's AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS is an address.
SECRET_NAME = re.compile(
    r"(SECRET|PASSWORD|PASSWD|PASSPHRASE|TOKEN(?!IZ|IS|S)|CREDENTIAL|PRIVATE_?KEY|API_?KEY|ACCESS_?KEY|SESSION_?KEY)",
    re.I,
)
# A command-line option names its secret last (`--hf-token`, `--wandb-api-key`); one that only mentions it names
# something else: a flag (`--password-stdin`), a file (`--token-file`, `--secret-file`), a setting (`--pad-token-id`).
SECRET_OPTION_NAME = re.compile(SECRET_NAME.pattern + "$", re.I)
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


# NAME=value, NAME: value, "NAME": "value" in a log line, for environment-style (upper-case) secret names:
# what a script prints when it dumps its environment or config. Lower-case words are left alone ("tokens: 1024").
SECRET_ASSIGNMENT = re.compile(r"""(?P<name>\b[A-Z][A-Z0-9_]*)(?P<sep>["']?\s*[=:]\s*["']?)(?P<value>[^\s"',;}]+)""")
SHORTEST_MASKED_VALUE = 4  # shorter values ("1", "on") would mask ordinary text everywhere


def redact_log_line(line: str, secret_values: Sequence[str] = ()) -> str:
    """A job's log line as cloudddp prints it: URL user-info, values assigned to secret-looking names, and the
    given secret values (the job's own secret-named variables, where known) replaced."""
    line = SECRET_ASSIGNMENT.sub(
        lambda m: f"{m['name']}{m['sep']}{REDACTED}" if is_secret_name(m["name"]) else m[0], redact_text(line)
    )
    return mask_values(line, secret_values)


def secret_values(*named: Mapping[str, Any]) -> list[str]:
    """The text values under secret-looking names (a job's environment, its hyperparameters), to be masked
    wherever they appear: logs, and a dry run's values built from them (SM_HPS, SM_USER_ARGS, argv)."""
    return [value for values in named for name, value in values.items()
            if is_secret_name(str(name)) and isinstance(value, str) and value]  # fmt: skip


def mask_values(text: str, secret_values: Sequence[str]) -> str:
    spellings = {spelling for value in secret_values for spelling in json_spellings(value)}
    for value in sorted(spellings, key=len, reverse=True):  # longest first: one may contain another
        if len(value) >= SHORTEST_MASKED_VALUE:
            text = text.replace(value, REDACTED)
    return text


def json_spellings(value: str) -> set[str]:
    """`value` as written and as it reads inside a JSON string: SM_HPS and SM_TRAINING_ENV carry hyperparameters
    through the training toolkit's `json.dumps(..., ensure_ascii=True)` (aws/sagemaker-training-toolkit 3383937
    src/sagemaker_training/mapping.py to_env_vars), which escapes quotes, backslashes and non-ASCII characters;
    a script's own json.dumps may keep non-ASCII as it is."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}


def has_url_credentials(text: str) -> bool:
    return redact_text(text) != text


def is_a_setting(value: Any) -> bool:
    """A number, a boolean or nothing, as a value or as text: no credential, whatever its name says
    (`pad_token_id=0`, `use_auth_token=True`, `token_dropout=0.1`)."""
    if value is None or isinstance(value, (bool, int, float)):
        return True
    text = str(value).strip().lower()
    if text in ("", "true", "false", "none", "null", "yes", "no", "on", "off"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def secret_named_hyperparameter(hyperparameters: Mapping[str, Any]) -> str | None:
    """The first hyperparameter whose name looks secret (`api_key`, `hf_token`) and whose value could be one."""
    return next(
        (str(name) for name, value in hyperparameters.items() if is_secret_name(str(name)) and not is_a_setting(value)),
        None,
    )


# --name=value, or --name value within one line (`python prep.py --hf-token abc`), a quote allowed before the option.
LONG_OPTION = re.compile(
    r"""(?:^|[\s;&|(])["']?--(?P<name>[A-Za-z][A-Za-z0-9_-]*)(?P<sep>=|\s+)(?P<value>[^\s;&|)]+)"""
)
LONE_OPTION = re.compile(r"""["']?--(?P<name>[A-Za-z][A-Za-z0-9_-]*)["']?""")


def _literal_secret(value: str, after_equals: bool) -> bool:
    """Whether an option's value is a literal that could be a credential: not a reference (`"$HF_TOKEN"`,
    `$(cat f)`), not a setting, and, unless written after `=`, not the next option."""
    text = value.strip().strip("\"'")
    if not text or text[0] in "$`" or is_a_setting(text):
        return False
    return after_equals or not value.startswith("-")


def named_for_a_secret(option: str) -> bool:
    return bool(SECRET_OPTION_NAME.search(option.replace("-", "_")))


def secret_option_in(words: Sequence[str]) -> tuple[int, str] | None:
    """(index, option name) of the first long option named for a secret (SECRET_OPTION_NAME) and given a literal
    value: in one entry (`--api-key=abc`, `... --hf-token abc`), or as two entries (`[--hf-token, abc]`), as
    a command line's words are."""
    for i, word in enumerate(words):
        for match in LONG_OPTION.finditer(word):
            if named_for_a_secret(match["name"]) and _literal_secret(match["value"], "=" in match["sep"]):
                return i, match["name"]
        lone = LONE_OPTION.fullmatch(word.strip())
        following = words[i + 1] if i + 1 < len(words) else ""
        if lone and named_for_a_secret(lone["name"]) and _literal_secret(following, after_equals=False):
            return i, lone["name"]
    return None


# NAME=value in a shell line or an option (`export WANDB_API_KEY=abc`, `--export=ALL,HF_TOKEN=abc`): the value is a
# literal unless it starts with $ or ` (`export HF_TOKEN="$HF_TOKEN"` or `$(cat ~/.token)` hold no secret themselves).
ASSIGNMENT = re.compile(r"""(?:^|[\s;&|(,=])(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>["']?[^\s"'$`;&|)][^\s;&|)]*)""")


def secret_set_in(entries: Sequence[str]) -> tuple[int, str] | None:
    """(index, name) of the first entry giving a secret-named variable (NAME=value) or a long option named for a
    secret (`secret_option_in`) a literal value: shell lines, an option list, a script's arguments."""
    assignments = ((i, m["name"]) for i, entry in enumerate(entries) for m in ASSIGNMENT.finditer(entry))
    assignment = next(((i, name) for i, name in assignments if is_secret_name(name)), None)
    option = secret_option_in(entries)
    found = [hit for hit in (assignment, option) if hit]
    return min(found) if found else None


def secret_arguments(args: Sequence[str]) -> list[str]:
    """The literal values given to secret-named options in a script's arguments (`--api-key=abc`,
    `--hf-token abc`), as `secret_option_in` finds them."""
    values: list[str] = []
    start = 0
    while (found := secret_option_in(args[start:])) is not None:
        i = start + found[0]
        inline = [m["value"] for m in LONG_OPTION.finditer(args[i]) if named_for_a_secret(m["name"])]
        values += inline or args[i + 1 : i + 2]  # `--api-key=abc` in one word, else the word after `--api-key`
        start = i + 1
    return [value.strip("\"'") for value in values]


def job_secrets(environment: Mapping[str, Any], hyperparameters: Mapping[str, Any], args: Sequence[str]) -> list[str]:
    """Every secret value a job's spec gives: its secret-named variables and hyperparameters, and the values of
    its script's secret-named options. The one list that its dry run, request.yaml and logs all hide."""
    return [*secret_values(environment, hyperparameters), *secret_arguments(args)]


def argument_with_url_password(args: Sequence[str], hyperparameters: Mapping[str, Any]) -> tuple[str, str] | None:
    """(field, value shown redacted) of the first script argument or hyperparameter holding a URL password."""
    arguments = [(f"args[{i}]", arg) for i, arg in enumerate(args)]
    arguments += [(f"hyperparameters.{key}", str(value)) for key, value in hyperparameters.items()]
    return next(((field, redact_text(value)) for field, value in arguments if has_url_credentials(value)), None)


def redact(value: Any, secrets: Sequence[str] = ()) -> Any:
    """A copy of `value` with secrets replaced, at any depth.

    Values of secret-looking keys become `***`, in plain mappings and in `[{"Name": ..., "Value": ...}]`
    pairs (AWS's spelling, or Kubernetes' and ADS's `name`/`value`); every other string loses its URL user-info
    and any of `secrets` (the values under those keys, which also reach strings built from them: SM_HPS's JSON,
    SM_USER_ARGS, a command line).
    """
    if isinstance(value, dict):
        for name, content in (("Name", "Value"), ("name", "value")):
            if set(value) >= {name, content} and is_secret_name(str(value[name])):
                return {**value, content: REDACTED}
        return {k: (REDACTED if is_secret_name(str(k)) and isinstance(v, str) else redact(v, secrets))
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v, secrets) for v in value)
    if isinstance(value, str):
        return mask_values(redact_text(value), secrets)
    return value


# NAME=value, NAME:value or NAME value in one string: a variable as a shell, docker-compose or a mistyped
# `--env HF_TOKEN:abc` writes it.
NAMED_VALUE = re.compile(r"(?P<name>\s*[^\s=:]+)(?P<sep>\s*[=:]\s*|\s+)(?P<value>.+)", re.S)


def redact_named_value(text: str) -> str:
    """`text` with its value hidden where it reads as a value given to a secret-looking name (`HF_TOKEN=abc`,
    `api_key:abc`); a value under any other name is shown, less its URL user-info."""
    match = NAMED_VALUE.fullmatch(text)
    if match and is_secret_name(match["name"]):
        return f"{match['name']}{match['sep']}{REDACTED}"
    return redact_text(text)


def redact_entries(value: Any) -> Any:
    """`value` as an error may show it where a mapping of names to values was expected and something else came
    (`environment: [HF_TOKEN=abc]`, `[[HF_TOKEN, abc]]`, `[{name: HF_TOKEN, value: abc}]`): each entry's value
    hidden under a secret-looking name, whatever way the entry names it, and everything else as `redact` shows it."""
    if isinstance(value, str):
        return redact_named_value(value)
    if is_secret_pair(value):
        return type(value)((value[0], REDACTED))
    if isinstance(value, (list, tuple)):
        return type(value)(redact_entries(entry) for entry in value)
    return redact(value)


def is_secret_pair(value: Any) -> bool:
    """Whether `value` is a `[NAME, value]` pair under a secret-looking name (a bare name first, not `NAME=value`)."""
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not isinstance(value[0], str):
        return False
    return NAMED_VALUE.fullmatch(value[0]) is None and is_secret_name(value[0])


def is_secret_variable(name: str, value: Any) -> bool:
    """Whether a variable looks like it carries a secret: by its name, or a password in a URL in its value."""
    return is_secret_name(name) or has_url_credentials(str(value))


def secret_variables(environment: Mapping[str, str]) -> list[str]:
    """Names of the variables that look like they carry a secret (by name, or a password in a URL)."""
    return sorted(k for k, v in environment.items() if is_secret_variable(k, v))


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
