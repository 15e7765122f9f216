"""The test gate (s3_gate.py) itself: a request whose client had closed before the gate read it
is never forwarded, and the same request from a client still there is."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from s3_gate import S3Gate

PUT = b"PUT /bucket/key HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello"


@pytest.fixture
def upstream() -> Iterator[socket.socket]:
    """A bare listening socket standing in for the S3 server: the test reads what reaches it."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(10)
        yield server


@pytest.fixture
def gate(upstream: socket.socket) -> Iterator[S3Gate]:
    proxy = S3Gate(upstream.getsockname()[1])
    yield proxy
    proxy.close()


@pytest.mark.network
def test_a_request_from_a_client_gone_before_the_gate_read_it_is_not_forwarded(
    upstream: socket.socket, gate: S3Gate
) -> None:
    # The gate's thread for this connection waits for the lock before it reads a byte.
    with gate.lock, socket.create_connection(("127.0.0.1", gate.port)) as client:
        client.sendall(PUT)  # the whole request, then the client is gone (a killed CLI's last PUT)
    server_side, _ = upstream.accept()
    with server_side:
        server_side.settimeout(10)
        assert server_side.recv(1024) == b""  # the gate closed its upstream connection and sent nothing
    assert gate.wait_for(lambda s: s.abandoned, timeout=10)
    assert gate.state.abandoned == [("PUT", "/bucket/key")] and gate.count("PUT") == 0


@pytest.mark.network
def test_the_same_request_from_a_client_still_there_is_forwarded_and_answered(
    upstream: socket.socket, gate: S3Gate
) -> None:
    with socket.create_connection(("127.0.0.1", gate.port), timeout=10) as client:
        client.sendall(PUT)
        server_side, _ = upstream.accept()
        with server_side:
            server_side.settimeout(10)
            received = b""
            while not received.endswith(b"hello"):
                received += server_side.recv(1024)
            assert received == PUT
            server_side.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            assert client.recv(1024).startswith(b"HTTP/1.1 200 OK")
    assert gate.count("PUT") == 1 and gate.state.abandoned == []
