"""A TCP relay on 127.0.0.1 in front of a server: adds a round-trip delay, and can go down and come back.

`TcpRelay(port, delay=0.02)` forwards every connection to 127.0.0.1:`port`, holding each chunk for half the
delay in each direction (ordered per direction; bandwidth is not limited), so a client sees a network 20 ms
away where this kernel has no netem. `down()` closes every open connection and stops listening (clients get
"connection refused", as from a server that went away); `up()` listens on the same port again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import TracebackType


class TcpRelay:
    def __init__(self, target_port: int, delay: float = 0.0) -> None:
        self.target_port, self.delay = target_port, delay
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.connections = 0  # accepted so far
        self.thread = threading.Thread(target=self.loop.run_forever, name="tcp-relay", daemon=True)
        self.thread.start()
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, work: object) -> object:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=30)  # type: ignore[arg-type]

    def up(self) -> None:
        self.call(self.listen())

    def down(self) -> None:
        self.call(self.stop_listening())

    async def listen(self) -> None:
        self.server = await asyncio.start_server(self.relay, "127.0.0.1", self.port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop_listening(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for writer in list(self.writers):
            writer.transport.abort()  # a reset, as when the far end goes away
        self.writers.clear()

    async def relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_writer.transport.abort()
            return
        self.writers |= {client_writer, server_writer}
        await asyncio.gather(self.pipe(client_reader, server_writer), self.pipe(server_reader, client_writer),
                             return_exceptions=True)  # fmt: skip
        for writer in (client_writer, server_writer):
            self.writers.discard(writer)
            writer.transport.abort()

    async def pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward one direction, each chunk `delay / 2` after it arrived, in order."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    writer.write_eof() if writer.can_write_eof() else None
                    return
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                writer.write(chunk)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        try:
            while chunk := await reader.read(1 << 16):
                queue.put_nowait((time.monotonic() + self.delay / 2, chunk))
            queue.put_nowait((0.0, b""))
            await sender
        finally:
            sender.cancel()

    def close(self) -> None:
        self.down()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    def __enter__(self) -> TcpRelay:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
