"""No platform detected: one node, standalone (a workstation or a plain VM)."""

from __future__ import annotations

from collections.abc import Mapping

from cloudddp.cluster.environment import LOOPBACK, EmulatedCluster, EmulatedNode, generic_node
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import ClusterPlan

NAME = "standalone"
CLAIMS = ()  # it reads no platform's variables: what no platform claims falls to it


def detect(environ: Mapping[str, str]) -> bool:
    return True


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    result = ClusterPlan(provider=NAME)
    result.set("nnodes", 1, "default (no platform detected)")
    result.set("node_rank", 0, "default (no platform detected)")
    result.set("master_addr", "127.0.0.1", "default (single node)")
    result.set_nproc_per_node()
    return result


def emulate(cluster: EmulatedCluster) -> list[EmulatedNode]:
    """No platform: each node is told its place with plain launcher flags."""
    nodes = []
    for rank in range(cluster.nodes):
        node = generic_node(cluster, f"node-{rank}", rank)
        node.launcher_args = [
            "--provider", NAME, f"--nnodes={cluster.nodes}", f"--node-rank={rank}", f"--master-addr={LOOPBACK}",
        ]  # fmt: skip
        nodes.append(node)
    return nodes
