"""Which errors say "no capacity here", per provider: the one table failover reads (docs/guides/failover.md).

A row names an error as its service sends it and where the service defines it. Three moments:

- `submit`: the service refused the job. Matched on the error's code (botocore's ClientError `Error.Code`, the oci
  SDK's ServiceError `code`), else on the text of the error's chain (a Kubernetes admission message, sbatch's line).
- `failed`: the job ended FAILED before training started, its reason beginning with the row's text.
- `pending`: the job is still pending past `failover.pending_timeout`, its reason holding the row's word.

Anything not in the table (a bad request, missing permissions, the script's own failure) is not capacity: the
job stops with that error and no other target is tried. Standard library only: errors are read by duck typing, so
no provider's SDK is imported here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

Moment = Literal["submit", "failed", "pending"]

BOTOCORE = "boto/botocore botocore/data/sagemaker/2017-07-24/service-2.json (botocore 1.44.8)"
SDK_V2 = "aws/sagemaker-python-sdk v2.257.6 (fc582aaa46faf7b7e16ab1e13840869712174cd0)"
OCI_ERRORS = "OCI API Errors, docs.oracle.com/en-us/iaas/Content/API/References/apierrors.htm"
SLURM_REASONS = "SchedMD/slurm src/common/job_state_reason.c at 00cd61fa0d5921cfb4eef349a084252de9dae1dc"
K8S_TYPES = "kubernetes/api core/v1/types.go at 3fed8b5a8558cb508dd58c8cfb228d04cc9a52a5"
K8S_QUOTA = (
    "kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go at "
    "b1ce15c54586daabffbc79d6ef36feabbf5a0875"
)


@dataclass(frozen=True)
class Row:
    provider: str
    moment: Moment
    error: str  # the code, reason or message text as the service sends it
    source: str  # where the service defines it
    by_code: bool = False  # matched against the error's code, not its text


# fmt: off
TABLE: tuple[Row, ...] = (
    Row("sagemaker", "submit", "ResourceLimitExceeded", f"{BOTOCORE}: CreateTrainingJob's errors, the "
        "ResourceLimitExceeded shape ('You have exceeded an SageMaker resource limit')", by_code=True),
    # The SDK raises its CapacityError for a reason that holds the word anywhere; failover needs the reason to
    # begin with it (FailureReason is "<type>: <message>"): an AlgorithmError's reason quotes the script's output.
    Row("sagemaker", "failed", "CapacityError", f"{SDK_V2} src/sagemaker/session.py `_check_job_status`: a "
        "training job Failed with 'CapacityError' in its FailureReason raises exceptions.CapacityError ('CapacityError: "
        "Unable to provision requested ML compute capacity')"),
    Row("oci", "submit", "LimitExceeded", f"{OCI_ERRORS}: 400, the Oracle-defined limit for the tenancy",
        by_code=True),
    Row("oci", "submit", "QuotaExceeded", f"{OCI_ERRORS}: 400, the administrator-defined quota of the compartment",
        by_code=True),
    Row("kubernetes", "submit", "exceeded quota:", f"{K8S_QUOTA}: the ResourceQuota admission's Forbidden "
        "message"),
    Row("kubernetes", "pending", "Unschedulable", f"{K8S_TYPES}: PodReasonUnschedulable, the PodScheduled "
        "condition's reason when the scheduler cannot place the pod"),
    *(
        Row("slurm", "pending", reason, f"{SLURM_REASONS}: {symbol}")
        for reason, symbol in (
            ("PartitionDown", "WAIT_PART_DOWN"), ("PartitionInactive", "WAIT_PART_INACTIVE"),
            ("PartitionNodeLimit", "WAIT_PART_NODE_LIMIT"), ("ReqNodeNotAvail", "WAIT_NODE_NOT_AVAIL"),
            ("NodeDown", "FAIL_DOWN_NODE"), ("Resources", "WAIT_RESOURCES"),
        )
    ),
)
# fmt: on


def rows(provider: str, moment: Moment) -> list[Row]:
    return [row for row in TABLE if row.provider == provider and row.moment == moment]


def chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it was raised from or during (a provider's CloudDDPError keeps the service's error there,
    `raise ... from None` included), each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def error_code(exc: BaseException) -> str | None:
    """The service's own code: botocore's ClientError (`response['Error']['Code']`), the oci SDK's ServiceError
    (`code`, a str)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = (response.get("Error") or {}).get("Code")
        if isinstance(code, str):
            return code
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) else None


def error_text(exc: BaseException) -> str:
    """What the error says (a Kubernetes ApiException's body holds the admission message)."""
    body = getattr(exc, "body", None)
    return f"{exc} {body}" if isinstance(body, str | bytes) else str(exc)


def at_submit(provider: str, exc: BaseException) -> Row | None:
    """The row a refused submission matches, else None (not capacity: stop)."""
    found = list(chain(exc))
    for row in rows(provider, "submit"):
        for error in found:
            if row.by_code and error_code(error) == row.error:
                return row
            if not row.by_code and row.error in error_text(error):
                return row
    return None


def after_failure(provider: str, reason: str) -> Row | None:
    """The row a job that FAILED before training started matches, by its reason's start."""
    return next((row for row in rows(provider, "failed") if reason.strip().startswith(row.error)), None)


def while_pending(provider: str, reason: str) -> Row | None:
    """The row a pending job's reason matches (a whole word: `ReqNodeNotAvail, UnavailableNodes:n1` matches
    ReqNodeNotAvail; `Priority` matches nothing)."""
    words = set(re.findall(r"[A-Za-z]+", reason))
    return next((row for row in rows(provider, "pending") if row.error in words), None)
