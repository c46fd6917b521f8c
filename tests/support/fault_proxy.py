"""A fault-injecting TCP proxy on 127.0.0.1 for outage tests (Kafka protocol aware).

The proxy runs an asyncio loop in a daemon thread; every control is a plain, thread-safe method,
so sync test code (and async tests, from their own loop) can break and heal the path to a server:

* :meth:`FaultProxy.cut` drops every open connection and stops listening (new connections are
  refused) until :meth:`FaultProxy.restore`.
* :meth:`FaultProxy.block_produce` (``kafka=True`` only) reads the client's request frames and
  closes a connection when it sends a Produce request (api key 0) instead of forwarding it; every
  other request passes, so consumers keep fetching and groups keep heartbeating.
  :meth:`FaultProxy.restore` ends it.

With ``kafka=False`` it is a plain byte pipe (e.g. for MongoDB) and only ``cut`` applies.

A Kafka broker must *advertise* the proxy's port (``advertised_port`` of the launchers in
``memstream.runtime.servers``), or clients go straight to the broker after their first metadata
request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, TypeVar

__all__ = ["PRODUCE_API_KEY", "FaultProxy", "ProxyStats"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

LOOPBACK = "127.0.0.1"
#: Kafka request api key of Produce.
PRODUCE_API_KEY = 0
_READ_SIZE = 65536


@dataclass(frozen=True)
class ProxyStats:
    """A snapshot of the proxy's counters."""

    #: Client connections accepted since the proxy started.
    connections: int
    #: Client connections open right now.
    open_connections: int
    #: Connections closed by :meth:`FaultProxy.cut`.
    connections_cut: int
    #: Produce requests that were not forwarded (their connection was closed instead).
    produce_blocked: int
    #: Upstream connections that failed (server down).
    upstream_failures: int
    #: Kafka requests forwarded, by api key (``kafka=True`` only).
    requests: dict[int, int] = field(default_factory=dict)


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, client: asyncio.StreamWriter, task: asyncio.Task[None]) -> None:
        self.client = client
        self.task = task
        self.upstream: asyncio.StreamWriter | None = None

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()


class FaultProxy:
    """Forward ``127.0.0.1:listen_port`` to ``upstream_host:upstream_port``, with faults on demand.

    ``listen_port=0`` (default) picks a free port at :meth:`start`; :meth:`restore` after a
    :meth:`cut` listens on the same port again. Use as a context manager, or ``start()`` /
    ``close()``. The upstream need not be running: the proxy connects to it per client
    connection (and closes the client's connection when that fails), so ``upstream_port`` may
    be set after ``start()`` (a broker that advertises the proxy's port is created after it).
    """

    def __init__(
        self,
        upstream_port: int,
        *,
        upstream_host: str = LOOPBACK,
        listen_port: int = 0,
        kafka: bool = True,
        name: str = "proxy",
        control_timeout: float = 10.0,
    ) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.kafka = kafka
        self.name = name
        self.control_timeout = control_timeout
        self._port = listen_port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = threading.Lock()
        self._cut = False
        self._block_produce = False
        self._connections = 0
        self._connections_cut = 0
        self._produce_blocked = 0
        self._upstream_failures = 0
        self._requests: Counter[int] = Counter()

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the loop thread and listen; returns once the port accepts connections."""
        if self._thread is not None:
            return self
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=f"fault-{self.name}", daemon=True)
        self._thread.start()
        ready.wait()
        try:
            self._call(self._listen())
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop listening, drop every connection and stop the loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.control_timeout)
        self._loop = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "cut" if self._cut else "blocking produce" if self._block_produce else "passing"
        return (
            f"<FaultProxy {self.name} {self.address} -> "
            f"{self.upstream_host}:{self.upstream_port} {state}>"
        )

    # -- controls (thread-safe) ---------------------------------------------------------------

    @property
    def listen_port(self) -> int:
        """The port clients connect to (known once started)."""
        if self._port == 0:
            raise RuntimeError(f"{self.name}: listen_port is known once the proxy has started")
        return self._port

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self._port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    @property
    def is_blocking_produce(self) -> bool:
        return self._block_produce

    def cut(self) -> None:
        """Drop every open connection and refuse new ones until :meth:`restore`."""
        self._call(self._cut_all())

    def block_produce(self) -> None:
        """Close any connection that sends a Produce request, until :meth:`restore`."""
        if not self.kafka:
            raise RuntimeError(f"{self.name}: block_produce needs a Kafka proxy (kafka=True)")
        with self._lock:
            self._block_produce = True
        log.info("%s: blocking produce requests", self.name)

    def restore(self) -> None:
        """End :meth:`cut` (listen again on the same port) and :meth:`block_produce`."""
        with self._lock:
            self._block_produce = False
        if self._cut:
            self._call(self._listen())

    def stats(self) -> ProxyStats:
        with self._lock:
            return ProxyStats(
                connections=self._connections,
                open_connections=len(self._links),
                connections_cut=self._connections_cut,
                produce_blocked=self._produce_blocked,
                upstream_failures=self._upstream_failures,
                requests=dict(self._requests),
            )

    @property
    def connections(self) -> int:
        return self.stats().connections

    @property
    def produce_blocked(self) -> int:
        return self.stats().produce_blocked

    # -- loop side ----------------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeError(f"{self.name}: the proxy is not running")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(self.control_timeout)

    async def _listen(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(
            self._accept, LOOPBACK, self._port, reuse_address=True
        )
        self._port = self._server.sockets[0].getsockname()[1]
        with self._lock:
            self._cut = False
        log.info("%s: listening on %s", self.name, self.address)

    async def _stop_listening(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _cut_all(self) -> None:
        with self._lock:
            self._cut = True
        # Close the listening socket first, so a client's reconnect is refused, then the links.
        await self._stop_listening()
        links = list(self._links)
        for link in links:
            link.abort()
        if links:  # return once they are gone (their handlers have seen the abort)
            await asyncio.wait([link.task for link in links], timeout=2.0)
        with self._lock:
            self._connections_cut += len(links)
        log.info("%s: cut (%d connections dropped)", self.name, len(links))

    async def _shutdown(self) -> None:
        await self._stop_listening()
        for link in list(self._links):
            link.abort()
        tasks = list(self._tasks)
        if tasks:
            # Aborted transports end the pipes; cancel what is still waiting on upstream.
            _, pending = await asyncio.wait(tasks, timeout=1.0)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        link = _Link(writer, task)
        self._tasks.add(task)
        self._links.add(link)
        with self._lock:
            self._connections += 1
        try:
            if self._cut:  # accepted just before the cut closed the listener
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    self.upstream_host, self.upstream_port
                )
            except OSError as exc:
                with self._lock:
                    self._upstream_failures += 1
                log.info("%s: upstream connection failed: %r", self.name, exc)
                return
            link.upstream = up_writer
            if self._cut:
                return
            to_server = asyncio.create_task(
                self._kafka_requests(reader, up_writer) if self.kafka else _pipe(reader, up_writer)
            )
            to_client = asyncio.create_task(_pipe(up_reader, writer))
            try:
                await asyncio.wait({to_server, to_client}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pipe in (to_server, to_client):
                    pipe.cancel()
                await asyncio.gather(to_server, to_client, return_exceptions=True)
        except asyncio.CancelledError:
            pass  # proxy shutdown; asyncio's stream callback would log a cancelled handler
        finally:
            link.abort()
            self._links.discard(link)
            self._tasks.discard(task)

    async def _kafka_requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Forward whole request frames; stop (closing the link) at a blocked Produce request."""
        while True:
            try:
                header = await reader.readexactly(4)
                body = await reader.readexactly(int.from_bytes(header, "big", signed=True))
            except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                return
            api_key = int.from_bytes(body[:2], "big", signed=True) if len(body) >= 2 else -1
            if api_key == PRODUCE_API_KEY and self._block_produce:
                with self._lock:
                    self._produce_blocked += 1
                log.info("%s: produce request blocked; closing the connection", self.name)
                return
            with self._lock:
                self._requests[api_key] += 1
            try:
                writer.write(header + body)
                await writer.drain()
            except ConnectionError:
                return


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_READ_SIZE):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        return
