"""A PyTorchJob's or TrainJob's course, for the dashboard's timeline (`Provider.events`), from what the cluster
records: the job's creationTimestamp and status.conditions for the job, each pod's container statuses for its node.

Conditions (a custom object's: RFC 3339 strings): a PyTorchJob's Created, Running, Restarting, Succeeded, Failed, a
TrainJob's Suspended, Created, Complete, Failed, each at its lastTransitionTime. Only those that are "True" happened
and still hold, except a PyTorchJob's Running: the training-operator sets it "False" when the job succeeds or fails
and keeps its time (kubeflow/training-operator pkg/util/status.go filterOutCondition, commit 64e39f2a).
Pods (the typed client's V1Pod: datetimes): the training container's lastState and state, running.startedAt and
terminated.startedAt/finishedAt/exitCode/reason (Kubernetes core/v1 ContainerStateRunning/Terminated). The node is
the pod's role as `status` names it (a replicaStatuses key, a jobsStatus name), found by the operator's label: the
training-operator's replica-type label is the type in lower case (pkg/controller.v1/common/pod.go ReconcilePods,
commit 141c1501), JobSet's replicatedjob-name the replicated job's name (JobSet's ReplicatedJobNameKey).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from cloudddp.providers.base import JobEvent

ROLE_LABELS = {
    "pytorchjobs": "training.kubeflow.org/replica-type",
    "trainjobs": "jobset.sigs.k8s.io/replicatedjob-name",
}
ENDS = ("Succeeded", "Complete", "Failed")
WITH_MESSAGE = ("Restarting", "Failed")  # their messages say which replicas failed
# The container runtime's reasons for any ending (containerd pkg/cri/server/helpers.go completeExitReason and
# errorExitReason, commit 4970bd6e): they say no more than the exit code; OOMKilled, StartError... do.
PLAIN_REASONS = ("Completed", "Error")


def seconds(value: Any) -> float | None:
    """A time as the typed client gives it (datetime) or a custom object carries it (RFC 3339), else None."""
    if isinstance(value, str) and value:
        value = dt.datetime.fromisoformat(value)
    return value.timestamp() if isinstance(value, dt.datetime) else None


def job_events(job: dict[str, Any]) -> list[JobEvent]:
    """Submitted (creationTimestamp), then each condition that happened, at its lastTransitionTime."""
    created = seconds((job.get("metadata") or {}).get("creationTimestamp"))
    events = [JobEvent(created, "", "submitted")] if created is not None else []
    conditions = (job.get("status") or {}).get("conditions") or []
    ended = any(c.get("type") in ENDS and c.get("status") == "True" for c in conditions)
    for condition in conditions:
        kind, when = condition.get("type", ""), seconds(condition.get("lastTransitionTime"))
        if when is None or not (condition.get("status") == "True" or (kind == "Running" and ended)):
            continue
        what = "succeeded" if kind == "Complete" else kind.lower()
        detail = condition.get("message") or condition.get("reason")
        events.append(JobEvent(when, "", f"{what}: {detail}" if kind in WITH_MESSAGE and detail else what))
    return events


def container_end(terminated: Any) -> str:
    code, reason = terminated.exit_code, terminated.reason
    if code == 0:
        return "succeeded"
    return f"failed (exit {code}: {reason})" if reason and reason not in PLAIN_REASONS else f"failed (exit {code})"


def pod_events(pods: list[Any], plural: str, container: str, nodes: list[str]) -> list[JobEvent]:
    """Each pod's starts and ends of its `container`, the node named as in `nodes`, the pod in `what`."""
    roles = {node.lower(): node for node in nodes}
    events = []
    for pod in pods:
        name = pod.metadata.name
        role = (pod.metadata.labels or {}).get(ROLE_LABELS[plural], "")
        node = roles.get(role.lower(), role) or name
        for status in (pod.status.container_statuses if pod.status else None) or []:
            for state in (status.last_state, status.state) if status.name == container else ():
                moment = state and (state.running or state.terminated)
                started = seconds(moment.started_at) if moment else None
                if started is not None:
                    events.append(JobEvent(started, node, f"{name} started"))
                finished = seconds(state.terminated.finished_at) if state and state.terminated else None
                if finished is not None:
                    events.append(JobEvent(finished, node, f"{name} {container_end(state.terminated)}"))
    return events
