"""`cloudddp-launch --check`: can this node take part in the job? One verdict line per node.

Run on every node of the job, as the job itself would be started (same platform detection):

- **DNS**: every host of the job resolves (the platform's host list, else the master), through
  `--host-map` where it names the host.
- **TCP**: the master port is reachable from this node. Node 0 listens on it (IPv6 and IPv4) for
  `--check-window` seconds and answers each node with its clock; the others connect (refused, timed
  out, or no route is said as such). Where the c10d rendezvous assigns the node ranks (a Workers-only
  PyTorchJob), the host of the rendezvous endpoint listens on the endpoint's port instead (`Meeting`).
- **Clock skew** against node 0: node 0's time against the midpoint of the round trip (the
  offset estimate NTP uses). More than `SKEW_LIMIT` seconds is a problem: logs stop lining up, and
  signed cloud requests (S3, OCI) are refused beyond a few minutes.

Node 0 also lists the nodes that checked in and the ones that never did. Exit 0 when this node's
verdict is OK, 1 otherwise.

The same checks run by themselves when a job's rendezvous fails: torchrun's own error (its
`@record` writes it to `TORCHELASTIC_ERROR_FILE`) names a rendezvous exception (a static store that
timed out or could not be reached, c10d's RendezvousTimeoutError or RendezvousConnectionError), and
`rendezvous_verdict` adds DNS, the rendezvous endpoint from this node and the clock skew the
fail-fast channel measured, so the error says why.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cloudddp.cluster.kubeflow import C10D_DEFAULT_PORT
from cloudddp.cluster.plan import ClusterPlan, split_host_port
from cloudddp.errors import CloudDDPError
from cloudddp.launcher.network import listen, names_this_machine, peer_address

SKEW_LIMIT = 1.0  # seconds
CONNECT_TIMEOUT = 3.0
# torchrun's exceptions when nodes cannot meet: the static store's client (DistNetworkError: cannot
# connect) and server (DistStoreError: timed out waiting for clients), and the dynamic handlers' own.
RENDEZVOUS_ERRORS = ("RendezvousTimeoutError", "RendezvousConnectionError", "DistNetworkError", "DistStoreError")


@dataclass
class Findings:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def verdict(self, plan: ClusterPlan, name: str | None = None) -> str:
        word = "OK" if not self.problems else "PROBLEM"
        details = "; ".join(self.problems + self.notes)
        return f"cloudddp-check: {name or f'node {plan.node_rank}'} ({socket.gethostname()}): {word}: {details}"


@dataclass
class Meeting:
    """Where `--check`'s nodes meet, and this node's part there: listen (`serves`) or connect.

    Node 0 listens on the master port. Where the rendezvous numbers the nodes itself (`rank` None: a Workers-only
    PyTorchJob, c10d without a node rank), no node knows it is node 0 before the job starts: the host of the
    rendezvous endpoint listens on the endpoint's port (free while no job runs), the others connect to it.
    """

    host: str
    port: int
    serves: bool
    rank: int | None

    @property
    def name(self) -> str:
        """This node in the verdict line."""
        if self.rank is not None:
            return f"node {self.rank}"
        return "the rendezvous host" if self.serves else "a node (its rank assigned by the rendezvous)"

    @property
    def server(self) -> str:
        return "node 0" if self.rank is not None else "the rendezvous host"


def default_meeting(plan: ClusterPlan) -> Meeting:
    return Meeting(plan.master_addr, plan.master_port, plan.node_rank == 0, plan.node_rank)


def rendezvous_meeting(plan: ClusterPlan, named_host: str, environ: Mapping[str, str]) -> Meeting:
    """`--check` for a job whose rendezvous assigns the node ranks: the endpoint's host serves, the others connect.

    `named_host`: the endpoint's host as the job names it (before `--host-map`), compared with this machine's names
    and addresses (network.names_this_machine). Where that cannot decide, a CloudDDPError says so (exit 2): a check
    in which every node took itself for node 0 (or none did) would only report nodes that never checked in.
    """
    endpoint = plan.endpoint
    if plan.rdzv_backend != "c10d":
        raise CloudDDPError(
            f"--check cannot check this job: its node ranks are assigned by the {plan.rdzv_backend} rendezvous at "
            f"{endpoint!r}, an etcd server rather than one of the nodes, so no node can answer the others' checks. "
            f"Run --check with --node-rank 0 on one node and --node-rank 1, 2, ... on the others."
        )
    host, port = split_host_port(endpoint)
    serves = names_this_machine(named_host, environ)
    if serves is None:
        raise CloudDDPError(
            f"--check cannot tell which node hosts this job's c10d rendezvous at {endpoint!r}: the node ranks are "
            f"assigned by the rendezvous (no node rank from the platform or --node-rank), and {named_host!r} is a "
            f"loopback or wildcard address, which names every node alike. Run --check with --node-rank 0 on the "
            f"node that hosts it and --node-rank 1, 2, ... on the others."
        )
    return Meeting(host, int(port) if port else C10D_DEFAULT_PORT, serves, None)


def resolve_hosts(plan: ClusterPlan, host_map: Mapping[str, str], findings: Findings) -> None:
    hosts = plan.hosts or [plan.master_addr]
    resolved = []
    for host in hosts:
        target = host_map.get(host, host)
        try:
            address = socket.getaddrinfo(target, None, type=socket.SOCK_STREAM)[0][4][0]
        except (socket.gaierror, UnicodeError) as exc:
            findings.problems.append(f"DNS: {host!r} does not resolve ({exc})")
            continue
        resolved.append(f"{host}={address}" + (" (host map)" if host in host_map else ""))
    if resolved:
        findings.notes.append(f"DNS {len(resolved)}/{len(hosts)}: {', '.join(resolved)}")


def port_taken(port: str) -> bool:
    """Whether another process listens on PORT here. Asked after torchrun is gone, so not our own store; with
    SO_REUSEADDR, as torch's TCPStore binds, connections in TIME_WAIT do not count."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", int(port)))
        except (ValueError, OverflowError):
            return False  # no port number to probe; the connection check names it
        except OSError:
            return True
    return False


def connect_error(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens there: node 0 not started, or another port)"
    if isinstance(exc, (TimeoutError, socket.timeout)):  # one class from Python 3.10 on
        return f"no answer within {CONNECT_TIMEOUT:g} s (a firewall or security group drops it?)"
    return f"{exc.strerror or exc}"


def ask_node_0(plan: ClusterPlan, window: float, findings: Findings, meeting: Meeting | None = None) -> None:
    """Connect to node 0's check listener, send our rank ("?" if the rendezvous assigns it), read its clock; retry
    until `window` ends. Connects over IPv6 or IPv4, as the address resolves (create_connection)."""
    meeting = meeting or default_meeting(plan)
    where = f"{meeting.host}:{meeting.port}"
    deadline = time.monotonic() + window
    last_error = ""
    rank = "?" if meeting.rank is None else meeting.rank
    while time.monotonic() < deadline:
        try:
            sent = time.time()
            with socket.create_connection((meeting.host, meeting.port), timeout=CONNECT_TIMEOUT) as sock:
                sock.sendall(f"CHECK {rank} {socket.gethostname()}\n".encode())
                answer = sock.makefile().readline().split()
                received = time.time()
            if answer[:1] != ["TIME"] or len(answer) != 2:
                findings.problems.append(
                    f"TCP: {where} answered, but not as {meeting.server}'s check ({' '.join(answer)!r})"
                )
                return
            skew = float(answer[1]) - (sent + received) / 2
            what = "master" if meeting.rank is not None else "rendezvous host"
            findings.notes.append(f"{what} {where} reachable ({(received - sent) * 1000:.1f} ms)")
            (findings.problems if abs(skew) > SKEW_LIMIT else findings.notes).append(
                f"clock skew {skew:+.3f} s vs {meeting.server}"
            )
            return
        except OSError as exc:
            last_error = connect_error(exc)
            time.sleep(0.2)
    what = "master" if meeting.rank is not None else "the rendezvous host"
    findings.problems.append(f"TCP: {what} {where} not reachable within {window:g} s: {last_error}")


def serve_node_0(plan: ClusterPlan, window: float, findings: Findings, meeting: Meeting | None = None) -> None:
    """Listen on the master port (IPv6 and IPv4); answer each node's CHECK with our clock; say who came and who not."""
    meeting = meeting or default_meeting(plan)
    try:
        server = listen(meeting.port)
    except OSError as exc:
        port = "the master port" if meeting.rank is not None else "the rendezvous port"
        findings.problems.append(f"TCP: cannot listen on {port} {meeting.port} ({exc.strerror or exc})")
        return
    came: list[tuple[int | None, str]] = []  # (rank, "host (address)"); rank None: assigned by the rendezvous
    deadline = time.monotonic() + window
    with server:
        while len(came) < plan.max_nodes - 1 and time.monotonic() < deadline:
            server.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                conn, _ = server.accept()
            except (TimeoutError, socket.timeout):  # noqa: UP041 (one class from Python 3.10 on; the job side runs on 3.8)
                break
            with conn, contextlib.suppress(OSError, ValueError):
                conn.settimeout(CONNECT_TIMEOUT)
                words = conn.makefile().readline().split()
                conn.sendall(f"TIME {time.time():.6f}\n".encode())
                if words[:1] == ["CHECK"] and len(words) == 3:
                    came.append((int(words[1]) if words[1].isdigit() else None, f"{words[2]} ({peer_address(conn)})"))
    if meeting.rank is None:
        report_unranked(plan, window, [who for _, who in came], findings)
        return
    ranked = {rank: who for rank, who in came if rank is not None}
    missing = [rank for rank in range(1, plan.max_nodes) if rank not in ranked]
    if ranked:
        findings.notes.append("checked in: " + ", ".join(f"rank {r} {ranked[r]}" for r in sorted(ranked)))
    if missing:
        findings.problems.append(f"never checked in within {window:g} s: rank(s) {', '.join(map(str, missing))}")


def report_unranked(plan: ClusterPlan, window: float, came: list[str], findings: Findings) -> None:
    """The rendezvous host's report: how many nodes came (their ranks are the rendezvous's to give, so a missing one
    cannot be named); fewer than the job's minimum is a problem, fewer than its maximum a note (elastic)."""
    least, most = plan.min_nodes - 1, plan.max_nodes - 1
    if came:
        findings.notes.append("checked in: " + ", ".join(came))
    if len(came) < least:
        findings.problems.append(
            f"only {len(came)} of the {least} other node(s) checked in within {window:g} s (node ranks are "
            f"assigned by the rendezvous, so the missing ones cannot be named)"
        )
    elif len(came) < most:
        findings.notes.append(f"{len(came)} of up to {most} other node(s) checked in within {window:g} s")


def check(
    plan: ClusterPlan, host_map: Mapping[str, str], window: float, meeting: Meeting | None = None
) -> tuple[int, str]:
    """This node's checks; returns (exit code, verdict line). `meeting`: where and how (default: node 0 listens on
    the master port, the others connect)."""
    meeting = meeting or default_meeting(plan)
    findings = Findings()
    resolve_hosts(plan, host_map, findings)
    if meeting.serves:
        serve_node_0(plan, window, findings, meeting)
    else:
        ask_node_0(plan, window, findings, meeting)
    return (0 if not findings.problems else 1), findings.verdict(plan, meeting.name)


def rendezvous_failure(error_file: str) -> str | None:
    """torchrun's own error (`{"message": {"message": "Type: text"}}`) if it is a rendezvous failure, else None.

    A failed worker's error is copied into the same file with its exit code as `errorCode` (torch's
    `dump_error_file`): that is the script's failure (a store lost mid-training included), not the rendezvous.
    """
    try:
        record = json.loads(Path(error_file).read_text()).get("message")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(record, dict) or "errorCode" in record or not isinstance(record.get("message"), str):
        return None
    message: str = record["message"]
    return message.strip() if message.split(":", 1)[0].strip() in RENDEZVOUS_ERRORS else None


def rendezvous_verdict(
    plan: ClusterPlan, host_map: Mapping[str, str], *, hosts_store: bool, clock_skew: float | None, no_clock: str
) -> str:
    """DNS of every host, one connection to the rendezvous endpoint, the clock skew vs node 0; one line.

    `hosts_store`: this node ran the rendezvous store itself (gone with torchrun, so not connected to).
    `clock_skew`: node 0's clock minus ours, as the fail-fast channel measured it; else `no_clock` says why not.
    """
    findings = Findings()
    resolve_hosts(plan, host_map, findings)
    host, found_port = split_host_port(plan.endpoint)  # [v6]:port too, as torch reads it
    port = found_port or ""
    if hosts_store and port_taken(port):
        findings.problems.append(
            f"port {port} ({plan.sources.get('master_port', 'the master port')}) is in use by another process on "
            f"this node, so the rendezvous store could not listen there (another job on this node?); pass "
            f"--master-port PORT"
        )
    elif hosts_store:
        findings.notes.append(f"this node hosted the rendezvous store on {plan.endpoint}")
    else:
        try:
            with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT):
                findings.notes.append(f"rendezvous {plan.endpoint} reachable")
        except (OSError, ValueError) as exc:
            reason = connect_error(exc) if isinstance(exc, OSError) else f"not a HOST:PORT ({exc})"
            findings.problems.append(f"TCP: rendezvous {plan.endpoint}: {reason}")
    if clock_skew is None:
        findings.notes.append(f"clock skew vs node 0 not measured ({no_clock})")
    else:
        (findings.problems if abs(clock_skew) > SKEW_LIMIT else findings.notes).append(
            f"clock skew {clock_skew:+.3f} s vs node 0"
        )
    return findings.verdict(plan)
