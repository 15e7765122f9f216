"""A Kubernetes job's timeline (`events`), parsed from the records the cluster keeps: the job as `kubectl get
pytorchjob -o json` prints it, its pods as `kubectl get pods -o json` prints them, read through the real client's
deserializer (the typed V1Pod that `list_namespaced_pod` returns).

The PyTorchJob's conditions are worded as the training-operator writes them (kubeflow/training-operator
pkg/controller.v1/pytorch/pytorchjob_controller.go UpdateJobStatus, commit dfa5eadd: "PyTorchJob %s is failed
because %d %s replica(s) failed.", reasons "PyTorchJob" + Created/Running/Failed), with Running set "False" at the
end and its time kept (pkg/util/status.go filterOutCondition, commit 64e39f2a). Container states are Kubernetes
core/v1 ContainerStatus; "Error" and "OOMKilled" are containerd's reasons (pkg/cri/server/helpers.go, commit
4970bd6e).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from kubernetes import client

from cloudddp.providers.base import JobEvent
from cloudddp.providers.kubernetes.timeline import job_events, pod_events


def at(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


PYTORCHJOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
    "metadata": {"name": "resnet", "namespace": "training", "creationTimestamp": "2026-11-29T10:00:00Z"},
    "status": {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
             "message": "PyTorchJob resnet is created.", "lastUpdateTime": "2026-11-29T10:00:01Z",
             "lastTransitionTime": "2026-11-29T10:00:01Z"},
            {"type": "Running", "status": "False", "reason": "PyTorchJobRunning",
             "message": "PyTorchJob training/resnet is running.", "lastUpdateTime": "2026-11-29T10:00:40Z",
             "lastTransitionTime": "2026-11-29T10:00:40Z"},
            {"type": "Failed", "status": "True", "reason": "PyTorchJobFailed",
             "message": "PyTorchJob resnet is failed because 1 Worker replica(s) failed.",
             "lastUpdateTime": "2026-11-29T10:07:00Z", "lastTransitionTime": "2026-11-29T10:07:00Z"},
        ],
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {"failed": 1}},
        "startTime": "2026-11-29T10:00:01Z",
    },
}  # fmt: skip


def container(name: str, state: dict[str, Any], last: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "image": "registry.example.com/train:1", "imageID": "", "ready": "running" in state,
            "restartCount": 1 if last else 0, "state": state, "lastState": last or {}}  # fmt: skip


def pod(name: str, role: str, *statuses: dict[str, Any]) -> dict[str, Any]:
    labels = {"training.kubeflow.org/job-name": "resnet", "training.kubeflow.org/replica-type": role,
              "training.kubeflow.org/replica-index": "0"}  # fmt: skip
    return {"metadata": {"name": name, "namespace": "training", "labels": labels},
            "status": {"phase": "Running", "containerStatuses": list(statuses)}}  # fmt: skip


def typed_pods(*pods: dict[str, Any]) -> list[Any]:
    """The pods as the client's list_namespaced_pod gives them (V1Pod), from the JSON the API server sends."""
    text = json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": list(pods)})
    listed: Any = client.ApiClient().deserialize(text, "V1PodList", "application/json")
    return list(listed.items)


def test_a_pytorchjobs_conditions_give_its_course_with_the_failure_message() -> None:
    assert job_events(PYTORCHJOB) == [
        JobEvent(at("2026-11-29T10:00:00Z"), "", "submitted"),
        JobEvent(at("2026-11-29T10:00:01Z"), "", "created"),
        JobEvent(at("2026-11-29T10:00:40Z"), "", "running"),  # False since the end, its time kept
        JobEvent(at("2026-11-29T10:07:00Z"), "", "failed: PyTorchJob resnet is failed because 1 Worker replica(s) failed."),
    ]  # fmt: skip


def test_conditions_that_do_not_hold_or_have_no_time_are_left_out() -> None:
    running = {"type": "Running", "status": "False", "lastTransitionTime": "2026-11-29T10:00:40Z"}
    resumed = {
        "type": "Suspended",
        "status": "False",
        "reason": "Resumed",
        "lastTransitionTime": "2026-11-29T10:01:00Z",
    }
    restarting = {"type": "Restarting", "status": "True", "reason": "PyTorchJobRestarting",
                  "message": "PyTorchJob resnet is restarting because 1 Worker replica(s) failed."}  # fmt: skip
    job = {"metadata": {"name": "resnet"}, "status": {"conditions": [running, resumed, restarting]}}
    assert job_events(job) == []  # a Running that is False before any end is not the job's course


def test_a_trainjobs_complete_reads_succeeded() -> None:
    job = {"metadata": {"creationTimestamp": "2026-11-29T10:00:00Z"},
           "status": {"conditions": [{"type": "Complete", "status": "True", "reason": "JobSetCompleted",
                                      "message": "jobset completed successfully",
                                      "lastTransitionTime": "2026-11-29T10:09:00Z"}]}}  # fmt: skip
    assert [event.what for event in job_events(job)] == ["submitted", "succeeded"]


def test_each_pods_starts_and_ends_are_its_roles_as_status_names_them() -> None:
    pods = typed_pods(
        pod("resnet-master-0", "master",
            container("pytorch", {"running": {"startedAt": "2026-11-29T10:00:35Z"}})),
        pod("resnet-worker-0", "worker",
            container("pytorch",
                      {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": "2026-11-29T10:03:00Z",
                                      "finishedAt": "2026-11-29T10:06:59Z"}},
                      {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "2026-11-29T10:00:38Z",
                                      "finishedAt": "2026-11-29T10:02:50Z"}}),
            container("sidecar", {"running": {"startedAt": "2026-11-29T10:00:30Z"}})),
        pod("resnet-worker-1", "worker", container("pytorch", {"waiting": {"reason": "ContainerCreating"}})),
    )  # fmt: skip
    assert pod_events(pods, "pytorchjobs", "pytorch", ["Master", "Worker"]) == [
        JobEvent(at("2026-11-29T10:00:35Z"), "Master", "resnet-master-0 started"),
        JobEvent(at("2026-11-29T10:00:38Z"), "Worker", "resnet-worker-0 started"),
        JobEvent(at("2026-11-29T10:02:50Z"), "Worker", "resnet-worker-0 failed (exit 1)"),
        JobEvent(at("2026-11-29T10:03:00Z"), "Worker", "resnet-worker-0 started"),
        JobEvent(at("2026-11-29T10:06:59Z"), "Worker", "resnet-worker-0 failed (exit 137: OOMKilled)"),
    ]


def test_a_trainjob_pod_is_its_replicated_job_and_a_pod_without_a_role_is_itself() -> None:
    done = container("node", {"terminated": {"exitCode": 0, "reason": "Completed",
                                             "startedAt": "2026-11-29T10:00:10Z", "finishedAt": "2026-11-29T10:05:00Z"}})  # fmt: skip
    trainer = {"metadata": {"name": "resnet-node-0-0-abcde", "labels": {"jobset.sigs.k8s.io/jobset-name": "resnet",
                                                                        "jobset.sigs.k8s.io/replicatedjob-name": "node"}},
               "status": {"containerStatuses": [done]}}  # fmt: skip
    stray = {"metadata": {"name": "resnet-extra", "labels": {}}, "status": {"containerStatuses": [done]}}
    assert [(e.node, e.what) for e in pod_events(typed_pods(trainer, stray), "trainjobs", "node", ["node"])] == [
        ("node", "resnet-node-0-0-abcde started"), ("node", "resnet-node-0-0-abcde succeeded"),
        ("resnet-extra", "resnet-extra started"), ("resnet-extra", "resnet-extra succeeded"),
    ]  # fmt: skip
