"""Settings that change how environments are read (not what they say)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from cloudddp.cluster.netif import interface_for_address


@dataclass
class DetectOptions:
    """Knobs for detection; the defaults are what a real job wants.

    `sleep` and `clock` are injectable so waiting logic is testable without waiting;
    `interface_for` (IP -> interface name) so a test can give a node any address.
    """

    metadata_timeout: float = 600.0
    metadata_poll: float = 2.0
    instance_groups: list[str] | None = None
    hostnames: list[str] | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    interface_for: Callable[[str], str | None] = interface_for_address

    def this_host_names(self) -> list[str]:
        """Every name this machine answers to: short name and FQDN."""
        if self.hostnames is not None:
            return self.hostnames
        names = [socket.gethostname()]
        fqdn = socket.getfqdn()
        if fqdn not in names:
            names.append(fqdn)
        return names
