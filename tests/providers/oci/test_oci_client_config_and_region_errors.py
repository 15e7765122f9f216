"""The OCI client side: a config file that is not text, a malformed endpoint, and where a bad region came from.

Each case is run as a user runs it (`cloudddp status -p oci RUN`, `cloudddp launch -p oci`) in an
environment of its own: HOME and the config file are under tmp_path, and no OCI_* variable of
the machine running the tests leaks in (OCI_CLI_REGION or OCI_REGION there would change the
region these tests check).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import oci
import pytest
from helpers import run_cli
from helpers.oci_loopback_server import COMPARTMENT, PROJECT, ThrowawayKey

from cloudddp.errors import CloudDDPError
from cloudddp.providers.oci import OCISettings
from cloudddp.providers.oci.provider import OCIProvider

RUN = "ocid1.datasciencejobrun.oc1.iad.aaaaaaaarun"
PASSPHRASE = "Sécret-pass-ÿ"  # written below in latin-1: byte 0xff is no UTF-8


def run(tmp_path: Path, *args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    """`cloudddp ARGS` with only PATH, a HOME under tmp_path and ENVIRON: nothing of the user's ~/.oci."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1", **environ}
    return run_cli(*args, cwd=tmp_path, env=env, inherit_env=False, timeout=120)


def one_paragraph(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    return " ".join(stderr.split())  # the console wraps long lines


# -- finding 1: a config file that is not UTF-8 text --------------------------------------------
def latin1_config(key: ThrowawayKey, tmp_path: Path) -> Path:
    config = key.write_config(tmp_path / ".oci")
    config.write_bytes(config.read_bytes() + f"pass_phrase={PASSPHRASE}\n".encode("latin-1"))  # line 7
    return config


def test_the_oci_sdk_itself_cannot_read_a_config_file_that_is_not_utf8(key: ThrowawayKey, tmp_path: Path) -> None:
    """What cloudddp refuses is what oci.config.from_file fails on (it reads in the locale's encoding, UTF-8 here)."""
    config = latin1_config(key, tmp_path)
    with pytest.raises(UnicodeDecodeError):
        oci.config.from_file(str(config))


@pytest.mark.process
def test_status_with_a_config_file_that_is_not_utf8_exits_2_naming_the_file_and_line(
    key: ThrowawayKey, tmp_path: Path
) -> None:
    config = latin1_config(key, tmp_path)
    result = run(tmp_path, "status", "-p", "oci", RUN, OCI_CONFIG_FILE=str(config))
    assert result.returncode == 2, result.stderr
    message = one_paragraph(result.stderr)
    assert f"the OCI config file '{config}' is not a valid config file: line 7 is not UTF-8 text" in message
    assert "UnicodeDecodeError" not in message and "Sécret" not in message
    assert PASSPHRASE not in result.stderr + result.stdout


@pytest.mark.process
def test_launch_with_a_config_file_that_is_not_utf8_exits_2_before_anything_is_sent(
    key: ThrowawayKey, tmp_path: Path
) -> None:
    config = latin1_config(key, tmp_path)
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = run(
        tmp_path, "launch", "-p", "oci", "--compartment", COMPARTMENT, "--project", PROJECT, "--work-dir",
        "oci://bucket@namespace/runs", "--image", "iad.ocir.io/ns/img:1", "--no-wait", "train.py",
        OCI_CONFIG_FILE=str(config), CLOUDDDP_OCI_SERVICE_ENDPOINT="http://127.0.0.1:9",
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"the OCI config file '{config}' is not a valid config file: line 7 is not UTF-8 text" in one_paragraph(
        result.stderr
    )
    assert PASSPHRASE not in result.stderr + result.stdout


# -- finding 2: an endpoint urllib cannot parse ---------------------------------------------------
@pytest.mark.process
@pytest.mark.parametrize("endpoint", ["http://[::1", "http://[not-an-address]:8080"])
def test_a_malformed_ipv6_endpoint_is_one_paragraph_naming_the_variable(tmp_path: Path, endpoint: str) -> None:
    result = run(tmp_path, "status", "-p", "oci", RUN, CLOUDDDP_OCI_SERVICE_ENDPOINT=endpoint)
    assert result.returncode == 2, result.stderr
    assert f"CLOUDDDP_OCI_SERVICE_ENDPOINT={endpoint!r} is not a usable endpoint URL" in one_paragraph(result.stderr)


def test_a_malformed_ipv6_endpoint_given_to_the_provider_names_service_endpoint() -> None:
    with pytest.raises(CloudDDPError, match=r"^service_endpoint='http://\[::1' is not a usable endpoint URL"):
        OCIProvider(service_endpoint="http://[::1", environ={})


# -- finding 3: a region that is not one names where it came from ----------------------------------
def region_error(tmp_path: Path, config: Path, **environ: str) -> str:
    result = run(tmp_path, "status", "-p", "oci", RUN, OCI_CONFIG_FILE=str(config), **environ)
    assert result.returncode == 2, result.stderr
    return one_paragraph(result.stderr)


def without_region(key: ThrowawayKey, tmp_path: Path) -> Path:
    config = key.write_config(tmp_path / ".oci")
    config.write_text(config.read_text().replace(f"region={key.region}\n", ""))
    return config


@pytest.mark.process
def test_a_bad_oci_cli_region_is_named_as_oci_cli_region(key: ThrowawayKey, tmp_path: Path) -> None:
    message = region_error(tmp_path, without_region(key, tmp_path), OCI_CLI_REGION="us-bogus-1")
    assert "error: OCI_CLI_REGION='us-bogus-1' is not an OCI region." in message
    assert "oci.region=" not in message


@pytest.mark.process
def test_oci_cli_region_over_the_profiles_region_is_named_as_oci_cli_region(key: ThrowawayKey, tmp_path: Path) -> None:
    message = region_error(tmp_path, key.write_config(tmp_path / ".oci"), OCI_CLI_REGION="us-bogus-1")
    assert "error: OCI_CLI_REGION='us-bogus-1' is not an OCI region." in message


@pytest.mark.process
def test_a_bad_region_line_in_the_config_file_names_the_file_and_profile(key: ThrowawayKey, tmp_path: Path) -> None:
    config = key.write_config(tmp_path / ".oci", profile="work")
    config.write_text(config.read_text().replace(f"region={key.region}", "region=us-bogus-1"))
    message = region_error(tmp_path, config, OCI_CLI_PROFILE="work")
    assert (
        f"error: the OCI config file '{config}', profile [work]: region='us-bogus-1' is not an OCI region." in message
    )


@pytest.mark.process
def test_a_bad_oci_region_is_named_as_oci_region(key: ThrowawayKey, tmp_path: Path) -> None:
    message = region_error(tmp_path, without_region(key, tmp_path), OCI_REGION="us-bogus-1")
    assert "error: OCI_REGION='us-bogus-1' is not an OCI region." in message


def test_a_bad_region_of_the_spec_is_still_named_oci_region(key: ThrowawayKey, tmp_path: Path) -> None:
    config = key.write_config(tmp_path / ".oci")
    provider = OCIProvider(environ={"OCI_CONFIG_FILE": str(config), "OCI_CLI_REGION": "us-phoenix-1"})
    with pytest.raises(CloudDDPError, match=r"^oci\.region='us-bogus-1' is not an OCI region\."):
        provider.clients(OCISettings(region="us-bogus-1"))  # the spec's region wins over OCI_CLI_REGION
