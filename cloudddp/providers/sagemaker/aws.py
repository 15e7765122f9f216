"""boto3 sessions and clients that fail fast and in one paragraph.

Every client gets a botocore `Config` with bounded connect/read timeouts and a bounded
number of attempts, so an unreachable endpoint ends in seconds, not minutes. Every AWS
failure (a misspelt AWS_PROFILE, an endpoint URL without a scheme, expired credentials,
an HTML error page from something that is not AWS) becomes one `CloudDDPError` that
names the setting and its value.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
)
from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url

from cloudddp import aws_limits
from cloudddp.aws_settings import endpoint_variable, profile_error
from cloudddp.errors import CloudDDPError

CREDENTIALS_HELP = (
    "Configure them with `aws configure` (or `aws sso login --profile NAME` and AWS_PROFILE=NAME), or set "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials)."
)
CREDENTIAL_CODES = {
    "InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch", "ExpiredToken",
    "ExpiredTokenException", "InvalidToken", "InvalidAccessKeyId", "RequestExpired",
}  # fmt: skip


def client_config() -> Config:
    """Bounded time for every AWS call (cloudddp/aws_limits.py)."""
    return Config(**aws_limits.botocore_config_arguments())


def open_session(region: str) -> Any:
    try:
        return boto3.Session(region_name=region)
    except ProfileNotFound as exc:
        raise profile_error(exc) from None


# The endpoint variables cloudddp's clients read (boto3's service-specific names: AWS_ENDPOINT_URL_<SERVICE ID>).
ENDPOINT_VARIABLES = (
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS",
    "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS",
)  # fmt: skip


def check_endpoint_variables(environ: Mapping[str, str]) -> None:
    """Endpoint URLs botocore would refuse (no scheme, no host), found offline: the dry run reports them too."""
    for name in ENDPOINT_VARIABLES:
        value = environ.get(name)
        if value and not (is_valid_endpoint_url(value) or is_valid_ipv6_endpoint_url(value)):
            raise CloudDDPError(
                f"{name}={value!r} is not a usable endpoint URL: it needs a scheme and a host, like "
                f"http://localhost:4566 or https://sagemaker.us-east-1.amazonaws.com."
            )


def make_client(session: Any, service: str, region: str) -> Any:
    try:
        return session.client(service, region_name=region, config=client_config())
    except ProfileNotFound as exc:
        raise profile_error(exc) from None
    except ValueError as exc:  # botocore: "Invalid endpoint: localhost:4566"
        setting = endpoint_variable(service)
        named = f"{setting[0]}={setting[1]!r}" if setting else "the endpoint URL of your AWS config profile"
        raise CloudDDPError(
            f"{named} is not a usable endpoint URL ({exc}): it needs a scheme and a host, like "
            f"http://localhost:4566 or https://sagemaker.{region}.amazonaws.com."
        ) from None
    except BotoCoreError as exc:
        raise translate(exc, f"open the {service} client") from None


def summarize_body(text: str) -> str:
    """An HTML error page as its title (or first heading), at most 200 characters; other text unchanged."""
    if not re.search(r"<\s*(!doctype|html|head|body)\b", text, re.I):
        return text
    match = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S) or re.search(
        r"<h1[^>]*>(.*?)</h1>", text, re.I | re.S
    )
    inner = match.group(1) if match else text
    plain = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", inner)).split())[:200]
    return f"an HTML page ({plain or 'no title'}) instead of an AWS answer"


def endpoint_of(exc: Exception) -> str:
    return str(getattr(exc, "kwargs", {}).get("endpoint_url", "") or "")


def translate(exc: Exception, action: str) -> CloudDDPError:
    """An AWS failure as one paragraph a person can act on."""
    if isinstance(exc, ProfileNotFound):
        return profile_error(exc)
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return CloudDDPError(f"no AWS credentials found while trying to {action}. {CREDENTIALS_HELP}")
    if isinstance(exc, NoRegionError):
        return CloudDDPError("no AWS region: pass --region or set AWS_REGION.")
    if isinstance(exc, (ConnectTimeoutError, ReadTimeoutError, EndpointConnectionError)):
        endpoint = endpoint_of(exc) or "the AWS endpoint"
        kind = "did not answer in time" if isinstance(exc, ReadTimeoutError) else "could not be reached"
        return CloudDDPError(
            f"{endpoint} {kind} while trying to {action} (gave up after {aws_limits.time_bound()}). Check the network, "
            f"the region and AWS_ENDPOINT_URL."
        )
    if isinstance(exc, ClientError):
        error = exc.response.get("Error") or {}
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
        code = str(error.get("Code") or status)
        message = summarize_body(str(error.get("Message") or ""))
        if code in CREDENTIAL_CODES:
            return CloudDDPError(f"AWS rejected your credentials ({code}) while trying to {action}. {CREDENTIALS_HELP}")
        if code in ("AccessDenied", "AccessDeniedException"):
            return CloudDDPError(f"AWS denied access while trying to {action} ({code}: {message}).")
        if not message:
            message = summarize_body(str(exc))
        return CloudDDPError(f"AWS refused to {action}: {code}: {message}")
    return CloudDDPError(f"AWS call failed while trying to {action}: {summarize_body(str(exc))}")
