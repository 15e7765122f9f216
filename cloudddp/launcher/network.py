"""Waiting for the master's name to resolve (cloud DNS can lag the node's start); the launchers' own listeners."""

from __future__ import annotations

import ipaddress
import socket
import sys
import time
from collections.abc import Callable, Mapping

from cloudddp.errors import CloudDDPError


def parse_host_map(text: str, what: str = "CLOUDDDP_HOST_MAP") -> dict[str, str]:
    """`algo-1=127.0.0.1,algo-2=127.0.0.1` -> {"algo-1": "127.0.0.1", ...}."""
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, addr = item.partition("=")
        if not sep or not name.strip() or not addr.strip():
            raise CloudDDPError(f"{what}={text!r}: each entry must look like NAME=ADDRESS, got {item!r}.")
        mapping[name.strip()] = addr.strip()
    return mapping


def resolves(host: str, resolve: Callable[[str], object] = lambda h: socket.getaddrinfo(h, None)) -> bool:
    try:
        resolve(host)
        return True
    except (socket.gaierror, UnicodeError):
        return False


def wait_for_host(
    host: str,
    timeout: float,
    *,
    poll: float = 1.0,
    resolve: Callable[[str], object] = lambda h: socket.getaddrinfo(h, None),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once `host` resolves; raise a CloudDDPError naming it after `timeout` s.

    Says once that it waits: a node that sits here for minutes (cloud DNS lagging) tells the log why.
    """
    deadline = clock() + timeout
    waiting = False
    while True:
        try:
            resolve(host)
            return
        except (socket.gaierror, UnicodeError) as exc:
            if clock() >= deadline:
                raise CloudDDPError(
                    f"the master host {host!r} did not resolve within {timeout:g} s ({exc}). "
                    f"Check the platform's DNS, pass --master-addr, or map the name with "
                    f"--host-map {host}=ADDRESS."
                ) from None
            if not waiting:
                waiting = True
                print(f"cloudddp: waiting up to {timeout:g} s for the master host {host!r} to resolve ({exc})",
                      file=sys.stderr, flush=True)  # fmt: skip
        sleep(poll)


def listen(port: int) -> socket.socket:
    """A TCP listener on `port` for IPv6 and IPv4 alike (the fail-fast channel, `--check`).

    `create_server(("", port))` alone listens on IPv4 only: with `--master-addr ::1` (or a master name that resolves
    to an IPv6 address first) the other nodes never reached node 0, and a failure was lost. Where the system has no
    dual-stack socket (or no IPv6 at all), IPv4 only, as before.
    """
    if socket.has_dualstack_ipv6():
        try:
            return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
        except OSError:
            pass  # IPv6 switched off on this machine: IPv4 below raises the error that counts
    return socket.create_server(("", port))


def peer_address(conn: socket.socket) -> str:
    """The address a connection came from, an IPv4 peer of a dual-stack listener as IPv4 (not ::ffff:10.0.0.2)."""
    if conn.family not in (socket.AF_INET, socket.AF_INET6):
        return "?"
    address = str(conn.getpeername()[0])
    return address[7:] if address.lower().startswith("::ffff:") and "." in address else address


def is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def is_local_address(address: str) -> bool:
    """Whether `address` (an IP) belongs to this machine: only a local address can be bound."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def names_this_machine(host: str, environ: Mapping[str, str]) -> bool | None:
    """Whether `host` (a name or an address, as the job gives it, before any host map) is this machine.

    True: the pod's or machine's own name (HOSTNAME, the host name; a Kubernetes service name `<job>-worker-0` or its
    FQDN matches the pod of that name), or an address of this machine. False: another machine's name or address, or
    a name that does not resolve here. None: a loopback address (127.0.0.1, ::1, localhost), which every node on
    this machine has, or the wildcard 0.0.0.0 / :: (a connection to it reaches whichever machine makes it), so it
    cannot say which of them is meant.
    """
    wanted = host.strip().lower().rstrip(".")
    if not is_ip_address(wanted):
        mine = {name.strip().lower().rstrip(".") for name in (environ.get("HOSTNAME", ""), socket.gethostname())}
        mine.discard("")
        if wanted in mine or wanted.split(".")[0] in {name.split(".")[0] for name in mine}:
            return True
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(wanted, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return False  # not resolvable here: not this machine's name (a host map names it for the others)
    ips = [ipaddress.ip_address(address.split("%", 1)[0]) for address in addresses]
    if any(ip.is_loopback or ip.is_unspecified for ip in ips):
        return None
    return any(is_local_address(address) for address in addresses)
