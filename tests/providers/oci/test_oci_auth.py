"""OCI credentials: config files that cannot be parsed, and session-token profiles.

A config file that configparser cannot read must be reported by line number only (people
paste their PEM key, or write `pass_phrase secret` without "="). Profiles written by
`oci session authenticate` (security_token_file, key_file, no user) sign with
`oci.auth.signers.SecurityTokenSigner`, as ADS does (ads/common/auth.py `SecurityToken`,
oracle/accelerated-data-science @0e785b9f): the loopback service accepts only keyId
`ST$<token>` with a token it issued, signed with that session's key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from helpers import cli
from helpers.oci_loopback_server import COMPARTMENT, FakeOCI, ThrowawayKey, oci_settings

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.oci.provider import OCIProvider

RUN = "ocid1.datasciencejobrun.oc1.iad.aaaaaaaarun"
PASSPHRASE = "SuperSecretPass123"


@pytest.fixture(scope="module")
def session_key() -> ThrowawayKey:
    return ThrowawayKey.generate()


@pytest.fixture
def server(key: ThrowawayKey, oci_service: Callable[..., FakeOCI]) -> FakeOCI:
    return oci_service(key)


def pem(key: ThrowawayKey) -> str:
    return key.private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def provider(server: FakeOCI, config: Path, **environ: str) -> OCIProvider:
    return OCIProvider(service_endpoint=server.url, environ={"OCI_CONFIG_FILE": str(config), **environ})


# -- finding 1: a config file configparser cannot parse ---------------------------------------
def test_a_pasted_key_in_the_config_is_reported_by_line_number_never_by_content(
    key: ThrowawayKey, tmp_path: Path
) -> None:
    config = key.write_config(tmp_path / ".oci")
    config.write_text(config.read_text() + pem(key))  # lines 7 onwards
    with pytest.raises(CloudDDPError) as caught:
        OCIProvider(environ={"OCI_CONFIG_FILE": str(config)}).clients()
    message = str(caught.value)
    assert message.startswith(f"the OCI config file '{config}' is not a valid config file: lines 7, 8, 9, ")
    assert "PRIVATE KEY" not in message and pem(key).splitlines()[1] not in message
    assert "\n" not in message


def test_a_pass_phrase_line_without_equals_is_not_printed(key: ThrowawayKey, tmp_path: Path) -> None:
    config = key.write_config(tmp_path / ".oci")
    config.write_text(config.read_text() + f"pass_phrase {PASSPHRASE}\n")
    with pytest.raises(CloudDDPError, match=r"line 7 is not a `name = value` line \(a key") as caught:
        OCIProvider(environ={"OCI_CONFIG_FILE": str(config)}).clients()
    assert PASSPHRASE not in str(caught.value)


def test_a_key_before_any_profile_header_is_not_printed(key: ThrowawayKey, tmp_path: Path) -> None:
    config = key.write_config(tmp_path / ".oci")
    config.write_text(pem(key) + config.read_text())  # configparser's message quotes the first line
    with pytest.raises(CloudDDPError, match=r"line 1 comes before any \[profile\] header") as caught:
        OCIProvider(environ={"OCI_CONFIG_FILE": str(config)}).clients()
    assert "PRIVATE KEY" not in str(caught.value)


def test_the_cli_exits_2_with_one_paragraph_and_no_key_material(key: ThrowawayKey, tmp_path: Path) -> None:
    config = key.write_config(tmp_path / ".oci")
    config.write_text(config.read_text() + pem(key) + f"pass_phrase {PASSPHRASE}\n")
    result = cli("status", "-p", "oci", RUN, env={"OCI_CLI_CONFIG_FILE": str(config)})
    assert result.returncode == 2, result.stderr
    assert f"the OCI config file '{config}' is not a valid config file" in result.stderr
    assert "Traceback" not in result.stderr and "PRIVATE KEY" not in result.stderr + result.stdout
    assert PASSPHRASE not in result.stderr + result.stdout


# -- finding 5: session-token profiles -------------------------------------------------------
def session_config(server: FakeOCI, session_key: ThrowawayKey, folder: Path, profile: str = "DEFAULT") -> Path:
    return session_key.write_session_config(folder, server.issue_session_token(session_key.private_key), profile)


def key_ids(server: FakeOCI) -> set[str]:
    return {r.headers["authorization"].split('keyId="')[1].split('"')[0] for r in server.requests}


def test_a_session_profile_signs_with_its_security_token(
    server: FakeOCI, session_key: ThrowawayKey, tmp_path: Path
) -> None:
    config = session_config(server, session_key, tmp_path / ".oci")
    token = (tmp_path / ".oci" / "token").read_text()
    oci = provider(server, config)
    assert oci.clients().credentials.origin == f"session profile [DEFAULT] of {config}"
    with pytest.raises(CloudDDPError, match="refused get_job_run: 404") as caught:
        oci.status(RUN)  # past authentication: the run does not exist
    assert server.signature_failures == []
    assert key_ids(server) == {f"ST${token}"}  # what SecurityTokenSigner sends
    assert token not in str(caught.value)


def test_oci_cli_auth_security_token_and_a_user_inherited_from_default(
    server: FakeOCI, key: ThrowawayKey, session_key: ThrowawayKey, tmp_path: Path
) -> None:
    api_key_config = key.write_config(tmp_path / "api")
    session = session_config(server, session_key, tmp_path / "session", profile="SESSION")
    # [DEFAULT]'s user is inherited by [SESSION]: still the session token, never an API-key signature.
    config = tmp_path / "config"
    config.write_text(api_key_config.read_text() + "\n" + session.read_text())
    for environ in ({"OCI_CLI_PROFILE": "SESSION"}, {"OCI_CLI_PROFILE": "SESSION", "OCI_CLI_AUTH": "security_token"}):
        server.requests.clear()
        runs = provider(server, config, **environ).list_runs(compartment_id=COMPARTMENT)
        assert runs == [] and server.signature_failures == []
        assert all(key_id.startswith("ST$") for key_id in key_ids(server))


def test_oci_cli_auth_security_token_needs_a_session_profile(
    server: FakeOCI, key: ThrowawayKey, tmp_path: Path
) -> None:
    config = key.write_config(tmp_path / ".oci")
    with pytest.raises(CloudDDPError, match=r"profile \[DEFAULT\]: security_token_file is missing; security_token"):
        provider(server, config, OCI_CLI_AUTH="security_token").clients()
    with pytest.raises(CloudDDPError, match="cloudddp supports api_key, security_token, resource_principal or"):
        provider(server, config, OCI_CLI_AUTH="session").clients()


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda token: token.unlink(), r"security_token_file '.*/token' cannot be read \(No such file or directory\)"),
        (lambda token: (token.unlink(), token.mkdir()), r"security_token_file '.*/token' cannot be read \(Is a direc"),
        (lambda token: token.write_text("garbage"), r"security_token_file '.*/token' does not hold a session token"),
    ],
)
def test_a_missing_or_unreadable_token_file_is_named(
    server: FakeOCI, session_key: ThrowawayKey, tmp_path: Path, spoil: object, message: str
) -> None:
    config = session_config(server, session_key, tmp_path / ".oci")
    spoil(tmp_path / ".oci" / "token")  # type: ignore[operator]
    with pytest.raises(CloudDDPError, match=message) as caught:
        provider(server, config).clients()
    assert "oci session authenticate --profile-name DEFAULT" in str(caught.value)
    assert server.requests == []


def test_an_expired_token_is_refused_before_any_request_and_never_printed(
    server: FakeOCI, session_key: ThrowawayKey, tmp_path: Path
) -> None:
    token = server.issue_session_token(session_key.private_key, lifetime=-60)
    config = session_key.write_session_config(tmp_path / ".oci", token)
    result = cli("status", "-p", "oci", RUN, env={"OCI_CLI_CONFIG_FILE": str(config),
                                                      "CLOUDDDP_OCI_SERVICE_ENDPOINT": server.url})  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"the session token in '{tmp_path / '.oci' / 'token'}' (profile [DEFAULT]) expired at " in result.stderr
    assert token not in result.stderr + result.stdout and "Traceback" not in result.stderr
    assert server.requests == []


def test_the_job_spec_and_the_cli_take_auth_security_token(
    server: FakeOCI, session_key: ThrowawayKey, tmp_path: Path
) -> None:
    config = session_config(server, session_key, tmp_path / ".oci")
    spec = build_spec({"entry_point": "t.py", "oci": oci_settings(auth="security_token", config_file=str(config))})
    credentials = OCIProvider(service_endpoint=server.url, environ={}).clients(spec.oci).credentials
    assert (credentials.kind, spec.oci.auth) == ("security_token", "security_token")
    assert "security_token" in cli("launch", "-p", "oci", "--help").stdout
