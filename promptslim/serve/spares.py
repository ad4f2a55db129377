"""Upstream connections opened ahead of the requests that will use them, each used once.

A fresh upstream connection per request keeps the proxy safe from an upstream that writes past
the end of an answer (``ServeConfig.upstream_keepalive``), and costs a TCP connect (with the
upstream's accept) on every request's way to the upstream. ``SpareConnections`` moves that
connect off the request's path without reusing anything: it keeps a few connections open
that have never carried a request, and hands one to the next request that needs one. The pool
still closes every connection after its one response (no keep-alive, ``Connection: close``),
so no response can be read from a connection that carried an earlier request.

A spare is discarded, never used, when it has been idle ``idle_s`` (below the idle timeouts of
common servers, so the upstream is not the one to close it) or when it is readable before any
request was sent on it: the upstream closed it, or wrote bytes nobody asked for. Spares are
opened at start-up and whenever a connection to the upstream closes, up to ``spares`` ready
or opening at once; an idle proxy holds none once ``idle_s`` has passed.

It plugs into httpcore through its public network-backend extension point
(``httpcore.AsyncConnectionPool(network_backend=...)``); ``SpareTransport`` is that pool as an
httpx transport, so the rest of the proxy keeps speaking httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Coroutine, Iterable, Iterator
from typing import Any

import httpcore
import httpx

__all__ = ["SpareConnections", "SpareTransport"]

#: a request up to this size (head and body) goes to the upstream in one write (``_Released``)
_COALESCE_BYTES = 64 * 1024


class SpareConnections(httpcore.AsyncNetworkBackend):
    """A network backend that answers ``connect_tcp`` for ``host:port`` from connections it
    opened ahead (see the module docstring); any other target is connected as usual."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        spares: int,
        idle_s: float,
        connect_timeout_s: float,
        backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.target = (host, port)
        self.spares = spares
        self.idle_s = idle_s
        self.connect_timeout_s = connect_timeout_s
        self._backend = backend if backend is not None else httpcore.AnyIOBackend()
        self._ready: deque[tuple[float, httpcore.AsyncNetworkStream]] = deque()
        self._opening = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        #: what became of the spares: opened ahead, handed to a request, discarded as stale
        #: (readable before use) or as idle too long, failed to open
        self.counts = {"opened": 0, "used": 0, "stale": 0, "expired": 0, "failed": 0}

    @property
    def ready(self) -> int:
        return len(self._ready)

    # ---- the backend interface

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if (host, port) != self.target or local_address is not None or socket_options:
            return await self._backend.connect_tcp(
                host, port, timeout, local_address, socket_options
            )
        stream = self._take()
        if stream is None:
            stream = await self._backend.connect_tcp(host, port, timeout)
        return _Released(stream, self)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._backend.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)

    # ---- the spares

    def refill(self) -> None:
        """Open spares up to the bound, in the background (at start-up, and whenever a
        connection to the upstream closes); outside an event loop, nothing."""
        if self._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._expire()
        while len(self._ready) + self._opening < self.spares:
            self._opening += 1
            self._spawn(self._open_one())

    async def aclose(self) -> None:
        """Close every spare and stop opening more."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        while self._ready:
            await self._ready.popleft()[1].aclose()

    def _take(self) -> httpcore.AsyncNetworkStream | None:
        """The oldest usable spare (oldest first, so under load none sits until it expires)."""
        self._expire()
        while self._ready:
            _, stream = self._ready.popleft()
            if stream.get_extra_info("is_readable"):  # closed by the upstream, or bytes waiting
                self.counts["stale"] += 1
                self._spawn(stream.aclose())
                continue
            self.counts["used"] += 1
            return stream
        return None

    def _expire(self) -> None:
        deadline = time.monotonic() - self.idle_s
        while self._ready and self._ready[0][0] <= deadline:
            self.counts["expired"] += 1
            self._spawn(self._ready.popleft()[1].aclose())

    async def _open_one(self) -> None:
        try:
            host, port = self.target
            stream = await self._backend.connect_tcp(host, port, self.connect_timeout_s)
        except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError):
            self.counts["failed"] += 1  # the next request connects (and reports) on its own
            return
        finally:
            self._opening -= 1
        if self._closed:
            await stream.aclose()
            return
        self.counts["opened"] += 1
        self._ready.append((time.monotonic(), stream))
        asyncio.get_running_loop().call_later(self.idle_s, self._expire)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)  # a reference, so the task is not collected while it runs
        task.add_done_callback(self._tasks.discard)


class _Released(httpcore.AsyncNetworkStream):
    """A connection to the upstream that opens a spare in its place when it closes.

    It also sends a request's head and a small body in one write: httpcore writes them one
    after the other, which on loopback is two segments, two wake-ups of the upstream (which
    reads the head, then waits for the body) and, through anyio, an event-loop turn between
    them, all on the way to the upstream's first byte. A write is held (up to
    ``_COALESCE_BYTES``) until the next write, read or close; httpcore reads the response
    only once the whole request is written, so nothing it sent is held while it waits."""

    def __init__(self, stream: httpcore.AsyncNetworkStream, owner: SpareConnections) -> None:
        self._stream = stream
        self._owner = owner
        self._closed = False
        self._held = b""
        self._held_timeout: float | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._held:
            try:
                await self._send_held()
            except httpcore.WriteError:
                pass  # as httpcore does: an upstream that closed early may have answered; read it
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if len(self._held) + len(buffer) <= _COALESCE_BYTES:
            self._held += buffer
            self._held_timeout = timeout
            return
        await self._send_held()
        await self._stream.write(buffer, timeout)  # a large body as it is, never copied

    async def _send_held(self) -> None:
        held, self._held = self._held, b""
        if held:
            await self._stream.write(held, self._held_timeout)

    async def aclose(self) -> None:
        self._held = b""  # a request given up before its answer was read: never sent
        try:
            await self._stream.aclose()
        finally:
            if not self._closed:
                self._closed = True
                self._owner.refill()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        tls = await self._stream.start_tls(ssl_context, server_hostname, timeout)
        return _Released(tls, self._owner)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


# ---------------------------------------------------------------- as an httpx transport

# most specific first: the first match names the error
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProxyError, httpx.ProxyError),
)


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    """httpcore's exceptions as httpx's, which is what the proxy catches."""
    try:
        yield
    except Exception as exc:
        for source, target in _ERRORS:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        with _as_httpx_errors():
            await self._stream.aclose()


class SpareTransport(httpx.AsyncBaseTransport):
    """httpcore's connection pool on ``SpareConnections``, as an httpx transport (what
    ``httpx.AsyncHTTPTransport`` does for HTTP/1.1, with the backend chosen here)."""

    def __init__(self, backend: SpareConnections, *, limits: httpx.Limits) -> None:
        self.backend = backend
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=backend,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            response = await self._pool.handle_async_request(core)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.backend.aclose()  # first: the pool's closing connections open no spares
        await self._pool.aclose()
