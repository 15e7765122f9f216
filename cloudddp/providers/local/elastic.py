"""Elastic jobs in the local emulation: the launcher flags that turn a node into an elastic one.

An elastic job (`min_nodes` set, see `cloudddp.elastic`) runs torchrun's dynamic rendezvous: c10d
(a TCP store on node 0's master port) or etcd-v2 (an etcd server named by `rdzv_endpoint`). Each
emulated node keeps its platform's variables and gets these flags on top (the launcher's flags win
over detected values); SageMaker and OCI start a fixed set of hosts, so their emulations refuse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cloudddp.cluster.environment import EmulatedNode
from cloudddp.elastic import is_elastic, node_range
from cloudddp.errors import CloudDDPError

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec
    from cloudddp.providers.local.provider import LocalNode

SHARED_FOLDERS = ("CLOUDDDP_MODEL_DIR", "CLOUDDDP_CHECKPOINT_DIR")

# Platforms whose own schedulers can run an elastic job (Kubeflow's elasticPolicy, Slurm steps).
ELASTIC_EMULATIONS = ("kubeflow", "slurm", "none")


def check_elastic_emulation(spec: JobSpec) -> None:
    if is_elastic(spec) and spec.local.emulate not in ELASTIC_EMULATIONS:
        raise CloudDDPError(
            f"local.emulate={spec.local.emulate!r} with min_nodes={spec.min_nodes}: {spec.local.emulate} starts a "
            f"fixed set of hosts, so it has no elastic mode to emulate. Use --emulate "
            f"{', '.join(ELASTIC_EMULATIONS)} for an elastic job, or a fixed --nodes {spec.nodes}."
        )


def elastic_launcher_args(spec: JobSpec, layout: EmulatedNode, job_name: str) -> list[str]:
    """The flags that make `layout` a member of the elastic job `job_name` (none for a fixed-size job)."""
    if not is_elastic(spec):
        return []
    args = [
        f"--nnodes={node_range(spec)}",
        f"--rdzv-backend={spec.rdzv_backend}",
        f"--rdzv-id={job_name}",
        f"--max-restarts={spec.max_restarts}",
    ]
    conf = [f"last_call_timeout={spec.local.elastic_last_call:g}"]
    if spec.rdzv_backend == "etcd-v2":
        args.append(f"--rdzv-endpoint={spec.rdzv_endpoint}")
    else:
        # c10d's store lives on the host whose address is the endpoint's. Every emulated node is
        # 127.0.0.1, so torchrun would let whichever binds first host it; node 0 hosts it, as the
        # master host does on a real cluster.
        conf.append(f"is_host={'true' if layout.rank == 0 else 'false'}")
    args.append(f"--torchrun-arg=--rdzv-conf={','.join(conf)}")
    return args


def share_node0_folders(nodes: list[LocalNode]) -> None:
    """Every node writes its model and checkpoints to node 0's folders, as to a shared file system.

    An elastic rendezvous hands out ranks in arrival order, so rank 0 (which saves the model and the
    checkpoints) may be any node, and after a node is lost the ranks change: the survivors must all
    read the checkpoint the old rank 0 wrote. Elastic clusters keep them on shared storage (the EKS
    guide's FSx volume); the emulation shares node 0's folders.
    """
    for node in nodes[1:]:
        for name in SHARED_FOLDERS:
            if name in nodes[0].env and name in node.env:
                node.env[name] = nodes[0].env[name]
