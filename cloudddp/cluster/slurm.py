"""Slurm: one torchrun per node, started by `srun --ntasks-per-node=1`.

Contract: https://slurm.schedmd.com/srun.html#SECTION_OUTPUT-ENVIRONMENT-VARIABLES
Hosts come from the node list in hostlist syntax, the node rank from SLURM_NODEID, the
node count from SLURM_NNODES; master is the first host. Inside an `srun` step Slurm sets
SLURM_NODELIST / SLURM_NNODES / SLURM_NODEID for the step (which may use fewer nodes than
the allocation in SLURM_JOB_NODELIST), so the step's list is preferred when present.
The port is derived from the job id, so two jobs sharing a node do not collide.
"""

from __future__ import annotations

from collections.abc import Mapping

from cloudddp.cluster.hostlist import expand_hostlist
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import NPROC_GPUS_OR_ONE, ClusterPlan, EnvReader, check_rank, port_from_job_id
from cloudddp.errors import CloudDDPError

NAME = "slurm"
# The step's node list first (it matches SLURM_NNODES and SLURM_NODEID), then the job's.
NODELIST_VARIABLES = ("SLURM_NODELIST", "SLURM_JOB_NODELIST")
NNODES_VARIABLES = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES")


def detect(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("SLURM_JOB_ID")) and any(environ.get(name) for name in NODELIST_VARIABLES)


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    job_id = env.str("SLURM_JOB_ID")
    nodelist_name = next((name for name in NODELIST_VARIABLES if env.has(name)), "SLURM_JOB_NODELIST")
    hosts = expand_hostlist(env.str(nodelist_name), variable=nodelist_name)
    if len(set(hosts)) != len(hosts):
        raise CloudDDPError(f"slurm: {nodelist_name}={environ[nodelist_name]!r} names a host twice.")

    nnodes_name = next((name for name in NNODES_VARIABLES if env.has(name)), None)
    if nnodes_name is None:
        nnodes, nnodes_source = len(hosts), f"{nodelist_name} (host count)"
    else:
        nnodes, nnodes_source = env.int(nnodes_name, minimum=1), nnodes_name
        if nnodes != len(hosts):
            raise CloudDDPError(
                f"slurm: {nnodes_name}={environ[nnodes_name]} but {nodelist_name}="
                f"{environ[nodelist_name]!r} lists {len(hosts)} host(s); they must agree."
            )

    if env.has("SLURM_NODEID"):
        node_rank = env.int("SLURM_NODEID", minimum=0)
        check_rank(node_rank, nnodes, "SLURM_NODEID", nnodes_source)
        rank_source = "SLURM_NODEID"
    elif nnodes == 1:
        node_rank, rank_source = 0, "default (single node)"
    else:
        raise CloudDDPError(
            f"slurm: SLURM_NODEID is not set in a {nnodes}-node job; start one launcher per node "
            f"with `srun --ntasks-per-node=1 ...` so each knows its node rank."
        )

    result = ClusterPlan(provider=NAME)
    result.set("rdzv_id", job_id, "SLURM_JOB_ID")
    result.set("hosts", hosts, nodelist_name)
    result.set("nnodes", nnodes, nnodes_source)
    result.set("node_rank", node_rank, rank_source)
    result.set("master_addr", hosts[0], f"{nodelist_name} (first host)")
    if env.has("MASTER_PORT"):
        result.set("master_port", env.int("MASTER_PORT", minimum=1), "MASTER_PORT")
    else:
        result.set("master_port", port_from_job_id(job_id), "derived from SLURM_JOB_ID")
    gpus = env.int("SLURM_GPUS_ON_NODE", 0, minimum=0)
    if gpus > 0:
        result.set("nproc_per_node", gpus, "SLURM_GPUS_ON_NODE")
    else:
        result.set("nproc_per_node", NPROC_GPUS_OR_ONE, "default: visible GPUs, else 1")
    return result
