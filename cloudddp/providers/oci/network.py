"""Bounded network calls to OCI, and network failures as one paragraph instead of a traceback.

Left alone the `oci` SDK retries a failing call for up to 600 s (its DEFAULT_RETRY_STRATEGY:
8 attempts, exponential back-off) with a 60 s read timeout per attempt, then raises
`oci.exceptions.RequestException` with the HTTP library's exception inside. Every client
cloudddp makes gets instead the `timeout=` and `retry_strategy=` from `NetworkPolicy`:

- `CLOUDDDP_OCI_TIMEOUT` (seconds, default 60; or `OCIProvider(timeout=...)`) is both the
  read timeout of one attempt and the time after which a failing call is not retried;
  connecting gives up after min(10 s, timeout). Worst case for one call: about twice the
  timeout (the last attempt may start just before the budget ends) plus 10 s.
- Retries are the SDK's own checks (timeouts, connection errors, 429, 5xx), with back-off
  capped at a quarter of the timeout.

`as_error()` turns what is left (unreachable endpoint, DNS failure, timeouts) into a
`CloudDDPError` naming the call, the endpoint and the region.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import oci
from oci._vendor import requests  # the SDK's own copy: its exceptions are the ones raised

from cloudddp.errors import CloudDDPError

TIMEOUT_VARIABLE = "CLOUDDDP_OCI_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
MAX_CONNECT_TIMEOUT = 10.0
ENDPOINT_IN_MESSAGE = re.compile(r"Request Endpoint: [A-Z]+ (\S+)")
DNS_FAILURE = ("NameResolutionError", "Name or service not known", "Temporary failure in name resolution",
               "nodename nor servname", "No address associated with hostname", "getaddrinfo failed")  # fmt: skip


@dataclass(frozen=True)
class NetworkPolicy:
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def choose(cls, timeout: float | None, environ: Mapping[str, str]) -> NetworkPolicy:
        """`timeout` if given, else CLOUDDDP_OCI_TIMEOUT, else the default."""
        if timeout is None and environ.get(TIMEOUT_VARIABLE):
            raw = environ[TIMEOUT_VARIABLE]
            try:
                timeout = float(raw)
            except ValueError:
                timeout = -1.0
            if not 0 < timeout < float("inf"):
                raise CloudDDPError(f"{TIMEOUT_VARIABLE}={raw!r}: expected a number of seconds above 0, like 60.")
        if timeout is not None and not 0 < timeout < float("inf"):
            raise CloudDDPError(f"timeout={timeout!r}: expected a number of seconds above 0.")
        return cls(DEFAULT_TIMEOUT if timeout is None else float(timeout))

    def client_kwargs(self) -> dict[str, Any]:
        """What every oci client constructor takes from this policy."""
        retry = oci.retry.RetryStrategyBuilder(
            max_attempts=8,
            total_elapsed_time_seconds=self.timeout,
            retry_max_wait_between_calls_seconds=max(1.0, self.timeout / 4),
        ).get_retry_strategy()
        return {"timeout": (min(MAX_CONNECT_TIMEOUT, self.timeout), self.timeout), "retry_strategy": retry}


def failed_url(exc: BaseException) -> str | None:
    """The URL the failing request went to, as the SDK or the HTTP library recorded it."""
    for candidate in (exc, *getattr(exc, "args", ())):
        request = getattr(candidate, "request", None)
        if request is not None and getattr(request, "url", None):
            return str(request.url)
        for arg in getattr(candidate, "args", ()) if isinstance(candidate, BaseException) else (candidate,):
            match = ENDPOINT_IN_MESSAGE.search(str(arg))
            if match:
                return match.group(1)
    return None


def base_url(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else url


def cause(exc: BaseException, policy: NetworkPolicy) -> str:
    """What went wrong, in words: DNS, refused, timed out, or the library's own short message."""
    inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc
    text = f"{type(inner).__name__} {inner!r}"
    if any(marker in text for marker in DNS_FAILURE):
        return "the host name does not resolve (DNS)"
    if isinstance(inner, requests.exceptions.ReadTimeout) or "ReadTimeout" in text:
        return f"no answer within {policy.timeout:g} s"
    if isinstance(inner, requests.exceptions.ConnectTimeout) or isinstance(exc, oci.exceptions.ConnectTimeout):
        return f"no connection within {min(MAX_CONNECT_TIMEOUT, policy.timeout):g} s"
    if "Connection refused" in text or "ECONNREFUSED" in text:
        return "the connection was refused (nothing listens there)"
    if "SSLError" in text or "CERTIFICATE" in text:
        return "the TLS handshake failed"
    return f"{type(inner).__name__}"


def is_network_error(exc: BaseException) -> bool:
    return isinstance(exc, (oci.exceptions.RequestException, oci.exceptions.ConnectTimeout,
                            requests.exceptions.RequestException))  # fmt: skip


def as_error(
    exc: BaseException, call: str, endpoint: str | None, region: str | None, policy: NetworkPolicy
) -> CloudDDPError | None:
    """The one-paragraph error for a network failure (also inside a multipart upload); None for others."""
    if isinstance(exc, oci.exceptions.MultipartUploadError):
        causes = [c for c in getattr(exc, "error_causes", []) if is_network_error(c)]
        return describe(causes[0], call, endpoint, region, policy) if causes else None
    return describe(exc, call, endpoint, region, policy) if is_network_error(exc) else None


def describe(
    exc: BaseException, call: str, endpoint: str | None, region: str | None, policy: NetworkPolicy
) -> CloudDDPError:
    where = base_url(failed_url(exc) or endpoint or "the OCI endpoint")
    return CloudDDPError(
        f"cannot reach OCI for {call}: {where} (region {region or 'not set'}): {cause(exc, policy)}; gave up after "
        f"retrying for up to {policy.timeout:g} s ({TIMEOUT_VARIABLE}). Check the region (oci.region, the profile's "
        f"region), the network, proxy and DNS settings of this machine, and CLOUDDDP_OCI_SERVICE_ENDPOINT if you "
        f"set one."
    )
