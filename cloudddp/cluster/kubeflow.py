"""Kubeflow: PyTorchJob (training-operator v1, static and elastic) and Trainer v2 TrainJobs.

Contracts: https://www.kubeflow.org/docs/components/trainer/legacy-v1/user-guides/pytorch/
and https://www.kubeflow.org/docs/components/trainer/ (the `torch-distributed` runtime).
The operators inject torchrun's own defaults as `PET_*` variables (PET_NNODES,
PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, PET_NPROC_PER_NODE; elastic adds
PET_RDZV_BACKEND, PET_RDZV_ENDPOINT, PET_NNODES=min:max, PET_MAX_RESTARTS), and v1 also the
plain MASTER_ADDR / MASTER_PORT / WORLD_SIZE / RANK. PET_* wins when both are present:
recent training-operators set WORLD_SIZE to nodes x nprocPerNode, while older ones (without
PET_NNODES) set it to the node count. Default port: 23456 for v1, 29500 for v2.

Upstream: kubeflow/training-operator `pkg/controller.v1/pytorch/{envvar,master,elastic}.go` (v1) and
kubeflow/trainer `pkg/runtime/framework/plugins/torch/torch.go` (v2). The elastic rendezvous id is
PET_RDZV_ID when the job sets `elasticPolicy.rdzvId`, else the job's name, read from the pod's
HOSTNAME (`<job>-worker-<i>`, the operator's replica name). torch keeps a closed etcd rendezvous for 2 hours, so
cloudddp's manifests set a fresh rdzvId for etcd (providers/kubernetes/pytorchjob.py rendezvous_id); a job without
one shares its rendezvous with a rerun of its name, or a same-named job in another namespace on that etcd.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cloudddp.cluster.claims import Claim
from cloudddp.cluster.environment import EmulatedCluster, EmulatedNode, generic_node, host_map_arg
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import (
    NPROC_WORDS,
    ClusterPlan,
    EnvReader,
    check_rank,
    is_node_range,
    parse_nnodes,
    parse_port,
    split_host_port,
)
from cloudddp.errors import CloudDDPError

NAME = "kubeflow"
V1_DEFAULT_PORT = 23456
V2_DEFAULT_PORT = 29500
C10D_DEFAULT_PORT = 29400  # torchrun's default when a rendezvous endpoint has no port
# torchrun's default when an etcd endpoint has no port (torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py
# and etcd_rendezvous.py, torch 2.14.1: parse_rendezvous_endpoint(..., default_port=2379)).
ETCD_DEFAULT_PORT = 2379
# What training-operator v1.9.0 (commit 6f74c7f6b2ed6c27aabd82d0a316b23f0646059c) puts in a PyTorchJob without
# nprocPerNode: pkg/apis/kubeflow.org/v1/pytorch_defaults.go setDefaultNprocPerNode, DefaultNprocPerNode = "auto";
# envvar.go setPodEnv then hands it to every pod as PET_NPROC_PER_NODE.
OPERATOR_DEFAULT_NPROC = "auto"
PET_MARKERS = ("PET_NNODES", "PET_MASTER_ADDR", "PET_RDZV_ENDPOINT")
V1_VARIABLES = ("MASTER_ADDR", "WORLD_SIZE", "RANK")
# Plain MASTER_ADDR/WORLD_SIZE/RANK are generic; with any of these set they belong to someone else
# (another platform, or torchrun's own per-process variables).
OTHER_PLATFORM_MARKERS = (
    "SLURM_JOB_ID",
    "PBS_JOBID",
    "OCI__MODE",
    "CLUSTER_NODES_METADATA_FILE",
    "SM_CURRENT_HOST",
    "SM_HOSTS",
    "AWS_BATCH_JOB_NODE_INDEX",
    "SKYPILOT_NODE_RANK",
    "TORCHELASTIC_RUN_ID",
    "NODE_COUNT",  # ADS's runner exports MASTER_ADDR, WORLD_SIZE and RANK (one node) to the command it starts
    "MAIN_JOB_RUN_OCID",
)
# A static PyTorchJob or TrainJob node (older operators: the plain v1 names), and an elastic PyTorchJob node, whose
# rank the rendezvous assigns (tests/cluster/fixtures/kubeflow_upstream.py names the operators' commits). Plain
# MASTER_ADDR/WORLD_SIZE/RANK are generic: they stand in for a need but claim nothing (`detect` takes the three).
UPSTREAM = "kubeflow/training-operator 078ec30ff26649a07d2e28893c332d4cef70e233 pkg/controller.v1/pytorch/envvar.go"
CLAIMS = (
    Claim(
        NAME, "a Kubeflow PyTorchJob or TrainJob", ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR"),
        stand_ins={"PET_NNODES": ("WORLD_SIZE",), "PET_NODE_RANK": ("RANK",), "PET_MASTER_ADDR": ("MASTER_ADDR",)},
        upstream=UPSTREAM,
    ),
    Claim(
        NAME, "an elastic Kubeflow PyTorchJob", ("PET_NNODES", "PET_RDZV_ENDPOINT"), upstream=UPSTREAM,
    ),
)  # fmt: skip


def nproc_per_node_for(nproc_per_node: int | str | None, gpus: int) -> int | str:
    """The processes per node cloudddp writes into every Kubeflow job: PyTorchJob's nprocPerNode, TrainJob's
    numProcPerNode. The user's value, else the README's default, visible GPUs else 1, as a number.

    Written always, because a job without it gets the operator's default, not cloudddp's: training-operator v1.9.0
    makes it "auto" (OPERATOR_DEFAULT_NPROC), which torchrun turns into the node's CPU count on a CPU pod (torch
    2.14.1 torch/distributed/run.py determine_local_world_size: torch._utils.cpu_count()), and Trainer v2.0.1 to
    v2.3.0 (pkg/runtime/framework/plugins/torch/torch.go EnforceMLPolicy) into the CPU request without a GPU. So the
    job side needs no guess: the `auto` a pod sees was asked for, and means torchrun's auto. `gpus` is the pod's
    nvidia.com/gpu limit: the device plugin gives the pod exactly that many, so it is the visible GPU count. A
    number is valid for every release (PyTorchJob's string, Trainer v2.0/v2.1's int-or-string, v2.2+'s int32) and
    makes the v1 operator's WORLD_SIZE right too (envvar.go getNprocPerNodeInt counts a word as 1).
    """
    return nproc_per_node if nproc_per_node is not None else (gpus or 1)


def detect(environ: Mapping[str, str]) -> bool:
    if any(environ.get(name) for name in PET_MARKERS):
        return True
    plain = all(environ.get(name) for name in V1_VARIABLES)
    return plain and not any(environ.get(name) for name in OTHER_PLATFORM_MARKERS)


def parse_nproc(raw: str, name: str) -> int | str:
    """Processes per node: a positive int or one of torchrun's words (gpu, cpu, auto, xpu)."""
    if raw.strip().lower() in NPROC_WORDS:
        return raw.strip().lower()
    try:
        value = int(raw.strip())
    except ValueError:
        raise CloudDDPError(
            f"kubeflow: the environment variable {name}={raw!r} must be a positive integer "
            f"or one of {', '.join(NPROC_WORDS)}."
        ) from None
    if value < 1:
        raise CloudDDPError(f"kubeflow: the environment variable {name}={raw!r} must be at least 1.")
    return value


def split_endpoint(
    endpoint: str, what: str = "PET_RDZV_ENDPOINT", prefix: str = "kubeflow: "
) -> tuple[str, int | None]:
    """`host:port` -> (host, port); a bare host -> (host, None); a port that is not a number from 1 to 65535 is an
    error naming `what` (the variable or flag) and the endpoint.

    `[v6]:port` -> (v6, port): the brackets go, as torch's parse_rendezvous_endpoint drops them, so the
    master address resolves (torch/distributed/elastic/rendezvous/utils.py). torch takes whatever follows the
    last ":" as the port and fails with a traceback when it is no number (`job-worker-0:abc`): refused here.
    """
    host, port = split_host_port(endpoint)
    if port is None:
        return host, None
    if not port.strip().lstrip("-").isdigit():
        raise CloudDDPError(
            f"{prefix}{what}={endpoint!r}: {port!r} after the last ':' is not a port number; a rendezvous endpoint is "
            f"HOST:PORT with PORT from 1 to 65535, HOST alone, or [IPV6-ADDRESS]:PORT."
        )
    return host, parse_port(port, f"{prefix}the port of {what}={endpoint!r}")


REPLICA_NAME = re.compile(r"^(?P<job>.+)-(master|worker)-\d+$")  # replicaName() in envvar.go


def job_name_from_pod(environ: Mapping[str, str]) -> str | None:
    """The PyTorchJob's name from the pod's HOSTNAME (`<job>-worker-<i>` / `<job>-master-0`)."""
    match = REPLICA_NAME.match(environ.get("HOSTNAME", ""))
    return match.group("job") if match else None


def read_node_count(env: EnvReader, result: ClusterPlan) -> None:
    """PET_NNODES (int or elastic min:max), else v1's WORLD_SIZE (older operators)."""
    if env.has("PET_NNODES"):
        nnodes = parse_nnodes(env.str("PET_NNODES"), "kubeflow: the environment variable PET_NNODES")
        result.set("nnodes", nnodes, "PET_NNODES")
    elif env.has("WORLD_SIZE"):
        result.set("nnodes", env.int("WORLD_SIZE", minimum=1), "WORLD_SIZE (PyTorchJob node count)")
    else:
        raise CloudDDPError("kubeflow: neither PET_NNODES nor WORLD_SIZE is set, so the node count is unknown.")


def read_rendezvous(env: EnvReader, result: ClusterPlan) -> None:
    """Elastic jobs name a backend and an endpoint; static jobs use the master."""
    backend = env.environ.get("PET_RDZV_BACKEND", "")
    endpoint = env.environ.get("PET_RDZV_ENDPOINT", "")
    if endpoint:
        if backend == "static":
            raise CloudDDPError(
                f"kubeflow: PET_RDZV_ENDPOINT={endpoint!r} is set but PET_RDZV_BACKEND='static'; "
                f"a rendezvous endpoint needs a dynamic backend such as c10d."
            )
        backend_source = "PET_RDZV_BACKEND" if backend else "default (c10d, as PET_RDZV_ENDPOINT is set)"
        result.set("rdzv_backend", backend or "c10d", backend_source)
        split_endpoint(endpoint)  # its port, when it has one, must be a real port
        result.set("rdzv_endpoint", endpoint, "PET_RDZV_ENDPOINT")
        if not env.has("PET_RDZV_ID"):
            job = job_name_from_pod(env.environ)
            if job:
                result.set("rdzv_id", job, "HOSTNAME (the PyTorchJob's name in the pod name)")
            else:
                result.set("rdzv_id", endpoint, "PET_RDZV_ENDPOINT (no PET_RDZV_ID, no replica pod name)")
    elif backend and backend != "static":
        raise CloudDDPError(
            f"kubeflow: PET_RDZV_BACKEND={backend!r} is set but PET_RDZV_ENDPOINT is not; "
            f"the {backend} rendezvous needs an endpoint."
        )
    if is_node_range(result.nnodes) and not endpoint:
        raise CloudDDPError(
            f"kubeflow: PET_NNODES={result.nnodes!r} is an elastic range, but no rendezvous endpoint is set "
            f"(PET_RDZV_ENDPOINT); an elastic job needs one."
        )


def read_node_rank(env: EnvReader, result: ClusterPlan) -> None:
    """PET_NODE_RANK, else v1's RANK; an elastic rendezvous (an endpoint) assigns it itself."""
    rank_name = env.first("PET_NODE_RANK", "RANK")
    if rank_name is not None:
        rank = env.int(rank_name, minimum=0)
        if isinstance(result.nnodes, int):
            check_rank(rank, result.nnodes, rank_name, result.sources["nnodes"])
        result.set("node_rank", rank, rank_name)
    elif result.rdzv_endpoint:
        result.sources["node_rank"] = f"assigned by the {result.rdzv_backend} rendezvous"
    else:
        raise CloudDDPError("kubeflow: neither PET_NODE_RANK nor RANK is set, so this node's rank is unknown.")


def read_master(env: EnvReader, result: ClusterPlan, v1: bool) -> None:
    """The master address and port: the operator's variables, else the rendezvous endpoint, else the defaults."""
    addr_name = env.first("PET_MASTER_ADDR", "MASTER_ADDR")
    port_name = env.first("PET_MASTER_PORT", "MASTER_PORT")
    if addr_name is not None:
        result.set("master_addr", env.str(addr_name), addr_name)
    elif result.rdzv_endpoint:
        host, port = split_endpoint(result.rdzv_endpoint)
        result.set("master_addr", host, "PET_RDZV_ENDPOINT (host)")
        if port_name is None:
            result.set("master_port", port or C10D_DEFAULT_PORT, "PET_RDZV_ENDPOINT (port)")
    else:
        raise CloudDDPError("kubeflow: neither PET_MASTER_ADDR nor MASTER_ADDR is set, so the master is unknown.")
    if port_name is not None:
        result.set("master_port", env.port(port_name), port_name)
    elif "master_port" not in result.sources:
        if v1:
            result.set("master_port", V1_DEFAULT_PORT, "default (PyTorchJob: 23456)")
        else:
            result.set("master_port", V2_DEFAULT_PORT, "default (Trainer v2: 29500)")


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    result = ClusterPlan(provider=NAME)
    if env.has("PET_RDZV_ID"):
        result.set("rdzv_id", environ["PET_RDZV_ID"], "PET_RDZV_ID")
    read_node_count(env, result)
    read_rendezvous(env, result)
    read_node_rank(env, result)
    read_master(env, result, v1=any(env.has(name) for name in V1_VARIABLES))
    if env.has("PET_NPROC_PER_NODE"):
        # Taken as it is: cloudddp's jobs always carry the value (nproc_per_node_for), so an `auto` was asked for.
        nproc = parse_nproc(environ["PET_NPROC_PER_NODE"], "PET_NPROC_PER_NODE")
        result.set("nproc_per_node", nproc, "PET_NPROC_PER_NODE")
    else:
        result.set_nproc_per_node()
    if env.has("PET_MAX_RESTARTS"):
        result.set("max_restarts", env.int("PET_MAX_RESTARTS", minimum=0), "PET_MAX_RESTARTS")
    return result


def emulate(cluster: EmulatedCluster) -> list[EmulatedNode]:
    """A PyTorchJob with one Master and N-1 Workers, with every variable the v1 operator injects
    (envvar.go setPodEnv + master.go): PYTHONUNBUFFERED, MASTER_ADDR/PORT, PET_MASTER_ADDR/PORT,
    WORLD_SIZE (nodes x nprocPerNode), RANK, PET_NODE_RANK, PET_NPROC_PER_NODE, PET_NNODES, and
    the pod's HOSTNAME. `cluster.nproc_per_node` is the job's nprocPerNode: None for a job without one, which
    the operator defaults to "auto" (OPERATOR_DEFAULT_NPROC). The local provider passes the user's value, else 1:
    what cloudddp's PyTorchJob carries for pods that ask for no GPU (nproc_per_node_for)."""
    master = f"{cluster.job_name}-master-0"
    port = str(V1_DEFAULT_PORT)
    nproc_per_node = OPERATOR_DEFAULT_NPROC if cluster.nproc_per_node is None else str(cluster.nproc_per_node)
    world = cluster.nodes * (int(nproc_per_node) if nproc_per_node.isdigit() else 1)  # getNprocPerNodeInt
    nodes = []
    for rank in range(cluster.nodes):
        name = master if rank == 0 else f"{cluster.job_name}-worker-{rank - 1}"
        node = generic_node(cluster, name, rank)
        node.env.update(
            HOSTNAME=name, PYTHONUNBUFFERED="1",
            MASTER_ADDR=master, MASTER_PORT=port, PET_MASTER_ADDR=master, PET_MASTER_PORT=port,
            WORLD_SIZE=str(world), RANK=str(rank), PET_NODE_RANK=str(rank),
            PET_NPROC_PER_NODE=nproc_per_node, PET_NNODES=str(cluster.nodes),
        )  # fmt: skip
        node.launcher_args = ["--host-map", host_map_arg([master])]
        nodes.append(node)
    return nodes
