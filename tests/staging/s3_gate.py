"""An HTTP/1.1 pass-through proxy in front of a real S3 server that counts requests and can
hold PUTs back, so a test can count what a client sent and stop it at an exact point.

`allow_puts(n)`: the next n PUTs are forwarded; later ones wait (their bytes are read
but not forwarded) until `allow_puts(None)`, or are dropped by `drop_held()`. `refuse(...)`:
the next requests of a method get an error answer shaped like S3's instead of the server's.
A request whose client has already closed its end (killed, exited) is never forwarded.
Counting happens here, between the client and the server, from the bytes on the wire: it
does not depend on the client's own bookkeeping.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    raw: bytes = b""


@dataclass
class GateState:
    forwarded: Counter[str] = field(default_factory=Counter)  # method -> requests answered by the server
    targets: list[tuple[str, str]] = field(default_factory=list)  # (method, path) in order
    statuses: list[int] = field(default_factory=list)  # the server's answer to each, in the same order
    agents: list[str] = field(default_factory=list)  # each forwarded request's User-Agent, in the same order
    # Answered after drop_held() though sent before it (a killed client's request still in the server):
    # kept apart, so what a new client sends is counted alone.
    late: list[tuple[str, str]] = field(default_factory=list)
    # Read whole from a client that had already closed its end (killed, or exited): never forwarded.
    abandoned: list[tuple[str, str]] = field(default_factory=list)
    held: int = 0
    in_flight: int = 0  # requests read from a client and not yet answered or dropped
    epoch: int = 0  # drop_held() starts a new one: PUTs held from before are never forwarded
    put_budget: int | None = None  # None: no limit
    refusals: dict[str, list[Refusal]] = field(default_factory=dict)  # method -> answers to give instead
    refused: list[tuple[str, str]] = field(default_factory=list)  # (method, path) answered with a refusal


@dataclass
class Refusal:
    status: int
    code: str  # S3's error code, e.g. SlowDown
    close: bool = False  # `Connection: close` after the answer
    chunked: bool = False  # the error body in chunked transfer encoding

    def answer(self) -> bytes:
        body = f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{self.code}</Code><Message>refused by the test gate</Message></Error>'
        head = f"HTTP/1.1 {self.status} {self.code}\r\nContent-Type: application/xml\r\n"
        head += "Connection: close\r\n" if self.close else ""
        if self.chunked:
            half = len(body) // 2
            chunks = f"{half:x}\r\n{body[:half]}\r\n{len(body) - half:x}\r\n{body[half:]}\r\n0\r\n\r\n"
            return (head + "Transfer-Encoding: chunked\r\n\r\n" + chunks).encode()
        return (head + f"Content-Length: {len(body)}\r\n\r\n" + body).encode()


class Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buffer = sock, bytearray()  # bytearray: appending 64 MiB bodies stays linear

    def fill(self) -> bool:
        data = self.sock.recv(1 << 20)
        self.buffer.extend(data)
        return bool(data)

    def until(self, marker: bytes) -> bytes | None:
        while (end := self.buffer.find(marker)) < 0:
            if not self.fill():
                return None
        return self.take(end + len(marker))

    def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self.fill():
                raise ConnectionError("closed mid-body")
        return self.take(size)

    def take(self, size: int) -> bytes:
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def chunked(self) -> bytes:
        out = b""
        while True:
            line = self.until(b"\r\n") or b""
            out += line
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (trailer := self.until(b"\r\n")) not in (b"\r\n", None):
                    out += trailer
                return out + b"\r\n"
            out += self.exactly(size + 2)

    def message(self, no_body: bool = False) -> tuple[bytes, dict[str, str]] | None:
        head = self.until(b"\r\n\r\n")
        if head is None:
            return None
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
        if no_body:
            return head, headers
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return head + self.chunked(), headers
        return head + self.exactly(int(headers.get("content-length", "0"))), headers


def peer_gone(sock: socket.socket) -> bool:
    """Whether the other end has closed: the kernel holds its FIN (or RST) after everything it sent. A live
    HTTP client never closes its sending side while it waits for an answer."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:  # nothing queued: still there
        return False
    except OSError:  # reset
        return True


class S3Gate:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.state = GateState()
        self.lock = threading.Condition()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self.accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def allow_puts(self, count: int | None) -> None:
        with self.lock:
            self.state.put_budget = count
            self.lock.notify_all()

    def refuse(self, method: str, *refusals: Refusal) -> None:
        """Answer the next requests of `method` with these refusals, in order, without forwarding them."""
        with self.lock:
            self.state.refusals.setdefault(method, []).extend(refusals)

    def drop_held(self) -> None:
        """Forget the PUTs being held (their client is gone) and let every later PUT through."""
        with self.lock:
            self.state.epoch += 1
            self.state.put_budget = None
            self.lock.notify_all()

    def reset(self) -> None:
        with self.lock:
            self.state.forwarded.clear()
            self.state.targets.clear()
            self.state.statuses.clear()
            self.state.agents.clear()

    def count(self, method: str) -> int:
        with self.lock:
            return self.state.forwarded[method]

    def wait_for(self, predicate: object, timeout: float = 60) -> bool:
        with self.lock:
            return self.lock.wait_for(lambda: predicate(self.state), timeout)  # type: ignore[operator]

    def close(self) -> None:
        self.closed = True
        self.allow_puts(None)
        self.listener.close()

    def accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(client,), daemon=True).start()

    def serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        from_client, from_server = Reader(client), Reader(upstream)
        with self.lock:
            opened_in = self.state.epoch
        try:
            while True:
                head = from_client.message(no_body=True)
                if head is None:
                    return
                raw, headers = head
                with self.lock:
                    started_in = self.state.epoch
                if started_in != opened_in:
                    return  # a connection from before drop_held(): what its client had sent dies with it
                with self.lock:
                    self.state.in_flight += 1
                try:
                    if not self.forward(client, upstream, from_client, from_server, raw, headers, started_in):
                        return
                finally:
                    with self.lock:
                        self.state.in_flight -= 1
                        self.lock.notify_all()
        except (ConnectionError, OSError):
            return
        finally:
            client.close()
            upstream.close()

    def forward(self, client: socket.socket, upstream: socket.socket, from_client: Reader, from_server: Reader,
                raw: bytes, headers: dict[str, str], started_in: int) -> bool:  # fmt: skip
        """One request to the server and its answer back to the client; False once the connection is over."""
        method, target = raw.split(b" ", 2)[0].decode(), raw.split(b" ", 2)[1].decode()
        path = target.split("?")[0]  # what the state records: the object, without the query
        if headers.get("expect", "").lower() == "100-continue":
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            raw = b"\r\n".join(x for x in raw.split(b"\r\n") if not x.lower().startswith(b"expect:"))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = from_client.chunked()
        else:
            body = from_client.exactly(int(headers.get("content-length", "0")))
        with self.lock:
            refusal = self.state.refusals[method].pop(0) if self.state.refusals.get(method) else None
            if refusal:
                self.state.refused.append((method, path))
        if refusal:
            client.sendall(refusal.answer())
            return not refusal.close
        if method == "PUT":
            self.take_put_ticket(started_in)
        if peer_gone(client):
            # A request its client wrote just before it died, on a connection this gate accepted only later
            # (the epoch check cannot see it). Forwarded, it would land after the test had looked.
            with self.lock:
                self.state.abandoned.append((method, path))
                self.lock.notify_all()
            return False
        upstream.sendall(raw + body)
        response = from_server.message(no_body=method == "HEAD")
        if response is None:
            return False
        # Recorded before the client hears the answer: a test reading the state once its call has
        # returned must see this request (recording after sendall lost the last PUT once under load).
        with self.lock:
            late = started_in != self.state.epoch  # answered after drop_held(): not what a new client sent
            if late:
                self.state.late.append((method, path))
            else:
                self.state.forwarded[method] += 1
                self.state.targets.append((method, path))
                self.state.statuses.append(int(response[0].split(b" ", 2)[1]))
                self.state.agents.append(headers.get("user-agent", ""))
                self.lock.notify_all()
        client.sendall(response[0])
        return True

    def take_put_ticket(self, epoch: int) -> None:
        """Wait for the budget to allow one more PUT; a request from before drop_held() is never forwarded."""
        with self.lock:
            if self.state.epoch != epoch:
                raise ConnectionError("PUT from before drop_held")
            self.state.held += 1
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.state.put_budget is None or self.state.put_budget > 0)
            self.state.held -= 1
            if self.state.epoch != epoch:
                raise ConnectionError("held PUT dropped")
            if self.state.put_budget is not None:
                self.state.put_budget -= 1
