"""OCI Data Science jobs: native multi-node runs and the legacy ADS `opctl` contract.

Native multi-node (https://docs.oracle.com/en-us/iaas/data-science/using/jobs-multi-node.htm):
every node gets NODE_RANK, INITIAL_CLUSTER_SIZE and CLUSTER_NODES_METADATA_FILE, a JSON
list of {"Rank": int, "IPAddress": str} that fills in as nodes come up. There is no
MASTER_ADDR: the master is rank 0's IP, and this node's own IP goes to torchrun's
--local-addr (c10d otherwise advertises a hostname other nodes cannot reach).

Legacy ADS (`ads opctl distributed-training`, and its docker-compose local test):
OCI__MODE=MAIN|WORKER, RANK, OCI__WORKER_COUNT, MASTER_ADDR or OCI__MAIN_ADDR, port 29400.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import NPROC_GPUS_OR_ONE, ClusterPlan, EnvReader, check_rank
from cloudddp.errors import CloudDDPError

NAME = "oci"
MASTER_PORT = 29400
NATIVE_VARIABLES = ("NODE_RANK", "INITIAL_CLUSTER_SIZE", "CLUSTER_NODES_METADATA_FILE")


def detect(environ: Mapping[str, str]) -> bool:
    native = all(environ.get(name) for name in NATIVE_VARIABLES)
    legacy = bool(environ.get("OCI__MODE"))
    return native or legacy


def read_metadata(path: Path) -> dict[int, str]:
    """Rank -> IP from the metadata file; a missing or half-written file reads as empty."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    try:
        entries: Any = json.loads(text)
    except json.JSONDecodeError:
        return {}  # the service may be rewriting it; read again at the next poll
    if not isinstance(entries, list):
        raise CloudDDPError(
            f"oci: the cluster metadata file {path} must hold a JSON list of "
            f'{{"Rank": int, "IPAddress": str}}, got {text.strip()[:200]!r}.'
        )
    ranks: dict[int, str] = {}
    for entry in entries:
        try:
            ranks[int(entry["Rank"])] = str(entry["IPAddress"])
        except (KeyError, TypeError, ValueError):
            raise CloudDDPError(
                f"oci: the cluster metadata file {path} has an entry {entry!r} without an "
                f'integer "Rank" and an "IPAddress".'
            ) from None
    return ranks


def wait_for_cluster(path: Path, size: int, options: DetectOptions) -> dict[int, str]:
    """Poll the metadata file until every rank is listed, within the timeout."""
    poll = min(max(options.metadata_poll, 0.05), 2.0)
    deadline = options.clock() + options.metadata_timeout
    while True:
        ranks = read_metadata(path)
        missing = [r for r in range(size) if r not in ranks]
        if not missing:
            return ranks
        if options.clock() >= deadline:
            raise CloudDDPError(
                f"oci: the cluster metadata file {path} (CLUSTER_NODES_METADATA_FILE) still lacks "
                f"rank(s) {', '.join(map(str, missing))} of INITIAL_CLUSTER_SIZE={size} after "
                f"{options.metadata_timeout:g} s; those nodes never came up. Raise "
                f"--metadata-timeout if they start slowly."
            )
        options.sleep(poll)


def native_plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    size = env.int("INITIAL_CLUSTER_SIZE", minimum=1)
    rank = env.int("NODE_RANK", minimum=0)
    check_rank(rank, size, "NODE_RANK", "INITIAL_CLUSTER_SIZE")
    path = Path(env.str("CLUSTER_NODES_METADATA_FILE"))
    ranks = wait_for_cluster(path, size, options)
    result = ClusterPlan(provider=NAME, rdzv_id=environ.get("JOB_RUN_OCID", "cloudddp"))
    result.set("nnodes", size, "INITIAL_CLUSTER_SIZE")
    result.set("node_rank", rank, "NODE_RANK")
    result.set("hosts", [ranks[r] for r in range(size)], "CLUSTER_NODES_METADATA_FILE")
    result.set("master_addr", ranks[0], "CLUSTER_NODES_METADATA_FILE (rank 0)")
    result.set("master_port", MASTER_PORT, "OCI convention (29400)")
    result.set("local_addr", ranks[rank], f"CLUSTER_NODES_METADATA_FILE (rank {rank})")
    result.set("nproc_per_node", NPROC_GPUS_OR_ONE, "default: visible GPUs, else 1")
    ifname = environ.get("NCCL_SOCKET_IFNAME") or environ.get("GLOO_SOCKET_IFNAME")
    if ifname:
        result.set("network_interface", ifname, "NCCL_SOCKET_IFNAME")
    return result


def legacy_plan(environ: Mapping[str, str]) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    mode = env.str("OCI__MODE").upper()
    if mode not in ("MAIN", "WORKER"):
        raise CloudDDPError(f"oci: OCI__MODE={environ['OCI__MODE']!r} must be MAIN or WORKER.")
    workers = env.int("OCI__WORKER_COUNT", 0, minimum=0)
    size = workers + 1
    rank = env.int("RANK", 0 if mode == "MAIN" else None, minimum=0)
    check_rank(rank, size, "RANK", "OCI__WORKER_COUNT+1")
    if mode == "MAIN" and rank != 0:
        raise CloudDDPError(f"oci: OCI__MODE=MAIN but RANK={rank}; the main node must be rank 0.")
    result = ClusterPlan(provider=NAME, rdzv_id=environ.get("JOB_RUN_OCID", "cloudddp"))
    result.set("nnodes", size, "OCI__WORKER_COUNT+1")
    result.set("node_rank", rank, "RANK")
    for name in ("MASTER_ADDR", "OCI__MAIN_ADDR"):
        if env.has(name):
            result.set("master_addr", environ[name], name)
            break
    else:
        if mode == "WORKER":
            raise CloudDDPError("oci: OCI__MODE=WORKER needs MASTER_ADDR or OCI__MAIN_ADDR (the main node's address).")
        result.set("master_addr", "127.0.0.1", "main node (self)")
    result.set("master_port", env.int("MASTER_PORT", MASTER_PORT, minimum=1), "MASTER_PORT or 29400")
    result.set("nproc_per_node", NPROC_GPUS_OR_ONE, "default: visible GPUs, else 1")
    return result


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    if all(environ.get(name) for name in NATIVE_VARIABLES):
        return native_plan(environ, options)
    return legacy_plan(environ)
