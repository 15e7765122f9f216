"""Network failures talking to OCI (point 6 of issue #9): one paragraph, exit 2, bounded time.

Each case points the real `oci` SDK at an endpoint that fails in one way: a loopback port
nothing listens on (refused at once), a server that accepts connections and never answers
(the read timeout), and a host name under `.invalid`, which never resolves (RFC 6761).
The bounds asserted are generous ceilings (the policy's own worst case), not races.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, cli
from helpers.endpoints import refused_endpoint, silent_endpoint
from helpers.oci_loopback_server import ThrowawayKey, oci_settings

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.oci.network import NetworkPolicy
from cloudddp.providers.oci.provider import OCIProvider

RUN = "ocid1.datasciencejobrun.oc1.iad.aaaanetwork"
TIMEOUT = 2.0
# One call: the budget, one more attempt of at most the timeout, and the connect timeout.
CEILING = 2 * TIMEOUT + 10 + 5


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ThrowawayKey.generate().write_config(tmp_path_factory.mktemp("oci") / ".oci")


@pytest.fixture
def refused() -> Iterator[str]:
    """A loopback port that is bound but not listening: connecting is refused, and no one else can take it."""
    with refused_endpoint() as url:
        yield url


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that accepts connections (the kernel's backlog does) and never answers."""
    with silent_endpoint() as url:
        yield url


def provider(endpoint: str, config: Path, **options: Any) -> OCIProvider:
    return OCIProvider(service_endpoint=endpoint, environ={"OCI_CONFIG_FILE": str(config)}, timeout=TIMEOUT, **options)


def spec(tmp_path: Path) -> Any:
    (tmp_path / "data").mkdir(exist_ok=True)
    return build_spec({"entry_point": "train_ddp.py", "source_dir": str(REPO / "sources"), "nodes": 2,
                       "inputs": {"train": str(tmp_path / "data")}, "oci": oci_settings()})  # fmt: skip


def timed(call: Any) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(CloudDDPError) as caught:
        call()
    return str(caught.value), time.monotonic() - started


@pytest.mark.network
def test_a_refused_endpoint_fails_launch_status_logs_and_cancel_in_one_paragraph(
    refused: str, config: Path, tmp_path: Path
) -> None:
    oci_provider = provider(refused, config)
    calls = {
        "launch": lambda: oci_provider.submit(oci_provider.render(spec(tmp_path))),
        "status": lambda: oci_provider.status(RUN),
        "logs": lambda: list(oci_provider.logs(RUN, follow=True)),
        "cancel": lambda: oci_provider.cancel(RUN),
    }
    for call, run in calls.items():
        message, took = timed(run)
        assert message.startswith(
            f"cannot reach OCI for {call}: {refused} (region us-ashburn-1): the connection was refused (nothing "
            f"listens there); gave up after retrying for up to 2 s (CLOUDDDP_OCI_TIMEOUT)."
        ), message
        assert "\n" not in message and "Traceback" not in message
        assert took < CEILING


@pytest.mark.network
def test_a_server_that_never_answers_is_given_up_on_after_the_read_timeout(silent: str, config: Path) -> None:
    message, took = timed(lambda: provider(silent, config).status(RUN))
    assert f"cannot reach OCI for status: {silent} (region us-ashburn-1): no answer within 2 s" in message
    assert TIMEOUT <= took < CEILING


def test_a_host_name_that_does_not_resolve_is_named(config: Path) -> None:
    message, took = timed(lambda: provider("http://cloudddp-test.invalid", config).status(RUN))
    assert message.startswith(
        "cannot reach OCI for status: http://cloudddp-test.invalid (region us-ashburn-1): the host name does not "
        "resolve (DNS)"
    ), message
    assert took < CEILING + 30  # the resolver's own timeouts come on top when no DNS server answers


def test_without_an_endpoint_override_the_region_endpoint_is_named(config: Path) -> None:
    """The real endpoint of the profile's region, not a loopback one: proves the name comes from the request."""
    oci_provider = OCIProvider(environ={"OCI_CONFIG_FILE": str(config)}, timeout=TIMEOUT)
    oci_provider.clients().data_science.base_client.endpoint = "http://cloudddp-region.invalid"
    message, _ = timed(lambda: oci_provider.status(RUN))
    assert "cannot reach OCI for status: http://cloudddp-region.invalid (region us-ashburn-1)" in message


def test_the_timeout_comes_from_the_environment_and_bad_values_are_refused() -> None:
    assert NetworkPolicy.choose(None, {}).timeout == 60
    assert NetworkPolicy.choose(None, {"CLOUDDDP_OCI_TIMEOUT": "7.5"}).timeout == 7.5
    assert NetworkPolicy.choose(3, {"CLOUDDDP_OCI_TIMEOUT": "7.5"}).timeout == 3
    assert NetworkPolicy.choose(None, {"CLOUDDDP_OCI_TIMEOUT": "7.5"}).client_kwargs()["timeout"] == (7.5, 7.5)
    assert NetworkPolicy.choose(None, {"CLOUDDDP_OCI_TIMEOUT": "120"}).client_kwargs()["timeout"] == (10, 120)
    for bad in ("0", "-1", "soon", "inf", "nan"):
        with pytest.raises(CloudDDPError, match=f"CLOUDDDP_OCI_TIMEOUT='{bad}': expected a number of seconds"):
            NetworkPolicy.choose(None, {"CLOUDDDP_OCI_TIMEOUT": bad})


@pytest.mark.network
def test_cli_launch_against_a_refused_endpoint_exits_2_with_one_paragraph(
    refused: str, config: Path, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    settings = oci_settings()
    result = cli(
        "launch", "-p", "oci", "--compartment", settings["compartment_id"], "--project", settings["project_id"],
        "--image", settings["image"], "--work-dir", settings["work_dir"], "--nodes", "2", "-i", f"train={tmp_path / 'data'}",
        "sources/train_ddp.py",
        env={"CLOUDDDP_OCI_SERVICE_ENDPOINT": refused, "OCI_CONFIG_FILE": str(config), "CLOUDDDP_OCI_TIMEOUT": "1"},
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert f"cannot reach OCI for launch: {refused} (region us-ashburn-1): the connection was refused" in " ".join(
        result.stderr.split()
    )


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [
        ("127.0.0.1:5999", "is not a usable endpoint URL: it needs http:// or https:// and a host"),
        ("ftp://127.0.0.1:5999", "is not a usable endpoint URL"),
        ("http://127.0.0.1:99999", "is not a usable endpoint URL"),
        ("http://admin:s3cr3t@127.0.0.1:5999", "the oci SDK refuses user info in an endpoint"),
    ],
)
def test_an_endpoint_the_sdk_would_refuse_is_exit_2_before_anything_is_sent(
    endpoint: str, said: str, config: Path, tmp_path: Path
) -> None:
    """The oci SDK checks the endpoint only when a request is made (a ValueError traceback in the middle of
    launch, after the source upload started); cloudddp checks it when the provider is made, render included."""
    settings = oci_settings()
    result = cli(
        "render", "-p", "oci", "--compartment", settings["compartment_id"], "--project", settings["project_id"],
        "--image", settings["image"], "--work-dir", settings["work_dir"], "sources/train_ddp.py",
        env={"CLOUDDDP_OCI_SERVICE_ENDPOINT": endpoint, "OCI_CONFIG_FILE": str(config)},
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert "CLOUDDDP_OCI_SERVICE_ENDPOINT=" in message and said in message and "Traceback" not in message
    assert "s3cr3t" not in message
