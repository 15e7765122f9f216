"""Fail fast across nodes: when one node's job fails, every node stops.

torchrun alone cannot do this: a node whose script dies before (or outside) a
collective leaves its peers waiting in rendezvous or in a collective until a timeout
of up to 30 minutes, burning the whole cluster. So the launchers keep a small side
channel. Node 0 listens on the control port (the master port + 1 by default); every
other node connects and says HELLO. A launcher whose torchrun ends says DONE or
FAIL; node 0 answers a FAIL (or a peer that vanishes without a word) with ABORT to
everyone, and a peer that loses node 0 without a DONE stops too.

Protocol, one line each: `HELLO <rank> <rdzv_id> [<host>]`, `DONE <rank>`, `FAIL <rank> <code>`,
`ABORT <rank> <code>`. Messages carrying another job's rdzv_id are ignored. Node 0 answers a HELLO
with `TIME <seconds since the epoch>`: the node measures its clock skew against node 0 (the midpoint
of the round trip, as `--check` does), which the launcher reports when the rendezvous fails.

Node 0 also remembers when it last heard from each node, so when the job cannot start (a node
that never came up: the rendezvous times out) it can say which ranks and hosts are missing and
what was last heard from the others (`missing_report`).
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Callable
from urllib.parse import quote

from cloudddp.launcher.network import listen, peer_address

RETRY_SECONDS = 0.1  # node 0's listener usually appears within milliseconds of ours


STOPPED_BY = {"129": "SIGHUP", "130": "SIGINT", "143": "SIGTERM"}  # 128 + the signal a stop sends


def ended(who: str, code: str) -> str:
    """How another node's end reads in this node's log: a cancel, max-runtime or spot stop reaches the nodes one by
    one, and the first one stopped is no failure."""
    if code in STOPPED_BY:
        return f"{who} was stopped (exit code {code}, {STOPPED_BY[code]})"
    return f"{who} failed (exit code {code})"


class PeerWatch:
    def __init__(
        self,
        node_rank: int,
        nnodes: int,
        master_addr: str,
        port: int,
        rdzv_id: str,
        on_abort: Callable[[str, int | None], None],
        hosts: list[str] | None = None,
    ) -> None:
        self.node_rank, self.nnodes = node_rank, nnodes
        # On the wire percent-encoded: the protocol splits lines at whitespace, so an id with a space (--rdzv-id
        # "my job") never matched and fail-fast was silently off. Common ids (job names, OCIDs) are unchanged.
        self.master_addr, self.port, self.rdzv_id = master_addr, port, quote(rdzv_id, safe="")
        self.on_abort = on_abort
        self.hosts = hosts or []  # the platform's host list, rank order (static jobs): names the missing ones
        self.finished = threading.Event()  # our own torchrun has ended
        self.aborted = threading.Event()
        self.lock = threading.Lock()
        self.peers: dict[int, socket.socket] = {}
        self.master: socket.socket | None = None
        self.server: socket.socket | None = None
        self.heard: dict[int, tuple[float, str, str]] = {}  # rank -> (time, host, last message), node 0 only
        self.clock_skew: float | None = None  # node 0's clock minus ours, once node 0 answered our HELLO
        self.stopped_by: int | None = None  # the rank whose failure or loss made us stop (the exit record says so)

    # -- shared --------------------------------------------------------------------------
    def _abort(self, reason: str, code: str | None = None, cause: int | None = None) -> None:
        """Stop our job; `code` is the failing node's exit code, which this node then exits with too; `cause` the
        rank that failed or went away."""
        if self.finished.is_set() or self.aborted.is_set():
            return
        self.aborted.set()
        self.stopped_by = cause
        print(f"cloudddp: stopping this node: {reason}", file=sys.stderr, flush=True)
        self.on_abort(reason, int(code) if code and code.isdigit() else None)

    @staticmethod
    def _send(sock: socket.socket | None, line: str) -> None:
        if sock is None:
            return
        with contextlib.suppress(OSError):
            sock.sendall(line.encode() + b"\n")

    @staticmethod
    def _lines(sock: socket.socket):  # type: ignore[no-untyped-def]
        buffer = b""
        while True:
            try:
                chunk = sock.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield line.decode(errors="replace").split()

    def start(self) -> None:
        self._thread(self._serve if self.node_rank == 0 else self._connect)

    @staticmethod
    def _thread(target: Callable[..., None], *args: object) -> None:
        """Run `target` in a daemon thread; an unexpected error disables fail-fast, never escapes."""

        def guarded() -> None:
            try:
                target(*args)
            except Exception as exc:  # a side channel must never take the job down
                print(f"cloudddp: fail-fast channel error ({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)

        threading.Thread(target=guarded, name="cloudddp-peers", daemon=True).start()

    def report_exit(self, code: int) -> None:
        """Our torchrun ended with `code`: tell the others, then stop watching."""
        self.finished.set()
        if self.node_rank == 0:
            word = "DONE 0" if code == 0 else f"ABORT 0 {code}"
            with self.lock:
                for sock in self.peers.values():
                    self._send(sock, word)
                    with contextlib.suppress(OSError):
                        sock.close()
            if self.server:
                with contextlib.suppress(OSError):
                    self.server.close()
        else:
            self._send(self.master, f"DONE {self.node_rank}" if code == 0 else f"FAIL {self.node_rank} {code}")
            if self.master:
                with contextlib.suppress(OSError):
                    self.master.close()

    # -- node 0 --------------------------------------------------------------------------
    def _serve(self) -> None:
        try:
            server = listen(self.port)  # IPv6 and IPv4: a master given as ::1 is reached too
        except (OSError, OverflowError) as exc:
            print(f"cloudddp: fail-fast channel disabled (port {self.port}: {exc})", file=sys.stderr, flush=True)
            return
        self.server = server
        while not self.finished.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            self._thread(self._watch_peer, conn)

    def _watch_peer(self, conn: socket.socket) -> None:
        rank = None
        done = False
        address = peer_address(conn)
        for words in self._lines(conn):
            if words[:1] == ["HELLO"] and len(words) in (3, 4) and words[2] == self.rdzv_id and words[1].isdigit():
                rank = int(words[1])
                host = f"{words[3]} ({address})" if len(words) == 4 else address
                with self.lock:
                    self.peers[rank] = conn
                self._send(conn, f"TIME {time.time():.6f}")
            if rank is not None:
                self.heard[rank] = (time.time(), host, " ".join(words[:1]))
            if words[:1] == ["HELLO"]:
                continue
            if rank is None:
                break  # not one of ours
            elif words[:1] == ["DONE"]:
                done = True
            elif words[:1] == ["FAIL"] and len(words) == 3:
                self._broadcast_abort(rank, words[2])
                self._abort(ended(f"node {rank}", words[2]), words[2], cause=rank)
                return
        if rank is not None and not done and not self.finished.is_set():
            self._broadcast_abort(rank, "lost")
            self._abort(f"node {rank}'s launcher went away without finishing", cause=rank)

    def _broadcast_abort(self, rank: int, code: str) -> None:
        with self.lock:
            for peer_rank, sock in self.peers.items():
                if peer_rank != rank:
                    self._send(sock, f"ABORT {rank} {code}")

    def missing_report(self, now: float | None = None) -> str | None:
        """Node 0: which nodes never reached this launcher, and what was last heard from the others."""
        if self.node_rank != 0:
            return None
        now = time.time() if now is None else now
        missing = [rank for rank in range(1, self.nnodes) if rank not in self.heard]
        if not missing:
            return None
        lines = [f"cloudddp: {len(missing)} of {self.nnodes} nodes never reached node 0 (no HELLO on the "
                 f"fail-fast port {self.port}): rank(s) {', '.join(map(self._named, missing))}"]  # fmt: skip
        for rank, (when, host, what) in sorted(self.heard.items()):
            stamp = time.strftime("%H:%M:%S", time.localtime(when))
            lines.append(f"cloudddp:   rank {rank} on {host}: last heard {what} at {stamp} ({now - when:.0f} s ago)")
        return "\n".join(lines)

    def _named(self, rank: int) -> str:
        return f"{rank} ({self.hosts[rank]})" if rank < len(self.hosts) else str(rank)

    # -- other nodes ---------------------------------------------------------------------
    def _connect(self) -> None:
        while not self.finished.is_set():
            try:
                sock = socket.create_connection((self.master_addr, self.port), timeout=5)
                sock.settimeout(None)
                break
            except OSError:
                time.sleep(RETRY_SECONDS)
        else:
            return
        self.master = sock
        sent = time.time()
        self._send(sock, f"HELLO {self.node_rank} {self.rdzv_id} {socket.gethostname()}")
        for words in self._lines(sock):
            if words[:1] == ["TIME"] and len(words) == 2:
                with contextlib.suppress(ValueError):
                    self.clock_skew = float(words[1]) - (sent + time.time()) / 2
            if words[:1] == ["DONE"]:
                return
            if words[:1] == ["ABORT"] and len(words) == 3:
                who = "node 0" if words[1] == "0" else f"node {words[1]}"
                self._abort(ended(who, words[2]), words[2], cause=int(words[1]) if words[1].isdigit() else None)
                return
        if not self.finished.is_set():
            self._abort("lost the connection to node 0's launcher", cause=0)
