"""The user's AWS configuration as cloudddp's errors name it: the profile, the endpoint variables.

Shared by the SageMaker provider's clients and the S3 staging stores, below both; no boto3 import.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cloudddp.errors import CloudDDPError

if TYPE_CHECKING:
    from botocore.exceptions import ProfileNotFound


def profile_error(exc: ProfileNotFound) -> CloudDDPError:
    profile = os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or exc.kwargs.get("profile")
    where = os.environ.get("AWS_CONFIG_FILE", "~/.aws/config")
    return CloudDDPError(
        f"the AWS profile {profile!r} (from AWS_PROFILE) is not in {where} or the credentials file. Check the "
        f"spelling (`aws configure list-profiles` lists them), or unset AWS_PROFILE to use the default credentials."
    )


def endpoint_variable(service: str) -> tuple[str, str] | None:
    """The variable that sets this service's endpoint, and its value (boto3's service-specific one first)."""
    for name in (f"AWS_ENDPOINT_URL_{service.upper()}", "AWS_ENDPOINT_URL"):
        if os.environ.get(name):
            return name, os.environ[name]
    return None
