"""A `trainer.kubeflow.org/v1alpha1` TrainJob (Kubeflow Trainer v2) against a ClusterTrainingRuntime.

Rendered for Trainer's release v2.3.0 (kubeflow/trainer tag v2.3.0, commit
658725bdae5c7e3a0854d93ac6ff492e109a22ab). The runtime (`torch-distributed`,
manifests/base/runtimes/torch_distributed.yaml) owns the pod template: its replicated job `node` runs a
container named `node` (pkg/constants/constants.go: Node), and the torch plugin gives each node
PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR (`<job>-node-0-0.<job>`) and
PET_MASTER_PORT (pkg/runtime/framework/plugins/torch/torch.go). The TrainJob sets the image, command,
env (secretKeyRefs kept: pkg/apply/apply.go EnvVar), node count and resources; volumes, node selector,
tolerations, service account and image pull secrets go in one `runtimePatches` entry, which may only
amend containers the runtime already has (the validating webhook,
pkg/runtime/framework/plugins/jobset/jobset.go, also wants the manager as a domain-prefixed path and
no env patched into the `node` container). Pre-release Trainer (before v2.0.0) named these
`trainer-node`/`trainer` and took `podSpecOverrides`; v2.0-v2.1 took `podSpecOverrides` too.
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

TRAINER_JOB = "node"
TRAINER_CONTAINER = "node"
PATCH_MANAGER = "cloudddp.io/launch"  # runtimePatches[].manager: a domain-prefixed path (jobset.go)


def unsupported(spec: JobSpec, settings: KubernetesSettings, storage: Storage) -> None:
    """What a TrainJob cannot carry at v2.3.0: say so instead of dropping it."""
    problems = []
    if storage.init_containers:
        problems.append("s3:// inputs (they need an init container, and a runtime patch may only amend the "
                        "runtime's own containers; use pvc:// inputs or the v1 API)")  # fmt: skip
    if settings.elastic or spec.min_nodes is not None:
        problems.append("elastic (use the v1 PyTorchJob API for an elasticPolicy)")
    if problems:
        raise CloudDDPError("kubernetes.kubeflow_api='trainer-v2' cannot carry: " + "; ".join(problems) + ".")


def runtime_patches(settings: KubernetesSettings, storage: Storage) -> list[dict[str, Any]]:
    """One `runtimePatches` entry for the runtime's `node` job, or none when there is nothing to patch."""
    pod: dict[str, Any] = {}
    if storage.volumes:
        pod["volumes"] = storage.volumes
        pod["containers"] = [{"name": TRAINER_CONTAINER, "volumeMounts": storage.mounts}]
    if settings.node_selector:
        pod["nodeSelector"] = settings.node_selector
    if settings.tolerations:
        pod["tolerations"] = [t.model_dump(exclude_none=True) for t in settings.tolerations]
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    if settings.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": name} for name in settings.image_pull_secrets]
    if not pod:
        return []
    job = {"name": TRAINER_JOB, "template": {"spec": {"template": {"spec": pod}}}}
    return [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}]


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
    patches = runtime_patches(settings, storage)
    if patches:
        job_spec["runtimePatches"] = patches
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
