"""A `trainer.kubeflow.org/v1alpha1` TrainJob (Kubeflow Trainer v2) against a ClusterTrainingRuntime.

The runtime (`torch-distributed`) owns the pod template: its replicated job `trainer-node` runs a
container named `trainer`, and Trainer gives each node PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
PET_MASTER_ADDR and PET_MASTER_PORT. The TrainJob sets the image, command, node count and resources,
and adds volumes, node selector and tolerations through `podSpecOverrides`, which at this API
version can only amend containers the runtime already has (no new init containers, no image pull
secrets): kubeflow/trainer pkg/apis/trainer/v1alpha1/trainjob_types.go, commit a55f03a8ccb7798a741ff3c4af502d367ed0f6d2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cloudddp.errors import CloudDDPError
from cloudddp.providers.kubernetes.manifest import (
    TRAINJOB,
    Storage,
    command,
    environment,
    job_name,
    require_image,
    resources,
)
from cloudddp.providers.kubernetes.settings import KubernetesSettings

if TYPE_CHECKING:
    from cloudddp.spec import JobSpec

TRAINER_JOB = "trainer-node"
TRAINER_CONTAINER = "trainer"


def unsupported(spec: JobSpec, settings: KubernetesSettings, storage: Storage) -> None:
    """What a TrainJob cannot carry at v1alpha1: say so instead of dropping it."""
    problems = []
    if storage.init_containers:
        problems.append("s3:// inputs (they need an init container; use pvc:// inputs or the v1 API)")
    if settings.image_pull_secrets:
        problems.append("image_pull_secrets (set them on the runtime or the namespace's service account)")
    if settings.elastic or spec.min_nodes is not None:
        problems.append("elastic (use the v1 PyTorchJob API for an elasticPolicy)")
    if settings.secret_env:
        # torch.go copies trainer.env as name/value pairs only: a secretKeyRef would silently vanish.
        problems.append("secret_env (the torch plugin drops valueFrom from trainer.env; use the v1 API)")
    if problems:
        raise CloudDDPError("kubernetes.kubeflow_api='trainer-v2' cannot carry: " + "; ".join(problems) + ".")


def overrides(settings: KubernetesSettings, storage: Storage) -> list[dict[str, Any]]:
    override: dict[str, Any] = {"targetJobs": [{"name": TRAINER_JOB}]}
    if storage.volumes:
        override["volumes"] = storage.volumes
        override["containers"] = [{"name": TRAINER_CONTAINER, "volumeMounts": storage.mounts}]
    if settings.node_selector:
        override["nodeSelector"] = settings.node_selector
    if settings.tolerations:
        override["tolerations"] = [t.model_dump(exclude_none=True) for t in settings.tolerations]
    if settings.service_account:
        override["serviceAccountName"] = settings.service_account
    return [override] if len(override) > 1 else []


def trainjob(spec: JobSpec, settings: KubernetesSettings, storage: Storage, namespace: str) -> dict[str, Any]:
    unsupported(spec, settings, storage)
    group, version, _, kind = TRAINJOB
    argv, args = command(spec, settings)
    trainer: dict[str, Any] = {
        "image": require_image(settings),
        # The runtime's container has its own working directory: start the launcher from ours.
        "command": ["sh", "-c", 'cd "$0" && exec "$@"', settings.working_dir, *argv],
        "args": args,
        "env": environment(spec, settings, storage),
        "numNodes": spec.nodes,
    }
    if spec.nproc_per_node is not None:
        trainer["numProcPerNode"] = spec.nproc_per_node
    if resources(settings):
        trainer["resourcesPerNode"] = resources(settings)
    job_spec: dict[str, Any] = {
        "runtimeRef": {"name": settings.runtime, "apiGroup": group, "kind": "ClusterTrainingRuntime"},
        "trainer": trainer,
    }
    if overrides(settings, storage):
        job_spec["podSpecOverrides"] = overrides(settings, storage)
    return {
        "apiVersion": f"{group}/{version}",
        "kind": kind,
        "metadata": {
            "name": job_name(spec),
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "cloudddp"},
        },
        "spec": job_spec,
    }
