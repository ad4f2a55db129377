"""An httpcore network backend on asyncio's own transports and protocols.

httpcore's default backend goes through anyio, which on asyncio costs, on the upstream
connections: an event-loop turn after every write and on every read that finds bytes waiting,
a cancel scope with its timer around each (httpcore's timeout), and on a read that has to wait,
the transport's reading resumed and paused again (two ``epoll_ctl`` calls). Each request pays
it on its way out and each chunk on its way back. Here a connection is an ``asyncio.Protocol``
that keeps what arrives until it is read: a read that finds bytes waiting returns them at
once, a timeout is one timer, and a write is the transport's own. Bytes, not HTTP: httpcore
(h11) still frames every message.

Bounds kept: what a connection holds unread is bounded (reading pauses past ``_HIGH_WATER``
bytes and resumes once read), every read, write, connect and TLS handshake has its timeout,
and a write waits while asyncio's buffer for it is over its high-water mark (the peer is not
reading). ``is_readable`` tells a spare that its upstream closed it or wrote to it before any
request (``spares.py``).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Iterable
from typing import Any

import httpcore

__all__ = ["AsyncioBackend"]

#: unread bytes a connection holds before it stops reading from its socket (httpcore reads
#: 64 KiB at a time)
_HIGH_WATER = 64 * 1024


def _expire(waiter: asyncio.Future[None], error: type[Exception]) -> None:
    if not waiter.done():
        waiter.set_exception(error("timed out"))


async def _wait(
    waiter: asyncio.Future[None], timeout: float | None, error: type[Exception]
) -> None:
    """``await waiter``, failing with ``error`` past ``timeout`` seconds (one timer)."""
    if timeout is None:
        await waiter
        return
    timer = asyncio.get_running_loop().call_later(timeout, _expire, waiter, error)
    try:
        await waiter
    finally:
        timer.cancel()


class _Connection(asyncio.Protocol):
    """What one connection's transport reports: bytes in, end of stream, loss, back-pressure."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.eof = False
        self.lost = False
        self.error: Exception | None = None
        self.paused = False  # reading paused: ``_HIGH_WATER`` bytes unread
        self.writing_paused = False
        self.reader: asyncio.Future[None] | None = None
        self.drainer: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        if self.size > _HIGH_WATER and self.transport is not None and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake_reader()
        return None  # the transport closes itself: nothing more is written after an answer

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.error = exc
        self._wake_reader()
        self.resume_writing()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.drainer is not None and not self.drainer.done():
            self.drainer.set_result(None)

    def _wake_reader(self) -> None:
        if self.reader is not None and not self.reader.done():
            self.reader.set_result(None)

    def take(self, max_bytes: int) -> bytes:
        first = self.chunks[0]
        if len(first) <= max_bytes:
            self.chunks.popleft()
        else:
            self.chunks[0], first = first[max_bytes:], first[:max_bytes]
        self.size -= len(first)
        if self.paused and self.size <= _HIGH_WATER // 2 and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return first


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection (see the module docstring)."""

    def __init__(self, transport: asyncio.Transport, connection: _Connection) -> None:
        self._transport = transport
        self._connection = connection

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        conn = self._connection
        while not conn.chunks:
            if conn.lost or conn.eof:
                if conn.error is not None:
                    raise httpcore.ReadError(str(conn.error) or type(conn.error).__name__)
                return b""
            conn.reader = asyncio.get_running_loop().create_future()
            try:
                await _wait(conn.reader, timeout, httpcore.ReadTimeout)
            finally:
                conn.reader = None
        return conn.take(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        conn = self._connection
        if conn.lost or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        waited = False
        while conn.writing_paused and not conn.lost:
            waited = True
            conn.drainer = asyncio.get_running_loop().create_future()
            try:
                await _wait(conn.drainer, timeout, httpcore.WriteTimeout)
            finally:
                conn.drainer = None
        if waited and conn.lost:  # closed with some of it still unsent
            error = conn.error
            raise httpcore.WriteError(str(error) if error else "the connection closed")

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            transport = await loop.start_tls(
                self._transport, self._connection, ssl_context,
                server_hostname=server_hostname, ssl_handshake_timeout=timeout,
            )  # fmt: skip
        except (TimeoutError, asyncio.TimeoutError) as exc:
            self._transport.close()
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except (OSError, ssl.SSLError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(str(exc)) from exc
        if transport is None:  # the connection closed during the handshake
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        assert isinstance(transport, asyncio.Transport)
        self._connection.transport = transport
        return AsyncioStream(transport, self._connection)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":  # bytes waiting, the end of the stream, or the connection lost
            conn = self._connection
            return bool(conn.chunks) or conn.eof or conn.lost
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend interface on asyncio (see the module docstring)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = None if local_address is None else (local_address, 0)
        made = loop.create_connection(_Connection, host, port, local_addr=local)
        transport, connection = await _connecting(made, timeout)
        for option in socket_options or ():  # asyncio has set TCP_NODELAY already
            transport.get_extra_info("socket").setsockopt(*option)
        return AsyncioStream(transport, connection)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        transport, connection = await _connecting(
            loop.create_unix_connection(_Connection, path), timeout
        )
        for option in socket_options or ():
            transport.get_extra_info("socket").setsockopt(*option)
        return AsyncioStream(transport, connection)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connecting(made: Any, timeout: float | None) -> tuple[asyncio.Transport, _Connection]:
    """A connection from ``made`` (``loop.create_connection(...)``) within ``timeout``."""
    try:
        transport, connection = await asyncio.wait_for(made, timeout)
    except (TimeoutError, asyncio.TimeoutError) as exc:
        raise httpcore.ConnectTimeout(str(exc)) from exc
    except OSError as exc:
        raise httpcore.ConnectError(str(exc)) from exc
    assert isinstance(transport, asyncio.Transport) and isinstance(connection, _Connection)
    return transport, connection
