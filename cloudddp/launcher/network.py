"""Waiting for the master's name to resolve (cloud DNS can lag the node's start)."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable

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
