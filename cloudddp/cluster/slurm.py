"""Slurm: one torchrun per node, started by `srun --ntasks-per-node=1`; reader and emulation.

Contract: https://slurm.schedmd.com/srun.html#SECTION_OUTPUT-ENVIRONMENT-VARIABLES and SchedMD/slurm
`src/common/env.c`. Inside an `srun` step the step's own hosts are SLURM_STEP_NODELIST /
SLURM_STEP_NUM_NODES and SLURM_NODEID counts within the step, while SLURM_NODELIST and
SLURM_JOB_NODELIST stay the allocation's (`srun -N2` in a 4-node allocation runs on 2 of its
4 hosts). The batch script itself is no step: it has SLURM_NODEID=0 and no SLURM_STEP_* at all,
so a launcher started there without `srun` would wait forever for nodes that never start; it is
refused. Master = the step's first host; port derived from the job id, so two jobs sharing a node
do not collide; rendezvous id = job id and step id.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from cloudddp.cluster.claims import Claim
from cloudddp.cluster.environment import EmulatedCluster, EmulatedNode, generic_node, host_map_arg
from cloudddp.cluster.hostlist import expand_hostlist
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import ClusterPlan, EnvReader, check_rank, port_from_job_id
from cloudddp.errors import CloudDDPError

NAME = "slurm"
# A step's own node list first (it matches SLURM_NODEID), then the allocation's.
NODELIST_VARIABLES = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
NNODES_VARIABLES = {
    "SLURM_STEP_NODELIST": ("SLURM_STEP_NUM_NODES",),
    "SLURM_JOB_NODELIST": ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
    "SLURM_NODELIST": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"),
}
STEP_ID_VARIABLES = ("SLURM_STEP_ID", "SLURM_STEPID")
# Every job has its id and its hosts (env.c env_array_for_job / env_array_for_step, SchedMD/slurm commit
# 284c3b95f08a2dc2478499837b03355e1b9c5c75; the captured tests/cluster/fixtures/slurm/*.env).
CLAIMS = (
    Claim(
        NAME, "a Slurm job", ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"),
        markers=("SLURM_JOB_ID", *NODELIST_VARIABLES),
        stand_ins={"SLURM_JOB_NODELIST": ("SLURM_STEP_NODELIST", "SLURM_NODELIST")},
        upstream="SchedMD/slurm 284c3b95f08a2dc2478499837b03355e1b9c5c75 src/common/env.c",
    ),
)  # fmt: skip


def detect(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("SLURM_JOB_ID")) and any(environ.get(name) for name in NODELIST_VARIABLES)


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    job_id = env.str("SLURM_JOB_ID")
    in_step = env.has("SLURM_STEP_NODELIST")
    nodelist_name = env.first(*NODELIST_VARIABLES) or "SLURM_JOB_NODELIST"
    hosts = expand_hostlist(env.str(nodelist_name), variable=nodelist_name)
    if len(set(hosts)) != len(hosts):
        raise CloudDDPError(f"slurm: {nodelist_name}={environ[nodelist_name]!r} names a host twice.")

    nnodes_name = env.first(*NNODES_VARIABLES[nodelist_name])
    if nnodes_name is None:
        nnodes, nnodes_source = len(hosts), f"{nodelist_name} (host count)"
    else:
        nnodes, nnodes_source = env.int(nnodes_name, minimum=1), nnodes_name
        if nnodes != len(hosts):
            raise CloudDDPError(
                f"slurm: {nnodes_name}={environ[nnodes_name]} but {nodelist_name}="
                f"{environ[nodelist_name]!r} lists {len(hosts)} host(s); they must agree."
            )

    if nnodes > 1 and not in_step:
        raise CloudDDPError(
            f"slurm: cloudddp-launch runs in the batch script of a {nnodes}-node allocation "
            f"({nodelist_name}={environ[nodelist_name]!r}), not in a job step (no SLURM_STEP_NODELIST): only this "
            f"node would start and it would wait for the others forever. Run it under srun, one task per "
            f"node: `srun --ntasks-per-node=1 cloudddp-launch ...`."
        )
    check_one_task_per_node(environ)
    if env.has("SLURM_NODEID"):
        node_rank = env.int("SLURM_NODEID", minimum=0)
        check_rank(node_rank, nnodes, "SLURM_NODEID", nnodes_source)
        rank_source = "SLURM_NODEID"
    elif nnodes == 1:
        node_rank, rank_source = 0, "default (single node)"
    else:
        raise CloudDDPError(
            f"slurm: SLURM_NODEID is not set in a {nnodes}-node step; start one launcher per node "
            f"with `srun --ntasks-per-node=1 ...` so each knows its node rank."
        )

    result = ClusterPlan(provider=NAME)
    step_name = env.first(*STEP_ID_VARIABLES)
    if step_name:  # two steps of one allocation are two rendezvous
        result.set("rdzv_id", f"{job_id}.{environ[step_name]}", f"SLURM_JOB_ID.{step_name}")
    else:
        result.set("rdzv_id", job_id, "SLURM_JOB_ID")
    result.set("hosts", hosts, nodelist_name)
    result.set("nnodes", nnodes, nnodes_source)
    result.set("node_rank", node_rank, rank_source)
    result.set("master_addr", hosts[0], f"{nodelist_name} (first host)")
    result.set_master_port(env, port_from_job_id(job_id), "derived from SLURM_JOB_ID")
    result.set_nproc_per_node(env.int("SLURM_GPUS_ON_NODE", 0, minimum=0), "SLURM_GPUS_ON_NODE")
    return result


def tasks_per_node(text: str) -> list[int]:
    """SLURM_STEP_TASKS_PER_NODE expanded: "2(x3),1" -> [2, 2, 2, 1] (env.c uint16_array_to_str writes it)."""
    counts: list[int] = []
    for part in text.split(","):
        count, _, times = part.partition("(x")
        if not count.isdigit() or (times and (not times.endswith(")") or not times[:-1].isdigit())):
            raise ValueError(part)
        counts += [int(count)] * (int(times[:-1]) if times else 1)
    return counts


def check_one_task_per_node(environ: Mapping[str, str]) -> None:
    """One launcher per node: it starts the node's training processes itself (--nproc-per-node). With
    `--ntasks-per-node=8` and a bare `srun cloudddp-launch`, 8 launchers on a node would each take its node
    rank: one trains alone, the others fail on its port."""
    name = "SLURM_STEP_TASKS_PER_NODE"
    raw = environ.get(name, "")
    try:
        counts = tasks_per_node(raw) if raw else []
    except ValueError:
        raise CloudDDPError(f"slurm: {name}={raw!r} is not a Slurm tasks-per-node list (like 1(x4) or 2,1).") from None
    local_id = environ.get("SLURM_LOCALID", "")
    if max(counts, default=1) > 1 or (local_id.isdigit() and int(local_id) > 0):
        found = f"{name}={raw!r}" if raw else f"SLURM_LOCALID={local_id!r}"
        raise CloudDDPError(
            f"slurm: this step runs more than one task per node ({found}), so several cloudddp-launch would "
            f"start on one node and each would claim it. Start one per node: `srun --ntasks-per-node=1 "
            f"cloudddp-launch ...`; it starts the node's training processes itself (--nproc-per-node, default: "
            f"one per GPU)."
        )


def emulate(cluster: EmulatedCluster) -> list[EmulatedNode]:
    """One `srun --ntasks-per-node=1` step over a whole `node[1-N]` allocation, as Slurm 22.05 sets it
    (variables checked against the real test cluster: tests/cluster/fixtures/slurm/)."""
    hosts = [f"node{i + 1}" for i in range(cluster.nodes)]
    nodelist = f"node[1-{cluster.nodes}]" if cluster.nodes > 1 else "node1"
    job_id = str(zlib.crc32(cluster.job_name.encode()) % 900000 + 100000)
    count = str(cluster.nodes)
    tasks = f"1(x{cluster.nodes})" if cluster.nodes > 1 else "1"  # one task per node, as env.c writes it
    nodes = []
    for rank, host in enumerate(hosts):
        node = generic_node(cluster, host, rank)
        node.env.update(
            SLURM_JOB_ID=job_id, SLURM_JOBID=job_id, SLURM_JOB_NAME=cluster.job_name,
            SLURM_JOB_NODELIST=nodelist, SLURM_NODELIST=nodelist, SLURM_JOB_NUM_NODES=count, SLURM_NNODES=count,
            SLURM_STEP_ID="0", SLURM_STEPID="0", SLURM_STEP_NODELIST=nodelist, SLURM_STEP_NUM_NODES=count,
            SLURM_STEP_NUM_TASKS=count, SLURM_NODEID=str(rank), SLURM_PROCID=str(rank), SLURM_LOCALID="0",
            SLURM_NTASKS=count, SLURMD_NODENAME=host, SLURM_STEP_TASKS_PER_NODE=tasks, SLURM_TASKS_PER_NODE=tasks,
        )  # fmt: skip
        node.launcher_args = ["--host-map", host_map_arg(hosts)]
        nodes.append(node)
    return nodes


def torchrun_args(plan: ClusterPlan) -> list[str]:
    """Elastic c10d: node 0 (SLURM_NODEID 0, the step's first host, the endpoint's host) hosts the store.

    torchrun's own guess compares the endpoint with this machine's names: wrong where Slurm's node
    names are not host names, and a race where nodes share an address (whichever binds first hosts it).
    """
    if plan.rdzv_backend != "c10d" or plan.rdzv_endpoint:
        return []
    return [f"--rdzv-conf=is_host={'true' if plan.node_rank == 0 else 'false'}"]
