"""Which network interface owns an IPv4 address (what Oracle ADS does with psutil, standard library here)."""

from __future__ import annotations

import contextlib
import fcntl
import socket
import struct

SIOCGIFADDR = 0x8915  # linux/sockios.h: get an interface's IPv4 address


def interface_address(name: str) -> str | None:
    """The IPv4 address of interface `name`, or None (no IPv4 address, not Linux)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def interface_for_address(address: str) -> str | None:
    """The name of the interface whose IPv4 address is `address` (ADS: `_get_interface_name`), or None."""
    with contextlib.suppress(OSError):
        for _, name in socket.if_nameindex():
            if interface_address(name) == address:
                return name
    return None
