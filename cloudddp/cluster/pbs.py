"""PBS Pro / Torque (OpenPBS): one launcher per node, hosts from `$PBS_NODEFILE`.

Contract: the PBS Professional / OpenPBS User Guide, "PBS environment variables"
(https://www.openpbs.org; Torque documents the same PBS_NODEFILE and PBS_JOBID).
PBS_NODEFILE lists one line per slot, hosts repeated, in allocation order; the distinct
hosts in first-appearance order are the nodes and the first is the master. PBS has no
node-index variable: the rank is PMI_RANK / OMPI_COMM_WORLD_RANK when one rank per node
was started with mpiexec, else this host's position in the file. The port is derived
from PBS_JOBID, so two jobs sharing a node do not collide.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path

from cloudddp.cluster.claims import Claim
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import ClusterPlan, EnvReader, check_rank, port_from_job_id
from cloudddp.errors import CloudDDPError

NAME = "pbs"
# Set by MPI launchers that started one rank per node (MPICH/Intel MPI hydra, Open MPI).
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK")
# The MoM sets both for every job, and does not start one whose node file it cannot write (openpbs/openpbs commit
# cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a, src/resmom/start_exec.c, "PBS_JOBID" and "PBS_NODEFILE").
CLAIMS = (
    Claim(
        NAME, "a PBS job", ("PBS_JOBID", "PBS_NODEFILE"),
        upstream="openpbs/openpbs cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a src/resmom/start_exec.c",
    ),
)  # fmt: skip


def detect(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("PBS_NODEFILE")) and bool(environ.get("PBS_JOBID"))


def read_nodefile(path: Path) -> list[str]:
    """Distinct hosts of the node file (one line per slot), in first-appearance order."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise CloudDDPError(
            f"pbs: cannot read the node file PBS_NODEFILE={str(path)!r} ({exc.strerror or exc})."
        ) from None
    except UnicodeDecodeError:
        raise CloudDDPError(f"pbs: the node file PBS_NODEFILE={str(path)!r} is not text.") from None
    hosts = list(dict.fromkeys(line.strip() for line in lines if line.strip()))
    if not hosts:
        raise CloudDDPError(f"pbs: the node file PBS_NODEFILE={str(path)!r} lists no hosts.")
    return hosts


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def same_host(a: str, b: str) -> bool:
    """Whether two names are the same host: equal, or a short name and an FQDN starting with it."""
    a, b = a.lower().rstrip("."), b.lower().rstrip(".")
    if a == b:
        return True
    if _is_ip(a) or _is_ip(b):
        return False
    if "." not in a:
        return a == b.split(".", 1)[0]
    if "." not in b:
        return b == a.split(".", 1)[0]
    return False


def matching_positions(hosts: list[str], names: list[str]) -> list[int]:
    """The indexes of `hosts` that are this host by any of its `names` (short name and FQDN both ways)."""
    return [i for i, host in enumerate(hosts) if any(same_host(host, name) for name in names)]


def host_position(hosts: list[str], names: list[str], path: str) -> int:
    """This host's index among `hosts`, matching short names and FQDNs both ways."""
    exact = [i for i, host in enumerate(hosts) if any(host.lower() == name.lower() for name in names)]
    if len(exact) == 1:
        return exact[0]
    matches = matching_positions(hosts, names)
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(hosts)
    mine = ", ".join(names)
    if not matches:
        raise CloudDDPError(
            f"pbs: this host (known as {mine}) is not among the hosts in PBS_NODEFILE={path!r} "
            f"({listed}); start one launcher per node with mpiexec (PMI_RANK) or run it on the "
            f"job's nodes."
        )
    raise CloudDDPError(
        f"pbs: this host (known as {mine}) matches several hosts in PBS_NODEFILE={path!r} "
        f"({', '.join(hosts[i] for i in matches)}); set PMI_RANK to choose the node rank."
    )


def check_rank_is_this_host(hosts: list[str], rank: int, rank_name: str, names: list[str], path: str) -> None:
    """The MPI rank must be this host's place in the node file where this host is in it: node 0 holds the store
    at the first host. A rank elsewhere is more than one launcher on a host (`mpiexec -n 4` over 2 hosts gives
    ranks 0 and 1 on the first), whose ranks beyond the hosts were refused without a word on the real cause."""
    mine = matching_positions(hosts, names)
    if mine and rank not in mine:
        raise CloudDDPError(
            f"pbs: {rank_name}={rank}, but this host ({', '.join(names)}) is node {mine[0]} in PBS_NODEFILE={path!r} "
            f"({', '.join(hosts)}): more than one launcher was started on a host, or in another order than the node "
            f"file. Start one per host, in the node file's order (OpenPBS: mpiexec --hostfile $PBS_NODEFILE -ppn 1; "
            f"Open MPI: --map-by ppr:1:node), or use the default starter, pbsdsh."
        )


def plan(environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan:
    env = EnvReader(environ, NAME)
    job_id = env.str("PBS_JOBID")
    path = env.str("PBS_NODEFILE")
    hosts = read_nodefile(Path(path))
    nnodes = len(hosts)
    rank_name = env.first(*RANK_VARIABLES)
    if rank_name is not None:
        node_rank = env.int(rank_name, minimum=0)
        check_rank(node_rank, nnodes, rank_name, "the number of hosts in PBS_NODEFILE")
        check_rank_is_this_host(hosts, node_rank, rank_name, options.this_host_names(), path)
        rank_source = rank_name
    else:
        node_rank = host_position(hosts, options.this_host_names(), path)
        rank_source = f"PBS_NODEFILE (position of {hosts[node_rank]})"

    result = ClusterPlan(provider=NAME)
    result.set("rdzv_id", job_id, "PBS_JOBID")
    result.set("hosts", hosts, "PBS_NODEFILE")
    result.set("nnodes", nnodes, "PBS_NODEFILE (distinct hosts)")
    result.set("node_rank", node_rank, rank_source)
    result.set("master_addr", hosts[0], "PBS_NODEFILE (first host)")
    result.set_master_port(env, port_from_job_id(job_id), "derived from PBS_JOBID")
    result.set_nproc_per_node()
    return result
