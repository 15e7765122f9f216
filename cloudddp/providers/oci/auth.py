"""Credentials for the oci SDK clients: a config-file profile, resource or instance principal.

- api_key (default): a profile of `~/.oci/config` (or `oci.config_file`, or the
  `OCI_CONFIG_FILE` environment variable when the spec keeps the default path); the key
  file and its passphrase stay on this machine and are never printed.
- security_token: a profile written by `oci session authenticate` (`security_token_file`,
  `key_file`, `region`, no `user`), signed with `oci.auth.signers.SecurityTokenSigner` as
  ADS does (ads/common/auth.py `SecurityToken`, oracle/accelerated-data-science @0e785b9f).
  Chosen with OCI_CLI_AUTH=security_token, or by an api_key profile that has a
  `security_token_file` (its key is a session key, never an uploaded API key). The token
  is a secret: never printed.
- resource_principal: inside OCI (a notebook session, a job run, a function); needs
  OCI_RESOURCE_PRINCIPAL_VERSION, which the service sets.
- instance_principal: on an OCI compute instance in a dynamic group.

The region comes from the spec (or OCI_CLI_REGION, provider.effective_settings), else the
profile or principal, else OCI_REGION; a region that is not one is reported naming that
source. The config file is read as the SDK reads it (ConfigParser in the locale's encoding);
one that is not text in it is reported by line number. Errors name the file, profile and
field; they never contain key material.
"""

from __future__ import annotations

import codecs
import configparser
import datetime as dt
import locale
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oci

from cloudddp.errors import CloudDDPError
from cloudddp.providers.oci import OCISettings
from cloudddp.providers.oci.validation import check_region

DEFAULT_CONFIG_FILE = "~/.oci/config"


@dataclass
class Credentials:
    """What every client constructor takes: `config` (may be {} for principals) and `signer`."""

    config: dict[str, Any]
    signer: Any
    region: str | None
    kind: str
    # Shown to people: where the credentials came from, never what they are.
    origin: str = ""
    # Where `region` came from, as errors name it: "oci.region", "OCI_CLI_REGION", "OCI_REGION", a profile's line.
    region_origin: str = ""

    def client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"config": dict(self.config), "signer": self.signer}
        if self.region:
            kwargs["config"]["region"] = self.region
        return kwargs


def config_path(settings: OCISettings, environ: Mapping[str, str]) -> Path:
    chosen = settings.config_file
    if chosen == DEFAULT_CONFIG_FILE and environ.get("OCI_CONFIG_FILE"):
        chosen = environ["OCI_CONFIG_FILE"]
    return Path(os.path.expanduser(chosen))


def parse_error(exc: configparser.Error) -> str:
    """What is wrong, by line number only: configparser's own message quotes the lines, and a
    pasted PEM key or a `pass_phrase secret` line without "=" would be printed."""
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return f"line {exc.lineno} comes before any [profile] header"
    if isinstance(exc, configparser.ParsingError):
        numbers = [str(number) for number, _ in exc.errors]
        shown = ", ".join(numbers[:10]) + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")
        what = "lines {} are not `name = value` lines" if len(numbers) > 1 else "line {} is not a `name = value` line"
        return f"{what.format(shown)} (a key belongs in key_file, not in the config)"
    if isinstance(exc, configparser.DuplicateSectionError):
        return f"line {exc.lineno} repeats the profile [{exc.section}]"
    if isinstance(exc, configparser.DuplicateOptionError):
        return f"line {exc.lineno} repeats {exc.option!r} in [{exc.section}]"
    return type(exc).__name__


def config_encoding() -> str:
    """What ConfigParser.read(path) opens a file with, as oci.config.from_file calls it: the locale's encoding."""
    return codecs.lookup(locale.getpreferredencoding(False)).name.upper()


def undecodable(path: Path) -> str:
    """Where the file stops being text in the encoding the SDK reads it with, by line number only (the line may
    be a pass_phrase)."""
    encoding = config_encoding()
    data = path.read_bytes()
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return f"line {line} is not {encoding} text"
    return f"it is not {encoding} text"


def check_profile(path: Path, profile: str) -> None:
    """The profile exists and its key file is there: the SDK's own messages for these are vaguer."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path)  # as oci.config.from_file reads it: the locale's encoding (UTF-8 on Linux and macOS)
    except configparser.Error as exc:
        raise CloudDDPError(
            f"the OCI config file {str(path)!r} is not a valid config file: {parse_error(exc)}."
        ) from None
    except UnicodeDecodeError:
        raise CloudDDPError(
            f"the OCI config file {str(path)!r} is not a valid config file: {undecodable(path)}, and the oci SDK "
            f"cannot read it either. Save it as {config_encoding()} text (`oci setup config` "
            f"writes it so)."
        ) from None
    if profile == "DEFAULT":
        values: Mapping[str, str] | None = parser.defaults() or None
    else:
        values = parser[profile] if parser.has_section(profile) else None
    if values is None:
        present = (["DEFAULT"] if parser.defaults() else []) + parser.sections()
        raise CloudDDPError(
            f"the OCI config file {str(path)!r} has no profile [{profile}] (oci.profile, --profile, or OCI_CLI_PROFILE); "
            f"it has: {', '.join(f'[{p}]' for p in present) or 'none'}."
        )
    key_file = values.get("key_file")
    if key_file and not Path(os.path.expanduser(key_file)).is_file():
        raise CloudDDPError(
            f"the OCI config file {str(path)!r}, profile [{profile}]: key_file {key_file!r} does not exist."
        )


def read_profile(
    settings: OCISettings, environ: Mapping[str, str], path: Path, region_origin: str = "oci.region"
) -> tuple[dict[str, Any], str]:
    """The profile as the SDK reads it (oci.config.from_file), with the region the spec or OCI_REGION gives,
    and where that region came from (`region_origin` names the spec's: oci.region, or OCI_CLI_REGION)."""
    profile = settings.profile
    if not path.is_file():
        raise CloudDDPError(
            f"the OCI config file {str(path)!r} does not exist (oci.config_file, --config-file, or OCI_CLI_CONFIG_FILE "
            f"for `cloudddp stage`). Create it with `oci setup config` "
            f"(https://docs.oracle.com/en-us/iaas/Content/API/Concepts/sdkconfig.htm), or use --auth "
            f"resource_principal (OCI_CLI_AUTH=resource_principal) inside OCI."
        )
    check_profile(path, profile)  # the profile is there: from_file's ProfileNotFound (a ClientError) cannot follow
    try:
        config = oci.config.from_file(str(path), profile)
    except (oci.exceptions.ClientError, ValueError) as exc:
        raise CloudDDPError(f"the OCI config file {str(path)!r}, profile [{profile}], cannot be read: {exc}") from None
    origin = f"the OCI config file {str(path)!r}, profile [{profile}]: region"
    if settings.region:
        config["region"], origin = settings.region, region_origin
    elif not config.get("region") and environ.get("OCI_REGION"):
        config["region"], origin = environ["OCI_REGION"], "OCI_REGION"
    return config, origin


def from_config_file(settings: OCISettings, environ: Mapping[str, str], region_origin: str) -> Credentials:
    path = config_path(settings, environ)
    profile = settings.profile
    config, region_origin = read_profile(settings, environ, path, region_origin)
    if settings.auth == "security_token" or config.get("security_token_file"):
        credentials = session_credentials(config, path, profile)
        credentials.region_origin = region_origin
        return credentials
    try:
        oci.config.validate_config(config)
    except oci.exceptions.InvalidConfig as exc:
        problems = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
        listed = ", ".join(f"{k} is {v}" for k, v in problems.items()) or str(exc)
        raise CloudDDPError(f"the OCI config file {str(path)!r}, profile [{profile}]: {listed}.") from None
    key_file = Path(os.path.expanduser(str(config.get("key_file") or "")))
    if not config.get("key_content") and not key_file.is_file():
        raise CloudDDPError(
            f"the OCI config file {str(path)!r}, profile [{profile}]: key_file {str(key_file)!r} does not exist."
        )
    with key_errors(key_file, path, profile):
        signer = oci.signer.Signer.from_config(config)
    return Credentials(
        config=config, signer=signer, region=config.get("region"), kind="api_key",
        origin=f"profile [{profile}] of {path}", region_origin=region_origin,
    )  # fmt: skip


@contextmanager
def key_errors(key_file: Path, path: Path, profile: str) -> Iterator[None]:
    """The SDK's errors for an unreadable private key, as one paragraph that names the file, never the key."""
    try:
        yield
    except oci.exceptions.MissingPrivateKeyPassphrase:
        raise CloudDDPError(
            f"the OCI API key {str(key_file)!r} (profile [{profile}] of {str(path)!r}) is encrypted; add its "
            f"pass_phrase to the profile."
        ) from None
    except (oci.exceptions.InvalidPrivateKey, ValueError, TypeError):
        raise CloudDDPError(
            f"the OCI API key {str(key_file)!r} (profile [{profile}] of {str(path)!r}) is not a readable PEM private "
            f"key, or its pass_phrase is wrong."
        ) from None


def read_session_token(token_file: str, path: Path, profile: str) -> str:
    """The token of `oci session authenticate`, checked unexpired as ADS checks it (SecurityTokenContainer)."""
    where = f"the OCI config file {str(path)!r}, profile [{profile}]: security_token_file"
    renew = f"run `oci session authenticate --profile-name {profile}` (or `oci session refresh --profile {profile}`)"
    file = Path(os.path.expanduser(token_file))
    try:
        token = file.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a text file"
        raise CloudDDPError(f"{where} {str(file)!r} cannot be read ({why}); {renew}.") from None
    try:
        expires = int(oci.auth.security_token_container.SecurityTokenContainer(None, token).get_jwt()["exp"])
    except Exception:  # PyJWT's DecodeError, or a JWT without "exp"
        raise CloudDDPError(f"{where} {str(file)!r} does not hold a session token (a JWT); {renew}.") from None
    if expires < time.time():
        ended = dt.datetime.fromtimestamp(expires, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        raise CloudDDPError(f"the session token in {str(file)!r} (profile [{profile}]) expired at {ended}; {renew}.")
    return token


def session_credentials(config: dict[str, Any], path: Path, profile: str) -> Credentials:
    """A SecurityTokenSigner over the token file's content and the profile's key, as ADS builds it."""
    for field in ("security_token_file", "key_file"):  # ADS SECURITY_TOKEN_REQUIRED (region: load_credentials)
        if not config.get(field):
            raise CloudDDPError(
                f"the OCI config file {str(path)!r}, profile [{profile}]: {field} is missing; security_token auth needs "
                f"a profile from `oci session authenticate` (security_token_file, key_file, region)."
            )
    token = read_session_token(str(config["security_token_file"]), path, profile)
    key_file = Path(os.path.expanduser(str(config["key_file"])))
    with key_errors(key_file, path, profile):
        private_key = oci.signer.load_private_key_from_file(str(key_file), config.get("pass_phrase"))
    signer = oci.auth.signers.SecurityTokenSigner(token, private_key)
    return Credentials(
        config=config, signer=signer, region=config.get("region"), kind="security_token",
        origin=f"session profile [{profile}] of {path}",
    )  # fmt: skip


def principal_credentials(
    settings: OCISettings, signer: Any, environ: Mapping[str, str], region_origin: str, kind: str
) -> Credentials:
    """A principal's credentials; its region the spec's, else the principal's own, else OCI_REGION."""
    if settings.region:
        region, origin = settings.region, region_origin
    elif getattr(signer, "region", None):
        region, origin = signer.region, f"the {kind}'s region"
    else:
        region, origin = environ.get("OCI_REGION"), "OCI_REGION"
    return Credentials(config={}, signer=signer, region=region, kind=kind.replace(" ", "_"), origin=kind,
                       region_origin=origin)  # fmt: skip


def from_resource_principal(settings: OCISettings, environ: Mapping[str, str], region_origin: str) -> Credentials:
    if not environ.get("OCI_RESOURCE_PRINCIPAL_VERSION"):
        raise CloudDDPError(
            "oci.auth=resource_principal works inside OCI only (notebook sessions, job runs, functions): "
            "OCI_RESOURCE_PRINCIPAL_VERSION is not set here. Use --auth api_key with ~/.oci/config."
        )
    try:
        signer = oci.auth.signers.get_resource_principals_signer()
    except Exception as exc:  # the SDK raises several unrelated types here
        raise CloudDDPError(f"cannot get a resource principal token: {type(exc).__name__}: {exc}") from None
    return principal_credentials(settings, signer, environ, region_origin, "resource principal")


def from_instance_principal(settings: OCISettings, environ: Mapping[str, str], region_origin: str) -> Credentials:
    try:
        signer = oci.auth.signers.InstancePrincipalsSecurityTokenSigner()
    except Exception as exc:  # metadata service unreachable, not in a dynamic group, ...
        raise CloudDDPError(
            "oci.auth=instance_principal: cannot get a token from the instance metadata service "
            f"({type(exc).__name__}); this works only on an OCI compute instance in a dynamic group."
        ) from None
    return principal_credentials(settings, signer, environ, region_origin, "instance principal")


def load_credentials(
    settings: OCISettings, environ: Mapping[str, str] | None = None, region_origin: str = "oci.region"
) -> Credentials:
    """`region_origin` names where settings.region came from when it is set: "oci.region" (the spec, --region),
    or "OCI_CLI_REGION" (provider.effective_settings took it from there); errors about the region name it."""
    environ = os.environ if environ is None else environ
    loaders = {
        "api_key": from_config_file,
        "security_token": from_config_file,
        "resource_principal": from_resource_principal,
        "instance_principal": from_instance_principal,
    }
    credentials = loaders[settings.auth](settings, environ, region_origin)
    if not credentials.region:
        raise CloudDDPError(
            f"no OCI region: set oci.region (--region), a region in {credentials.origin}, or OCI_REGION."
        )
    check_region(credentials.region, credentials.region_origin or f"the region of {credentials.origin}", environ)
    return credentials
