"""SkyPilot multi-node tasks: the `run` section executes once on every node.

Contract: https://docs.skypilot.co/en/stable/running-jobs/environment-variables.html
SKYPILOT_NODE_RANK, SKYPILOT_NODE_IPS (one IP per line, in rank order), SKYPILOT_NUM_NODES
and SKYPILOT_NUM_GPUS_PER_NODE. The master is the first IP; this node's own IP (its line
in SKYPILOT_NODE_IPS) goes to torchrun's --local-addr, so c10d advertises a reachable address.
SkyPilot sets SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES and SKYPILOT_NODE_IPS together for every run (skypilot-org/
skypilot commit 75ae2b426cf43ccbd66dd4f87db96e0c5ff2588c, sky/skylet/executor/slurm.py main): any of them without
SKYPILOT_NODE_RANK and SKYPILOT_NODE_IPS is refused (`CLAIMS`); the node count alone is derived from the IPs.
"""

from __future__ import annotations

from collections.abc import Mapping

from cloudddp.cluster.claims import Claim
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import DEFAULT_MASTER_PORT, ClusterPlan, EnvReader, check_rank
from cloudddp.errors import CloudDDPError

NAME = "skypilot"
CLAIMS = (
    Claim(
        NAME, "a SkyPilot multi-node task", ("SKYPILOT_NODE_RANK", "SKYPILOT_NODE_IPS"),
        markers=("SKYPILOT_NODE_RANK", "SKYPILOT_NODE_IPS", "SKYPILOT_NUM_NODES"),
        upstream="skypilot-org/skypilot 75ae2b426cf43ccbd66dd4f87db96e0c5ff2588c sky/skylet/executor/slurm.py",
    ),
)  # fmt: skip


def detect(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("SKYPILOT_NODE_RANK")) and bool(environ.get("SKYPILOT_NODE_IPS"))


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    ips = env.str("SKYPILOT_NODE_IPS").split()
    if not ips:
        raise CloudDDPError(
            f"skypilot: the environment variable SKYPILOT_NODE_IPS={environ['SKYPILOT_NODE_IPS']!r} lists no addresses."
        )
    nnodes = env.int("SKYPILOT_NUM_NODES", len(ips), minimum=1)
    if nnodes != len(ips):
        raise CloudDDPError(
            f"skypilot: SKYPILOT_NUM_NODES={environ['SKYPILOT_NUM_NODES']} but SKYPILOT_NODE_IPS lists "
            f"{len(ips)} address(es) ({', '.join(ips)}); they must agree."
        )
    node_rank = env.int("SKYPILOT_NODE_RANK", minimum=0)
    nodes_from = "SKYPILOT_NUM_NODES" if env.has("SKYPILOT_NUM_NODES") else "the number of IPs in SKYPILOT_NODE_IPS"
    check_rank(node_rank, nnodes, "SKYPILOT_NODE_RANK", nodes_from)

    result = ClusterPlan(provider=NAME)
    if env.has("SKYPILOT_TASK_ID"):
        result.set("rdzv_id", environ["SKYPILOT_TASK_ID"], "SKYPILOT_TASK_ID")
    result.set("hosts", ips, "SKYPILOT_NODE_IPS")
    result.set("nnodes", nnodes, "SKYPILOT_NUM_NODES" if env.has("SKYPILOT_NUM_NODES") else "SKYPILOT_NODE_IPS")
    result.set("node_rank", node_rank, "SKYPILOT_NODE_RANK")
    result.set("master_addr", ips[0], "SKYPILOT_NODE_IPS (first line)")
    result.set("local_addr", ips[node_rank], f"SKYPILOT_NODE_IPS (line of rank {node_rank})")
    result.set_master_port(env, DEFAULT_MASTER_PORT, "default (29500)")
    result.set_nproc_per_node(env.int("SKYPILOT_NUM_GPUS_PER_NODE", 0, minimum=0), "SKYPILOT_NUM_GPUS_PER_NODE")
    return result
