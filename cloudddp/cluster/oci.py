"""OCI Data Science jobs: native multi-node runs and the legacy ADS `opctl` contract; reader and emulation.

Native multi-node (https://docs.oracle.com/en-us/iaas/data-science/using/jobs-multi-node.htm):
every node gets NODE_RANK, INITIAL_CLUSTER_SIZE and CLUSTER_NODES_METADATA_FILE, a JSON
list of {"Rank": int, "IPAddress": str} that fills in as nodes come up. There is no
MASTER_ADDR: the master is rank 0's IP, and this node's own IP goes to torchrun's
--local-addr (c10d otherwise advertises a hostname other nodes cannot reach). As Oracle ADS's
PyTorch driver does (oracle/accelerated-data-science `ads/jobs/templates/driver_pytorch.py`):
the size falls back to NODE_COUNT, and NCCL/GLOO_SOCKET_IFNAME become the interface that owns
this node's metadata IP (or SET_SOCKET_IFNAME) unless already set. A partial set of these
variables is an error naming the missing one, never a silent one-node run.

Legacy ADS (`ads opctl distributed-training`, and its docker-compose local test): one job run
per node, OCI__MODE=MAIN|WORKER, RANK, OCI__WORKER_COUNT, port 29400. The main node's address
arrives as MASTER_ADDR (ADS's PyTorch cluster provider writes it to `MAIN_config.json` and the
workers export it) or OCI__MAIN_IP (`abstract_cluster_provider.basic_configuration`). cloudddp
does not perform that work-dir handshake itself (it reads no `OCI__WORK_DIR/<JOB_OCID>/` files):
a worker needs the address in its environment. Every node of one legacy job shares JOB_OCID
(ADS keys the work dir on it) while JOB_RUN_OCID differs per node, so JOB_OCID is the rendezvous id.

ADS's multi-run jobs (a PyTorchDistributedRuntime or ContainerRuntime with replicas, not a native multi-node job):
ADS starts one job run per node with NODE_RANK=i and NODE_COUNT=N, and on every run after the first
MAIN_JOB_RUN_OCID, the main run's OCID (oracle/accelerated-data-science `ads/jobs/builders/runtimes/base.py`
MultiNodeRuntime.run). The cluster forms as ADS's runner forms it (`driver_pytorch.py` Runner.__init__,
wait_for_host_ip_address): MASTER_ADDR where set; else the main run (no MAIN_JOB_RUN_OCID) logs
"Distributed Training HOST IP: <its address>" and every other run reads that line from the main run's log through
OCI Logging, with ADS's query, wait and authentication (cloudddp.cluster.ads_main_address; the oci SDK imported
lazily). Without the SDK, or when the line does not come within ADS's 15 minutes, a worker run is refused, naming
MAIN_JOB_RUN_OCID, what was tried and that MASTER_ADDR supplies the address.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cloudddp.cluster import ads_main_address
from cloudddp.cluster.claims import Claim
from cloudddp.cluster.environment import EmulatedCluster, EmulatedNode, generic_node
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import ClusterPlan, EnvReader, check_rank, read_text
from cloudddp.errors import CloudDDPError

NAME = "oci"
MASTER_PORT = 29400
METADATA = "CLUSTER_NODES_METADATA_FILE"
SIZE_VARIABLES = ("INITIAL_CLUSTER_SIZE", "NODE_COUNT")  # ADS's driver: the first set wins
MAIN_ADDRESS_VARIABLES = ("MASTER_ADDR", "OCI__MAIN_IP", "OCI__MAIN_ADDR")
PARSE_FAILURES_ALLOWED = 3  # as ADS: a file being rewritten may not parse; more than this is an error
MAIN_RUN = "MAIN_JOB_RUN_OCID"
ADS = "oracle/accelerated-data-science 0e785b9fd36fb354019e0924b94ac2b0ec6f235a"
# The three contracts (module docstring). NODE_RANK is generic (Lightning, Accelerate): a need, never a marker.
NATIVE = Claim(
    NAME, "an OCI Data Science multi-node job run", ("NODE_RANK", "INITIAL_CLUSTER_SIZE", METADATA),
    markers=("INITIAL_CLUSTER_SIZE", METADATA), stand_ins={"INITIAL_CLUSTER_SIZE": ("NODE_COUNT",)},
    upstream=f"{ADS} ads/jobs/templates/driver_pytorch.py Runner.__init__",
)  # fmt: skip
MULTI_RUN = Claim(
    NAME, "an ADS multi-run job (one job run per node)", ("NODE_RANK", "NODE_COUNT"), markers=("NODE_COUNT", MAIN_RUN),
    upstream=f"{ADS} ads/jobs/builders/runtimes/base.py MultiNodeRuntime.run",
)  # fmt: skip
LEGACY = Claim(
    NAME, "an `ads opctl` distributed-training cluster", ("OCI__MODE", "OCI__WORKER_COUNT"),
    stand_ins={"OCI__WORKER_COUNT": SIZE_VARIABLES},
    upstream=f"{ADS} ads/opctl/distributed/common/cluster_config_helper.py job_def_info, job_run_info",
)  # fmt: skip
CLAIMS = (NATIVE, MULTI_RUN, LEGACY)


def detect(environ: Mapping[str, str]) -> bool:
    # INITIAL_CLUSTER_SIZE and the metadata file are OCI's own names; NODE_RANK alone is not. A partial set of
    # them (or of the others' variables) is refused by the shared rule (cloudddp.cluster.claims).
    return bool(environ.get("OCI__MODE") or environ.get("INITIAL_CLUSTER_SIZE") or environ.get(METADATA)) or (
        MULTI_RUN.complete(environ)
    )


class MetadataUnreadable(Exception):
    """The metadata file exists but does not parse (yet)."""


def read_metadata(path: Path) -> dict[int, str]:
    """Rank -> IP from the metadata file; a missing or empty file reads as empty.

    Raises MetadataUnreadable for text that is not JSON (the service may be rewriting it) and a
    CloudDDPError for JSON that can never be right (not a list, bad entries, duplicate ranks).
    """
    text = read_text(path, f"oci: the cluster metadata file ({METADATA})")
    if text is None or not text.strip():
        return {}
    try:
        entries: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MetadataUnreadable(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(entries, list):
        raise CloudDDPError(
            f"oci: the cluster metadata file {path} must hold a JSON list of "
            f'{{"Rank": int, "IPAddress": str}}, got {text.strip()[:200]!r}.'
        )
    ranks: dict[int, str] = {}
    for entry in entries:
        try:
            rank, address = int(entry["Rank"]), entry["IPAddress"]
        except (KeyError, TypeError, ValueError):
            rank, address = -1, None
        if rank < 0 or not isinstance(address, str) or not address.strip():
            raise CloudDDPError(
                f"oci: the cluster metadata file {path} has an entry {entry!r:.200} without an "
                f'integer "Rank" >= 0 and a non-empty "IPAddress".'
            )
        if rank in ranks:
            raise CloudDDPError(f"oci: the cluster metadata file {path} lists rank {rank} twice.")
        ranks[rank] = address.strip()
    return ranks


def wait_for_cluster(
    path: Path, size: int, options: DetectOptions, size_name: str = "INITIAL_CLUSTER_SIZE"
) -> dict[int, str]:
    """Poll the metadata file until every rank is listed, within the timeout."""
    poll = min(max(options.metadata_poll, 0.05), 2.0)
    deadline = options.clock() + options.metadata_timeout
    failures, waiting = 0, False
    while True:
        try:
            ranks = read_metadata(path)
            failures, unreadable = 0, ""
        except MetadataUnreadable as exc:
            ranks, failures, unreadable = {}, failures + 1, str(exc)
            if failures > PARSE_FAILURES_ALLOWED:
                raise CloudDDPError(
                    f"oci: the cluster metadata file {path} ({METADATA}) does not parse as JSON ({unreadable}), "
                    f"{failures} reads in a row."
                ) from None
        missing = [r for r in range(size) if r not in ranks]
        if not missing:
            extra = sorted(r for r in ranks if r >= size)
            if extra:
                raise CloudDDPError(f"oci: the cluster metadata file {path} lists rank(s) {extra} beyond size {size}.")
            return ranks
        if options.clock() >= deadline:
            if unreadable:
                raise CloudDDPError(
                    f"oci: the cluster metadata file {path} ({METADATA}) does not parse as JSON ({unreadable})."
                )
            raise CloudDDPError(
                f"oci: the cluster metadata file {path} ({METADATA}) still lacks "
                f"rank(s) {', '.join(map(str, missing))} of {size_name}={size} after "
                f"{options.metadata_timeout:g} s; those nodes never came up. Raise "
                f"--metadata-timeout if they start slowly."
            )
        if not waiting:  # once: a node waiting minutes for slow peers says why in its log
            waiting = True
            print(f"cloudddp: oci: waiting up to {options.metadata_timeout:g} s for rank(s) "
                  f"{', '.join(map(str, missing))} in {METADATA}={str(path)!r}", file=sys.stderr, flush=True)  # fmt: skip
        options.sleep(poll)


def cluster_size(env: EnvReader) -> tuple[int, str] | None:
    name = env.first(*SIZE_VARIABLES)
    return (env.int(name, minimum=1), name) if name else None


def native_plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    size = cluster_size(env)
    if NATIVE.missing(environ) or size is None:
        raise NATIVE.error(environ)
    nnodes, size_name = size
    rank = env.int("NODE_RANK", minimum=0)
    check_rank(rank, nnodes, "NODE_RANK", size_name)
    ranks = wait_for_cluster(Path(environ[METADATA]), nnodes, options, size_name)
    result = ClusterPlan(provider=NAME)
    if env.has("JOB_RUN_OCID"):  # one job run holds every node of a native multi-node job
        result.set("rdzv_id", environ["JOB_RUN_OCID"], "JOB_RUN_OCID")
    result.set("nnodes", nnodes, size_name)
    result.set("node_rank", rank, "NODE_RANK")
    result.set("hosts", [ranks[r] for r in range(nnodes)], METADATA)
    result.set("master_addr", ranks[0], f"{METADATA} (rank 0)")
    result.set("master_port", env.port("MASTER_PORT", MASTER_PORT), "MASTER_PORT, else OCI convention (29400)")
    result.set("local_addr", ranks[rank], f"{METADATA} (rank {rank})")
    result.set_nproc_per_node()
    for name in ("SET_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        if env.has(name):
            result.set("network_interface", environ[name], name)
            break
    else:
        ifname = options.interface_for(ranks[rank])
        if ifname:
            result.set("network_interface", ifname, f"the interface owning {ranks[rank]} (as ADS does)")
    return result


def legacy_plan(environ: Mapping[str, str]) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    mode = env.str("OCI__MODE").upper()
    if mode not in ("MAIN", "WORKER"):
        raise CloudDDPError(f"oci: OCI__MODE={environ['OCI__MODE']!r} must be MAIN or WORKER.")
    size = cluster_size(env)
    if size is None:
        size = env.int("OCI__WORKER_COUNT", 0, minimum=0) + 1, "OCI__WORKER_COUNT+1"
    nnodes, size_source = size
    rank = env.int("RANK", 0 if mode == "MAIN" else None, minimum=0)
    check_rank(rank, nnodes, "RANK", size_source)
    if mode == "MAIN" and rank != 0:
        raise CloudDDPError(f"oci: OCI__MODE=MAIN but RANK={rank}; the main node must be rank 0.")
    result = ClusterPlan(provider=NAME)
    if env.has("JOB_OCID"):
        result.set("rdzv_id", environ["JOB_OCID"], "JOB_OCID (shared by every node's job run)")
    result.set("nnodes", nnodes, size_source)
    result.set("node_rank", rank, "RANK")
    name = env.first(*MAIN_ADDRESS_VARIABLES)
    if name:
        result.set("master_addr", environ[name], name)
    elif mode == "WORKER":
        handshake = (
            f" ADS's own runner would read it from MAIN_config.json under OCI__WORK_DIR={environ['OCI__WORK_DIR']!r}; "
            f"cloudddp does not do that work-dir handshake."
            if env.has("OCI__WORK_DIR")
            else ""
        )
        raise CloudDDPError(
            f"oci: OCI__MODE=WORKER needs the main node's address in MASTER_ADDR (or OCI__MAIN_IP, OCI__MAIN_ADDR).{handshake} "
            f"Export MASTER_ADDR on the worker (for example from the main job run's IP)."
        )
    else:
        result.set("master_addr", "127.0.0.1", "main node (self)")
    result.set("master_port", env.port("MASTER_PORT", MASTER_PORT), "MASTER_PORT or 29400")
    result.set_nproc_per_node()
    return result


def multi_run_plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    """An ADS multi-run job's node: NODE_RANK of NODE_COUNT; the main node's address from MASTER_ADDR, else as
    ADS's runner finds it (the main run logs it, the others read it from that run's log: ads_main_address)."""
    env = EnvReader(environ, NAME)
    nnodes, rank = env.int("NODE_COUNT", minimum=1), env.int("NODE_RANK", minimum=0)
    check_rank(rank, nnodes, "NODE_RANK", "NODE_COUNT")
    result = ClusterPlan(provider=NAME)
    main_run = env.first(MAIN_RUN, "JOB_RUN_OCID")  # the main run's own OCID on it
    if main_run:
        result.set("rdzv_id", environ[main_run], f"{main_run} (the main job run, shared by every node)")
    result.set("nnodes", nnodes, "NODE_COUNT")
    result.set("node_rank", rank, "NODE_RANK")
    if env.has("MASTER_ADDR"):
        result.set("master_addr", environ["MASTER_ADDR"], "MASTER_ADDR")
    elif nnodes == 1:
        result.set("master_addr", "127.0.0.1", "default (single node)")
    elif env.has(MAIN_RUN):
        result.set("master_addr", main_address_from_log(environ, rank, nnodes, options), f"{MAIN_RUN}'s log")
    elif rank == 0:  # the main run (ADS: no MAIN_JOB_RUN_OCID): its address, logged for the other runs
        address = own_address(rank, nnodes)
        ads_main_address.announce(address)
        result.set("master_addr", address, "this host's address (the main run), logged for the other runs")
    else:
        raise CloudDDPError(
            f"{multi_run_node(rank, nnodes, environ)}, and the main node's address is missing: MASTER_ADDR is not set "
            f"and neither is {MAIN_RUN}, the main job run's OCID that ADS gives every run after the first (its log "
            f"holds the address). {SUPPLY_ADDRESS}"
        )
    result.set("master_port", env.port("MASTER_PORT", MASTER_PORT), "MASTER_PORT, else ADS's rendezvous port (29400)")
    result.set_nproc_per_node()
    return result


SUPPLY_ADDRESS = (
    "Set MASTER_ADDR to the main job run's IP address on every run (MASTER_ADDR supplies the main node's address), "
    "or run the job as an OCI native multi-node job run (cloudddp's OCI provider submits those), whose nodes get "
    "each other's addresses. Refusing to plan a one-node run."
)


def multi_run_node(rank: int, nnodes: int, environ: Mapping[str, str]) -> str:
    main_run = f", {MAIN_RUN}={environ[MAIN_RUN]!r}" if environ.get(MAIN_RUN) else ""
    return (
        f"oci: this job run is node {rank} of {nnodes} of an ADS multi-run job (NODE_RANK={rank}, "
        f"NODE_COUNT={nnodes}{main_run}: one job run per node)"
    )


def main_address_from_log(environ: Mapping[str, str], rank: int, nnodes: int, options: DetectOptions) -> str:
    """The address the main run logged, searched for in OCI Logging as ADS's runner searches; refused if not found."""
    try:
        return ads_main_address.find(environ[MAIN_RUN], environ, options.clock, options.sleep)
    except ads_main_address.NotFound as exc:
        raise CloudDDPError(
            f"{multi_run_node(rank, nnodes, environ)}, and the main node's address is missing: MASTER_ADDR is not "
            f"set, and searching OCI Logging for the line {ads_main_address.HOST_IP_PREFIX.strip()!r} in the log of "
            f"the main job run {MAIN_RUN}={environ[MAIN_RUN]!r}, as ADS's runner does, found no address ({exc}). "
            f"{SUPPLY_ADDRESS}"
        ) from None


def own_address(rank: int, nnodes: int) -> str:
    """This host's address as ADS's Runner.find_self_ip finds it without a subnet lookup: its name, resolved.
    A loopback address (a host name that resolves to 127.0.1.1) is refused: the other runs could not reach it."""
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
        problem = f"resolves to {address}, a loopback address the other job runs cannot reach"
    except OSError as exc:
        address, problem = "", f"does not resolve ({exc})"
    if address and not address.startswith("127."):
        return address
    raise CloudDDPError(
        f"oci: this job run is the main node (NODE_RANK={rank}, NODE_COUNT={nnodes}, no {MAIN_RUN}) of an ADS "
        f"multi-run job, MASTER_ADDR is not set, and its host name {name!r} {problem}, so it has no address to log "
        f"for the other runs. Set MASTER_ADDR to this run's IP address on every run (MASTER_ADDR supplies the main "
        f"node's address)."
    )


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    if environ.get("OCI__MODE") and not environ.get(METADATA):
        return legacy_plan(environ)
    if not NATIVE.made(environ) and MULTI_RUN.made(environ):
        return multi_run_plan(environ, options)
    return native_plan(environ, options)


def emulate(cluster: EmulatedCluster) -> list[EmulatedNode]:
    """A native multi-node job run: NODE_RANK, INITIAL_CLUSTER_SIZE and a metadata file the local
    runner fills in as nodes start (`append_metadata`), one JOB_OCID and JOB_RUN_OCID for all nodes."""
    metadata = cluster.run_dir / "oci" / "cluster_nodes_metadata.json"
    nodes = []
    for rank in range(cluster.nodes):
        node = generic_node(cluster, f"node-{rank}", rank)
        node.env.update(
            NODE_RANK=str(rank),
            INITIAL_CLUSTER_SIZE=str(cluster.nodes),
            CLUSTER_NODES_METADATA_FILE=str(metadata),
            NODE_GROUP_NAME="cloudddp-group",
            JOB_OCID=f"ocid1.datasciencejob.local..{cluster.job_name}",
            JOB_RUN_OCID=f"ocid1.datasciencejobrun.local..{cluster.job_name}",
            NCCL_SOCKET_IFNAME="lo",
            GLOO_SOCKET_IFNAME="lo",
        )
        nodes.append(node)
    return nodes


def append_metadata(path: Path, rank: int, address: str = "127.0.0.1") -> None:
    """What the service does as each node comes up: add {"Rank", "IPAddress"} to the metadata file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = json.loads(path.read_text()) if path.is_file() else []
    entries.append({"Rank": rank, "IPAddress": address})
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries))
    os.replace(tmp, path)
