"""A `kubeflow.org/v1` PyTorchJob (training-operator) for a job spec.

Static jobs: one Master and N-1 Workers; the operator gives every pod MASTER_ADDR=<job>-master-0,
RANK, WORLD_SIZE and PET_*. Elastic jobs (`kubernetes.elastic`): Workers only, with an
`elasticPolicy` (c10d or etcd rendezvous, min/max replicas); the operator's rendezvous endpoint
defaults to <job>-worker-0 (pkg/controller.v1/pytorch/elastic.go, tag v1.9.0).
"""

from __future__ import annotations

import copy
import secrets
from typing import TYPE_CHECKING, Any

from cloudddp.cluster.kubeflow import C10D_DEFAULT_PORT, ETCD_DEFAULT_PORT, nproc_per_node_for
from cloudddp.cluster.plan import parse_port, split_host_port
from cloudddp.errors import CloudDDPError
from cloudddp.providers.kubernetes.manifest import (
    PYTORCHJOB,
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
from cloudddp.providers.kubernetes.settings import (
    DEFAULT_MAX_RUNTIME,
    DNS_1035_MAX,
    ElasticSettings,
    KubernetesSettings,
)

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec


def pod_template(spec: JobSpec, settings: KubernetesSettings, storage: Storage) -> dict[str, Any]:
    argv, args = command(spec, settings)
    container: dict[str, Any] = {
        "name": "pytorch",  # the operator finds the training container by this name
        "image": require_image(settings),
        "command": argv,
        "args": args,
        "workingDir": settings.working_dir,
        "env": environment(spec, settings, storage),
    }
    if resources(settings):
        container["resources"] = resources(settings)
    if storage.mounts:
        container["volumeMounts"] = storage.mounts
    pod: dict[str, Any] = {"containers": [escaped_container(container)]}
    if storage.init_containers:
        pod["initContainers"] = [escaped_container(init) for init in storage.init_containers]
    if storage.volumes:
        pod["volumes"] = storage.volumes
    pod.update(pod_placement(settings))
    return {"spec": pod}


def replica(count: int, template: dict[str, Any], settings: KubernetesSettings) -> dict[str, Any]:
    # A copy each: one shared dict would print as a YAML anchor and alias.
    return {"replicas": count, "restartPolicy": settings.restart_policy, "template": copy.deepcopy(template)}


def elastic_from_spec(spec: JobSpec) -> ElasticSettings | None:
    """The job spec's elastic mode (`--nodes MIN:MAX`, cloudddp/elastic.py) as an elasticPolicy's settings."""
    if spec.min_nodes is None:
        return None
    if spec.kubernetes.elastic:  # type: ignore[attr-defined]
        raise CloudDDPError(
            f"min_nodes={spec.min_nodes} (--nodes {spec.min_nodes}:{spec.nodes}) and kubernetes.elastic both give "
            f"an elastic range; give it once."
        )
    host, port = rendezvous_host_port(spec.rdzv_endpoint, spec.rdzv_backend)
    return ElasticSettings(
        min_nodes=spec.min_nodes, max_nodes=spec.nodes, rdzv_backend=spec.rdzv_backend,
        rdzv_host=host, rdzv_port=port, max_restarts=spec.max_restarts,
    )  # fmt: skip


def rendezvous_host_port(endpoint: str | None, backend: str) -> tuple[str | None, int | None]:
    """`--rdzv-endpoint HOST[:PORT]` as elasticPolicy's rdzvHost and rdzvPort; (None, None) without one (the
    operator's default, <job>-worker-0 and the job's port).

    A bare HOST takes torchrun's own default port for the backend, written out: without rdzvPort the operator
    would use the PyTorchJob's port, 23456 (training-operator v1.9.0 pkg/controller.v1/pytorch/elastic.go
    generateEnvRDZVEndpoint), not what `torchrun --rdzv-endpoint HOST` uses elsewhere (c10d 29400, etcd 2379)."""
    if not endpoint:
        return None, None
    host, port = split_host_port(endpoint)
    if not host or endpoint.strip().startswith(":"):  # ":2379": split_host_port keeps it whole as the host
        raise CloudDDPError(f"--rdzv-endpoint {endpoint!r} has no host; write HOST:PORT (e.g. etcd-service:2379).")
    default = ETCD_DEFAULT_PORT if backend.startswith("etcd") else C10D_DEFAULT_PORT
    number = parse_port(port, f"--rdzv-endpoint {endpoint!r}: its port") if port is not None else default
    # The operator writes "<rdzvHost>:<rdzvPort>" (elastic.go): an IPv6 address needs its brackets back.
    return (f"[{host}]" if ":" in host else host), number


def elastic_policy(spec: JobSpec, elastic: ElasticSettings) -> dict[str, Any]:
    if not elastic.min_nodes <= spec.nodes <= elastic.max_nodes:
        raise CloudDDPError(
            f"nodes={spec.nodes} is outside kubernetes.elastic's range "
            f"{elastic.min_nodes}..{elastic.max_nodes}; the job starts with `nodes` workers."
        )
    if elastic.rdzv_backend.startswith("etcd") and not elastic.rdzv_host:
        raise CloudDDPError(
            f"kubernetes.elastic.rdzv_backend={elastic.rdzv_backend!r} needs kubernetes.elastic.rdzv_host "
            f"(the etcd service's name, e.g. etcd-service) and usually rdzv_port 2379."
        )
    policy: dict[str, Any] = {
        "rdzvBackend": elastic.rdzv_backend, "minReplicas": elastic.min_nodes, "maxReplicas": elastic.max_nodes,
    }  # fmt: skip
    for key, value in (("rdzvHost", elastic.rdzv_host), ("rdzvPort", elastic.rdzv_port),
                       ("maxRestarts", elastic.max_restarts)):  # fmt: skip
        if value is not None:
            policy[key] = value
    return policy


def rendezvous_id(name: str) -> str:
    """An etcd rendezvous id of this submission's own: the job's name and 8 random hex digits.

    The operator hands elasticPolicy.rdzvId to the pods as PET_RDZV_ID (kubeflow/training-operator v1.9.0, commit
    6f74c7f6, pkg/controller.v1/pytorch/elastic.go Generate); without one the job side meets under the job's name
    (cloudddp/cluster/kubeflow.py). torch (2.14.1, as installed) keeps an etcd rendezvous after the job: etcd-v2 writes its state, closed
    at shutdown, with a 2-hour TTL (torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py _DEFAULT_TTL,
    dynamic_rendezvous.py shutdown), etcd leases the run's directory for as long (etcd_rendezvous.py
    CONST_RUNID_SUBROOT_TTL = 7200, set_closed). So a rerun of one name within 2 hours, or jobs of one name in two
    namespaces sharing an etcd, would meet a closed or foreign rendezvous. c10d's store lives in the job's own pod.
    """
    return f"{name}-{secrets.token_hex(4)}"


def service_names(job_spec: dict[str, Any]) -> DerivedName:
    """The longest Service name the training operator derives for this job (kubeflow/training-operator tag v1.9.0,
    commit 6f74c7f6b2ed6c27aabd82d0a316b23f0646059c): pkg/controller.v1/common/service.go ReconcileServices makes one
    Service per replica index, named by CreateNewService with util.go GenGeneralName `<job>-<type lower>-<index>`;
    an elastic job's HPA (pytorch/hpa.go) may grow the Workers to maxReplicas. At the same tag the operator's webhook,
    pkg/webhooks/pytorch/pytorchjob_webhook.go validatePyTorchJob, refuses a job name that is not a DNS-1035 label
    (NameIsDNS1035Label). A Service name is a DNS-1035 label too (kubernetes/kubernetes
    pkg/apis/core/validation/validation.go ValidateServiceName = NameIsDNS1035Label, read at commit
    000f26050b9be6fb3d79fae95e06b47fc96128cd from a stored copy of the file), so it bounds the job name's length."""
    grown = job_spec.get("elasticPolicy", {}).get("maxReplicas", 0)
    counts = {kind: max(replica["replicas"], grown if kind == "Worker" else 0)
              for kind, replica in job_spec["pytorchReplicaSpecs"].items()}  # fmt: skip
    suffixes = [f"-{kind.lower()}-{count - 1}" for kind, count in counts.items()]
    suffix = max(reversed(suffixes), key=len)  # a tie goes to the Workers, whose index grows with the job
    why = (
        "the training operator names a Service '<name>-<replica type>-<index>' after each replica, and a Service "
        f"name must be a DNS-1035 label of at most {DNS_1035_MAX} characters"
    )
    return DerivedName("PyTorchJob", suffix, why, sum(counts.values()))


def pytorchjob(spec: JobSpec, settings: KubernetesSettings, storage: Storage, namespace: str) -> dict[str, Any]:
    group, version, _, kind = PYTORCHJOB
    template = pod_template(spec, settings, storage)
    job_spec: dict[str, Any] = {
        "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": settings.backoff_limit,
                      "activeDeadlineSeconds": spec.runtime_limit(DEFAULT_MAX_RUNTIME)},
        "pytorchReplicaSpecs": {},
    }  # fmt: skip
    if settings.ttl_seconds_after_finished is not None:
        job_spec["runPolicy"]["ttlSecondsAfterFinished"] = settings.ttl_seconds_after_finished
    # Always: left out, the operator would make it "auto" (one process per CPU core on a CPU pod), not the default.
    job_spec["nprocPerNode"] = str(nproc_per_node_for(spec.nproc_per_node, settings.gpus))
    elastic = elastic_from_spec(spec) or settings.elastic
    if elastic:
        job_spec["elasticPolicy"] = elastic_policy(spec, elastic)
        job_spec["pytorchReplicaSpecs"]["Worker"] = replica(spec.nodes, template, settings)
    else:
        job_spec["pytorchReplicaSpecs"]["Master"] = replica(1, template, settings)
        if spec.nodes > 1:
            job_spec["pytorchReplicaSpecs"]["Worker"] = replica(spec.nodes - 1, template, settings)
    name = job_name(spec, service_names(job_spec))
    if elastic and elastic.rdzv_backend.startswith("etcd"):
        job_spec["elasticPolicy"]["rdzvId"] = rendezvous_id(name)
    return {
        "apiVersion": f"{group}/{version}",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "cloudddp"},
        },
        "spec": job_spec,
    }
