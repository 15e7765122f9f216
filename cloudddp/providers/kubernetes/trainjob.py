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
no env patched into the `node` container). So s3:// inputs, which a PyTorchJob pulls in an init
container, are pulled by the `node` container itself before it execs the launcher (`node_command`).

Older releases take the same pod fields in another place (`kubernetes.trainer_release`; trainjob_types.go
and jobset.go's Validate at each tag): v2.1.0 (commit 73c9bece) in `podTemplateOverrides[].spec`, v2.0.1
(commit 332ad393) in `podSpecOverrides[]` itself, which has no imagePullSecrets. Both name the runtime's
job in `targetJobs`, and their webhooks refuse the same things runtimePatches' does. Job and container are
`node` at both tags (constants.go). Pre-release Trainer (before v2.0.0) named them `trainer-node`/`trainer`.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from cloudddp.cluster.kubeflow import nproc_per_node_for
from cloudddp.errors import CloudDDPError
from cloudddp.providers.kubernetes.manifest import (
    TRAINJOB,
    DerivedName,
    Storage,
    command,
    environment,
    escaped_container,
    job_name,
    pod_placement,
    require_image,
    resources,
)
from cloudddp.providers.kubernetes.settings import DEFAULT_MAX_RUNTIME, DNS_1035_MAX, KubernetesSettings

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

TRAINER_JOB = "node"
TRAINER_CONTAINER = "node"
PATCH_MANAGER = "cloudddp.io/launch"  # runtimePatches[].manager: a domain-prefixed path (jobset.go)
# The pull's own variables (S3 endpoint, region, keys) sit in the node container under this prefix and are
# handed to the pull alone: the launcher and the training processes never see them.
PULL_PREFIX = "CLOUDDDP_PULL_"


# Settings a TrainJob has no field for, at any release (trainjob_types.go TrainJobSpec, and RuntimePatch's PodSpecPatch
# from v2.2.0, at v2.0.1, v2.1.0, v2.2.0 and v2.3.0): the ClusterTrainingRuntime's JobSet decides them. There, JobSet
# (kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go Default, v0.12.0, commit f22e565a) makes restartPolicy
# OnFailure, and each Job keeps Kubernetes' backoffLimit (6) unless the runtime sets one.
RUNTIME_OWNED = {
    "restart_policy": "the runtime's JobSet sets the pods' restartPolicy (OnFailure unless it says otherwise)",
    "backoff_limit": "the runtime's Jobs set backoffLimit",
    "ttl_seconds_after_finished": "the runtime's JobSet sets ttlSecondsAfterFinished",
}


def unsupported(spec: JobSpec, settings: KubernetesSettings) -> None:
    """What a TrainJob of the chosen release cannot carry: say so instead of dropping it."""
    problems = []
    if settings.elastic or spec.min_nodes is not None:
        problems.append("elastic (use the v1 PyTorchJob API for an elasticPolicy)")
    if settings.trainer_release == "v2.0" and settings.image_pull_secrets:
        problems.append("image_pull_secrets (podSpecOverrides has no imagePullSecrets; they came with v2.1)")
    # Given at all, even as its default value: the TrainJob would run with the runtime's, not the one written.
    given = [
        name for name in RUNTIME_OWNED if name in settings.model_fields_set and getattr(settings, name) is not None
    ]
    problems += [f"kubernetes.{name} ({RUNTIME_OWNED[name]}; set it there, or use kubeflow_api v1)" for name in given]
    if settings.trainer_release in ("v2.0", "v2.1") and spec.max_runtime is not None:
        # Only a job without one passes: v2.0/v2.1 have nowhere to put it.
        problems.append(f"max_runtime={spec.max_runtime} (spec.activeDeadlineSeconds came with Trainer v2.2)")
    if problems:
        raise CloudDDPError(
            f"kubernetes.kubeflow_api='trainer-v2' with trainer_release={settings.trainer_release!r} cannot carry: "
            + "; ".join(problems) + "."
        )  # fmt: skip


# What the torch plugin sets on each node and its webhook refuses in spec.trainer.env (kubeflow/trainer
# pkg/runtime/framework/plugins/torch/torch.go Validate, constants.go TorchRunReservedEnvNames: the same five at
# v2.0.1 commit 332ad393, v2.1.0 commit 73c9bece, v2.2.0 commit dc7656ad and v2.3.0 commit 658725bd).
TORCHRUN_RESERVED = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")


def refuse_reserved_env(env: list[dict[str, Any]]) -> None:
    """A variable the runtime sets itself: Trainer's webhook would refuse the TrainJob when it is created."""
    item = next((item for item in env if item["name"] in TORCHRUN_RESERVED), None)
    if item:
        reserved, where = item["name"], "kubernetes.secret_env" if "valueFrom" in item else "environment"
        raise CloudDDPError(
            f"{where}.{reserved}: a TrainJob may not set {reserved}; Trainer's torch runtime sets it on each node "
            f"({', '.join(TORCHRUN_RESERVED)}) and its webhook refuses a job that sets one. Leave it out: the node "
            f"count, processes per node, rank and master come from --nodes and --nproc-per-node."
        )


def pod_overrides(settings: KubernetesSettings, storage: Storage) -> dict[str, Any]:
    """What the runtime's `node` pods need beyond the trainer fields, in core/v1 PodSpec names; {} for nothing."""
    pod: dict[str, Any] = {}
    if storage.volumes:
        pod["volumes"] = storage.volumes
        pod["containers"] = [{"name": TRAINER_CONTAINER, "volumeMounts": storage.mounts}]
    pod.update(pod_placement(settings))
    return pod


def overrides(release: str, pod: dict[str, Any]) -> dict[str, Any]:
    """The TrainJob spec field carrying `pod` to the `node` job, in the form `release` takes ({}: nothing)."""
    if not pod:
        return {}
    target = [{"name": TRAINER_JOB}]
    if release == "v2.0":
        return {"podSpecOverrides": [{"targetJobs": target, **pod}]}
    if release == "v2.1":
        return {"podTemplateOverrides": [{"targetJobs": target, "spec": pod}]}
    job = {"name": TRAINER_JOB, "template": {"spec": {"template": {"spec": pod}}}}
    patch = {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}
    return {"runtimePatches": [patch]}


def node_command(settings: KubernetesSettings, storage: Storage, argv: list[str]) -> tuple[list[str], list[Any]]:
    """The `node` container's command, and the pull's variables to add to its env.

    The runtime's container has its own working directory, so the command starts the launcher from ours.
    With s3:// inputs it first runs the pull a PyTorchJob runs as its init container (same argv; jobset.go
    refuses an init container the runtime lacks): the pull's variables come in as PULL_PREFIX + NAME and are
    given their own names for the pull alone, then unset before `exec`. A failed pull ends the container
    with the pull's exit code before the launcher starts; a container restarted in place keeps what it
    pulled (pull_inputs' record of a complete pull) and calls no S3.
    """
    if not storage.init_containers:
        return ["sh", "-c", 'cd "$0" && exec "$@"', settings.working_dir, *argv], []
    (pull,) = storage.init_containers  # storage_for makes at most one: the s3:// puller
    env = pull.get("env", [])
    names = [item["name"] for item in env]
    handed = " ".join(f'{name}="${PULL_PREFIX}{name}"' for name in names)
    pull_step = f"{handed} {shlex.join(pull['command'])}".strip()
    unset = f"unset {' '.join(PULL_PREFIX + name for name in names)} && " if names else ""
    script = f'cd "$0" && {pull_step} && {unset}exec "$@"'
    return ["sh", "-c", script, settings.working_dir, *argv], [
        {**item, "name": PULL_PREFIX + item["name"]} for item in env
    ]


def pod_names(nodes: int) -> DerivedName:
    """The longest pod name JobSet derives for the TrainJob's `node` job, which it checks before creating anything.

    The TrainJob's name must be a DNS-1035 label of at most 63 characters: from kubeflow/trainer v2.1.0 the CRD's
    CEL rules (pkg/apis/trainer/v1alpha1/trainjob_types.go, tag v2.3.0, commit
    658725bdae5c7e3a0854d93ac6ff492e109a22ab; same at v2.1.0, commit 73c9bece), at v2.0.1 the webhook
    (pkg/webhooks/trainjob_webhook.go ValidateCreate, IsDNS1035Label; commit 332ad393). The JobSet has the TrainJob's
    name and runs the `node` job once (replicas 1) with `numNodes` indexed pods (trainer
    pkg/runtime/framework/plugins/jobset/jobset.go SyncParallelCount, v2.3.0). JobSet's webhook (kubernetes-sigs/jobset
    pkg/webhooks/jobset_webhook.go ValidateCreate, tag v0.12.0, commit f22e565ac3cc3265c7c45ef67ecffdc689af5d77, the
    release trainer v2.3.0 requires; the same check at v0.8.2 and v0.10.1 for v2.0.1 and v2.1.0) refuses a JobSet
    whose longest pod name, placement.GenPodName `<jobset>-<job>-<job index>-<pod index>` + "-abcde", is not a
    DNS-1035 label of at most 63 characters. Refused there, the TrainJob would exist and never start.
    """
    why = (
        f"JobSet names each pod '<name>-{TRAINER_JOB}-0-<index>-<5 random characters>' and refuses a job whose pod "
        f"names would not be DNS-1035 labels of at most {DNS_1035_MAX} characters"
    )
    return DerivedName("TrainJob", f"-{TRAINER_JOB}-0-{nodes - 1}-abcde", why, nodes)


def processes_per_node(spec: JobSpec, settings: KubernetesSettings) -> dict[str, Any]:
    """`trainer.numProcPerNode` for the release: {} to leave it to the runtime.

    Without it Trainer runs `auto` on a GPU pod and one process per requested CPU on a CPU pod (torch.go
    EnforceMLPolicy, v2.0.1 to v2.3.0), so cloudddp's default is written out (nproc_per_node_for). From v2.2.0
    (commit dc7656ad) the field is an int32, and `auto` is what leaving it out means; v2.0.1 and v2.1.0 take
    an int or `auto`, `cpu`, `gpu` (IntOrString, checked by the torch plugin's Validate).
    """
    nproc = nproc_per_node_for(spec.nproc_per_node, settings.gpus)
    if settings.trainer_release in ("v2.0", "v2.1") or isinstance(nproc, int):
        return {"numProcPerNode": nproc}
    if nproc == "auto":
        return {}
    raise CloudDDPError(
        f"nproc_per_node={nproc!r}: a TrainJob for trainer_release={settings.trainer_release!r} (Trainer v2.2 and "
        f"later) takes numProcPerNode as a number only; give a number (--nproc-per-node N), or auto (the runtime's "
        f"default: one process per GPU, else one per requested CPU)."
    )


def trainjob(spec: JobSpec, settings: KubernetesSettings, storage: Storage, namespace: str) -> dict[str, Any]:
    unsupported(spec, settings)
    group, version, _, kind = TRAINJOB
    argv, args = command(spec, settings)
    node, pull_env = node_command(settings, storage, argv)
    trainer: dict[str, Any] = {
        "image": require_image(settings),
        "command": node,
        "args": args,
        "env": environment(spec, settings, storage) + pull_env,
        "numNodes": spec.nodes,
    }
    refuse_reserved_env(trainer["env"])
    trainer.update(processes_per_node(spec, settings))
    if resources(settings):
        trainer["resourcesPerNode"] = resources(settings)
    job_spec: dict[str, Any] = {
        "runtimeRef": {"name": settings.runtime, "apiGroup": group, "kind": "ClusterTrainingRuntime"},
        "trainer": escaped_container(trainer),  # the kubelet expands $(VAR) in its command, args and env
    }
    if settings.trainer_release not in ("v2.0", "v2.1"):
        # TrainJobSpec.ActiveDeadlineSeconds (minimum 1) from v2.2.0 (commit dc7656ad), as in v2.3.0: the
        # controller fails the TrainJob with DeadlineExceeded once it has run that long (trainjob_controller.go).
        job_spec["activeDeadlineSeconds"] = spec.runtime_limit(DEFAULT_MAX_RUNTIME)
    job_spec.update(overrides(settings.trainer_release, pod_overrides(settings, storage)))
    return {
        "apiVersion": f"{group}/{version}",
        "kind": kind,
        "metadata": {
            "name": job_name(spec, pod_names(spec.nodes)),
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "cloudddp"},
        },
        "spec": job_spec,
    }
