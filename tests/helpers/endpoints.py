"""Loopback endpoints that fail the way a network does, for the bounded-time error tests."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def refused_endpoint() -> Iterator[str]:
    """A port bound but not listening: connecting is refused, and no other process can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@contextlib.contextmanager
def silent_endpoint() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog does) and never answers a byte."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
