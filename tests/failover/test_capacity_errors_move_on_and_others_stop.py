"""Every row of cloudddp/capacity.py's table, matched by its error as the service sends it (botocore's parsed JSON
1.1 error, the oci SDK's ServiceError, the Kubernetes client's ApiException, Slurm's reason as `status` shows it),
and errors that are not capacity never matched."""

from __future__ import annotations

import pytest
from helpers.capacity_errors import (
    SAGEMAKER_CAPACITY,
    as_provider_raises,
    aws_json_error,
    kubernetes_forbidden,
    oci_error,
)

from cloudddp import capacity
from cloudddp.errors import CloudDDPError

QUOTA_MESSAGE = (
    'pods "job-worker-0" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, used: '
    "requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4"
)
SUBMIT_CASES = {
    ("sagemaker", "ResourceLimitExceeded"): aws_json_error(
        "ResourceLimitExceeded", "The account-level service limit 'ml.p4d.24xlarge for training job usage' is 0"
    ),
    ("oci", "LimitExceeded"): oci_error(400, "LimitExceeded", "Fulfilling this request exceeds the limit"),
    ("oci", "QuotaExceeded"): oci_error(400, "QuotaExceeded", "Fulfilling this request exceeds the quota"),
    ("kubernetes", "exceeded quota:"): kubernetes_forbidden(QUOTA_MESSAGE),
}
NOT_CAPACITY_AT_SUBMIT = [
    ("sagemaker", aws_json_error("ValidationException", "1 validation error detected: Value 'x' at 'roleArn'")),
    ("sagemaker", aws_json_error("ThrottlingException", "Rate exceeded")),
    ("sagemaker", aws_json_error("AccessDeniedException", "not authorized to perform: sagemaker:CreateTrainingJob")),
    ("sagemaker", aws_json_error("ResourceInUse", "Training job names must be unique")),
    ("oci", oci_error(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found")),
    ("oci", oci_error(429, "TooManyRequests", "Too many requests for the user")),
    ("kubernetes", kubernetes_forbidden('pytorchjobs is forbidden: User "u" cannot create resource')),
    ("slurm", CloudDDPError("sbatch: error: Batch job submission failed: Invalid account or account/partition")),
    ("local", CloudDDPError("entry_point 'x.py': the training script does not exist")),
]


def test_every_submit_row_has_a_case_here() -> None:
    rows = {(row.provider, row.error) for row in capacity.TABLE if row.moment == "submit"}
    assert rows == set(SUBMIT_CASES)


@pytest.mark.parametrize("key", list(SUBMIT_CASES), ids=lambda key: f"{key[0]}-{key[1]}")
def test_a_capacity_refusal_at_submit_moves_on(key: tuple[str, str]) -> None:
    provider, error = key
    row = capacity.at_submit(provider, as_provider_raises(SUBMIT_CASES[key]))
    assert row is not None and row.error == error and row.source


@pytest.mark.parametrize("key", list(SUBMIT_CASES), ids=lambda key: f"{key[0]}-{key[1]}")
def test_a_capacity_error_of_another_provider_is_not_this_ones(key: tuple[str, str]) -> None:
    other = "local" if key[0] != "local" else "slurm"
    assert capacity.at_submit(other, as_provider_raises(SUBMIT_CASES[key])) is None


@pytest.mark.parametrize(("provider", "error"), NOT_CAPACITY_AT_SUBMIT, ids=lambda value: str(value)[:40])
def test_any_other_refusal_stops(provider: str, error: Exception) -> None:
    assert capacity.at_submit(provider, as_provider_raises(error)) is None


def test_the_message_alone_does_not_make_a_code_row_match() -> None:
    """ResourceLimitExceeded is matched on botocore's parsed code: a message that merely names it is not."""
    assert capacity.at_submit("sagemaker", CloudDDPError("ResourceLimitExceeded is documented")) is None


def test_a_sagemaker_job_failed_for_capacity_moves_on() -> None:
    row = capacity.after_failure("sagemaker", SAGEMAKER_CAPACITY)
    assert row is not None and row.error == "CapacityError"


@pytest.mark.parametrize(
    "reason",
    [
        "AlgorithmError: ExecuteUserScriptError: exit code 3",
        "ClientError: Please ensure the instance type is valid. CapacityError",  # only a reason that begins so
        "InternalServerError: We encountered an internal error.",
        "",
    ],
)
def test_any_other_failure_stops(reason: str) -> None:
    assert capacity.after_failure("sagemaker", reason) is None


PENDING_CASES = {
    ("kubernetes", "Unschedulable"): "Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
    ("slurm", "PartitionDown"): "PENDING PartitionDown",
    ("slurm", "PartitionInactive"): "PENDING PartitionInactive",
    ("slurm", "PartitionNodeLimit"): "PENDING PartitionNodeLimit",
    ("slurm", "ReqNodeNotAvail"): "PENDING ReqNodeNotAvail, UnavailableNodes:node[1-2]",
    ("slurm", "NodeDown"): "PENDING NodeDown",
    ("slurm", "Resources"): "PENDING Resources",
}


def test_every_pending_row_has_a_case_here() -> None:
    assert {(row.provider, row.error) for row in capacity.TABLE if row.moment == "pending"} == set(PENDING_CASES)


@pytest.mark.parametrize("key", list(PENDING_CASES), ids=lambda key: f"{key[0]}-{key[1]}")
def test_a_job_that_cannot_be_scheduled_moves_on(key: tuple[str, str]) -> None:
    row = capacity.while_pending(key[0], PENDING_CASES[key])
    assert row is not None and row.error == key[1]


@pytest.mark.parametrize(
    ("provider", "reason"),
    [("slurm", "PENDING Priority"), ("slurm", "PENDING Dependency"), ("slurm", "PENDING JobHeldUser"),
     ("slurm", "PENDING BeginTime"), ("slurm", "PENDING PartitionDownish"), ("kubernetes", "ContainerCreating"),
     ("sagemaker", "Starting"), ("local", "")],
)  # fmt: skip
def test_a_job_waiting_for_anything_else_is_left_waiting(provider: str, reason: str) -> None:
    assert capacity.while_pending(provider, reason) is None


def test_each_row_names_its_source() -> None:
    for row in capacity.TABLE:
        sources = ("botocore", "aws/sagemaker-python-sdk", "docs.", "SchedMD/slurm", "kubernetes/")
        assert any(where in row.source for where in sources), row
