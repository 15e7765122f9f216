"""Capacity and other errors as each service sends them, and as a provider raises them (tests/failover)."""

from __future__ import annotations

import json

from botocore.exceptions import ClientError
from botocore.parsers import create_parser

from cloudddp.errors import CloudDDPError

# A SageMaker job's FailureReason when no instance could be had (aws/sagemaker-python-sdk v2.257.6
# src/sagemaker/session.py `_check_job_status` raises CapacityError for it; the wording is the service's).
SAGEMAKER_CAPACITY = (
    "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
)


def aws_json_error(code: str, message: str, status: int = 400) -> ClientError:
    """An error as botocore reads a JSON 1.1 service's (SageMaker's protocol) error response."""
    body = json.dumps({"__type": code, "Message": message}).encode()
    response = {"status_code": status, "headers": {"x-amzn-requestid": "r1"}, "body": body}
    parsed = create_parser("json").parse(response, None)
    return ClientError(parsed, "CreateTrainingJob")  # type: ignore[arg-type]


def as_provider_raises(service_error: Exception) -> CloudDDPError:
    """What a provider raises: its own CloudDDPError `from None`, raised while handling the service's error (the
    SageMaker provider's call() and submit() nest two of them)."""
    try:
        try:
            raise service_error
        except Exception as exc:
            raise CloudDDPError(f"could not create the training job: {exc}") from None
    except CloudDDPError as first:
        try:
            raise CloudDDPError(f"{first} Removed what this launch uploaded.") from None
        except CloudDDPError as second:
            return second


def oci_error(status: int, code: str, message: str) -> Exception:
    from oci.exceptions import ServiceError

    return ServiceError(status, code, {"opc-request-id": "r1"}, message)


def kubernetes_forbidden(message: str) -> Exception:
    from kubernetes.client.exceptions import ApiException

    error = ApiException(status=403, reason="Forbidden")
    error.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "reason": "Forbidden"})
    return error
