"""AWS Batch multi-node parallel jobs: one container per node.

Contract: https://docs.aws.amazon.com/batch/latest/userguide/mnp-env-vars.html
AWS_BATCH_JOB_NODE_INDEX, AWS_BATCH_JOB_NUM_NODES and AWS_BATCH_JOB_MAIN_NODE_INDEX on
every node; AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS only on the other nodes, so the
main node names itself. torchrun's static rendezvous hosts its store on node rank 0, so
ranks are counted from the main node (which need not have index 0). Child nodes' job ids
are `<job id>#<node index>`; the part before `#` is shared by all nodes.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from cloudddp.cluster.claims import Claim
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import DEFAULT_MASTER_PORT, ClusterPlan, EnvReader, check_rank
from cloudddp.errors import CloudDDPError

NAME = "awsbatch"
MAIN_ADDRESS = "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"
# Every node of a multi-node parallel job (the contract above); MAIN_ADDRESS only on the other nodes (`plan`).
CLAIMS = (
    Claim(
        NAME, "an AWS Batch multi-node parallel job",
        ("AWS_BATCH_JOB_NODE_INDEX", "AWS_BATCH_JOB_NUM_NODES", "AWS_BATCH_JOB_MAIN_NODE_INDEX"),
        upstream="https://docs.aws.amazon.com/batch/latest/userguide/mnp-env-vars.html",
    ),
)  # fmt: skip


def detect(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("AWS_BATCH_JOB_NODE_INDEX")) and bool(environ.get("AWS_BATCH_JOB_NUM_NODES"))


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    nnodes = env.int("AWS_BATCH_JOB_NUM_NODES", minimum=1)
    index = env.int("AWS_BATCH_JOB_NODE_INDEX", minimum=0)
    check_rank(index, nnodes, "AWS_BATCH_JOB_NODE_INDEX", "AWS_BATCH_JOB_NUM_NODES")
    main = env.int("AWS_BATCH_JOB_MAIN_NODE_INDEX", minimum=0)
    check_rank(main, nnodes, "AWS_BATCH_JOB_MAIN_NODE_INDEX", "AWS_BATCH_JOB_NUM_NODES")

    job_id = environ.get("AWS_BATCH_JOB_ID", "").split("#")[0]
    result = ClusterPlan(provider=NAME)
    if job_id:
        result.set("rdzv_id", job_id, "AWS_BATCH_JOB_ID (before '#')")
    result.set("nnodes", nnodes, "AWS_BATCH_JOB_NUM_NODES")
    if main == 0:
        result.set("node_rank", index, "AWS_BATCH_JOB_NODE_INDEX")
    else:
        result.set(
            "node_rank",
            (index - main) % nnodes,
            "AWS_BATCH_JOB_NODE_INDEX counted from AWS_BATCH_JOB_MAIN_NODE_INDEX (main node is rank 0)",
        )
    if env.has(MAIN_ADDRESS):
        result.set("master_addr", environ[MAIN_ADDRESS], MAIN_ADDRESS)
    elif index == main:
        own_name = (options.this_host_names() or [socket.gethostname()])[0]
        result.set("master_addr", own_name, "this node (main)")
    else:
        raise CloudDDPError(
            f"awsbatch: {MAIN_ADDRESS} is not set on node AWS_BATCH_JOB_NODE_INDEX={index}, which is "
            f"not the main node (AWS_BATCH_JOB_MAIN_NODE_INDEX={main}); the main node's address is unknown."
        )
    result.set_master_port(env, DEFAULT_MASTER_PORT, "default (29500)")
    result.set_nproc_per_node()
    return result
