"""A lean HTTP/1.1 client transport over asyncio streams, behind httpx's API: the proxy's
upstream client (``promptslim serve``) and the load tester's (``promptslim loadtest``).

Why not httpx's default transport (httpcore + h11) for a plain ``http://`` server: on the way to
the first token, the proxy's own time was mostly its upstream client. Measured on a 2-core VM
(issue 12): about 1 ms of CPU per request before the request's bytes left (connection-pool
locks, anyio cancel scopes, trace hooks, h11's event machine), head and body written as two
socket sends, and, per relayed chunk, a timeout context and several small reads. This
transport writes head and body in one send, parses from its own buffer (everything that
arrived together at once) and bounds reads with one lazy watchdog per connection. With it the
proxy's added TTFT at one stream went from 3.1 to about 1.2 ms, and a load generator at 100
streams stopped being its own bottleneck (``benchmarks/bench_proxy.py``).

httpx stays the interface: this is an ``httpx.AsyncBaseTransport``, so requests, responses,
timeouts (``request.extensions["timeout"]``) and exceptions are httpx's, an
``httpx.AsyncClient`` can wrap it, and httpx's ``trace`` extension is honoured for the events
``promptslim loadtest`` reads. It speaks HTTP/1.1 to ``http://`` only (a model server beside
the proxy); callers keep httpx's own transport for ``https://`` (TLS, HTTP/2).

What it does: keep-alive connections pooled per host (LIFO, an expiry, a limit on connections
with a pool timeout); responses framed by ``Transfer-Encoding: chunked``, ``Content-Length`` or
the connection's end; interim 1xx responses skipped; a reused connection that turns out closed
before any response byte is retried once on a fresh one (the server closed it while idle). What
it refuses, as :class:`httpx.RemoteProtocolError`: a malformed status line, header or chunk
size, a head over 64 KiB, conflicting lengths, a body cut short. Not thread-safe (like httpx's
async transports): one event loop uses it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from .errors import BackendUnavailable

try:
    import httpx
except ImportError as exc:  # pragma: no cover - exercised where httpx is missing
    raise BackendUnavailable(
        "httpx (the HTTP client API of promptslim.http11)", extra="serve"
    ) from exc

__all__ = ["Http11Transport"]

T = TypeVar("T")
#: httpx's ``trace`` request extension: ``await trace(event_name, info)``
Trace = Callable[[str, dict[str, Any]], Awaitable[None]]

_HEAD_LIMIT = 64 * 1024  # a response head (status line + headers) larger than this is refused
_LINE_LIMIT = 4096  # a chunk-size or trailer line
_READ_SIZE = 64 * 1024
_CRLF = b"\r\n"
_HEX_DIGITS = b"0123456789abcdefABCDEF"
_NO_BODY_STATUS = frozenset({204, 304})
# framing is ours to write: whatever the caller's headers said about it is replaced
_FRAMING = frozenset({b"content-length", b"transfer-encoding", b"connection"})

if sys.version_info >= (3, 11):

    async def _within(aw: Awaitable[T], seconds: float | None) -> T:
        # asyncio.timeout is a timer handle, not a task per wait (wait_for before 3.12)
        async with asyncio.timeout(seconds):
            return await aw

else:  # pragma: no cover - Python 3.10

    async def _within(aw: Awaitable[T], seconds: float | None) -> T:
        return await asyncio.wait_for(aw, seconds)


class _Connection:
    """One keep-alive connection to one (host, port), with its own read buffer.

    Parsing works on ``buf``; the socket is read (``fill``) only when the buffer cannot
    progress, so each wait for the upstream is one read, and everything that arrived together
    is parsed without another trip through the event loop.

    The read timeout is a lazy watchdog, not a timeout per read: ``fill`` notes when it began
    waiting, and one timer per connection checks that note when it fires, re-arming itself for
    the rest of the wait; only a wait past its limit fails (the waiting read raises
    ``_ReadTimedOut``). A timeout context around every read (a timer handle created, pushed on
    the loop's heap and cancelled per SSE event) was the largest avoidable cost per relayed
    chunk at 100 streams."""

    __slots__ = ("_limit", "_reading", "_since", "_timer", "buf", "idle_since", "key", "reader", "writer")  # fmt: skip

    def __init__(
        self, key: tuple[str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.key = key
        self.reader = reader
        self.writer = writer
        self.buf = bytearray()
        self.idle_since = 0.0
        self._reading = False
        self._since = 0.0
        self._limit = 0.0
        self._timer: asyncio.TimerHandle | None = None

    async def fill(self, timeout: float | None) -> bool:
        """Append what the socket has (waiting up to ``timeout``); False at its end."""
        if timeout is None:
            data = await self.reader.read(_READ_SIZE)
        else:
            loop = asyncio.get_running_loop()
            self._since, self._limit = loop.time(), timeout
            deadline = self._since + timeout
            timer = self._timer
            if timer is None or timer.when() > deadline:  # none yet, or armed for later
                if timer is not None:
                    timer.cancel()
                self._timer = loop.call_at(deadline, self._watch, loop)
            self._reading = True
            try:
                data = await self.reader.read(_READ_SIZE)
            finally:
                self._reading = False
        self.buf += data
        return bool(data)

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if not self._reading:
            return  # nobody waiting: the next fill arms a new timer
        deadline = self._since + self._limit
        if loop.time() >= deadline:
            self.reader.set_exception(_ReadTimedOut())  # the waiting read raises it
        else:  # data came and a later wait began: check again at its own deadline
            self._timer = loop.call_at(deadline, self._watch, loop)

    def usable(self, now: float, expiry: float) -> bool:
        # the server may have closed it while it sat idle: its FIN is seen as EOF
        return (
            not self.buf
            and not self.reader.at_eof()
            and not self.writer.is_closing()
            and now - self.idle_since < expiry
        )

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.writer.close()  # no wait for the close handshake: nothing more is read


class _ReadTimedOut(Exception):
    """A read waited past its limit (set on the StreamReader by the connection's watchdog)."""


class _Framing:
    """How a response's body ends, and whether the connection outlives it."""

    __slots__ = ("chunked", "keep_alive", "length")

    def __init__(self, *, chunked: bool, length: int | None, keep_alive: bool) -> None:
        self.chunked = chunked
        self.length = length  # None with chunked False: the body ends with the connection
        self.keep_alive = keep_alive


# where a chunked body's parser is
_SIZE_LINE, _DATA, _DATA_END, _TRAILERS = range(4)


class _Body(httpx.AsyncByteStream):
    """A response body, yielded as the socket gives it; returns its connection when closed.

    Each piece is everything that arrived together: with chunked framing, the data of every
    chunk in the buffer at once (under load several SSE events land in one read; one piece
    means one write to the client instead of several). Nothing waits for more data before
    what is there is handed on."""

    def __init__(
        self,
        transport: Http11Transport,
        conn: _Connection,
        framing: _Framing,
        read_timeout: float | None,
    ) -> None:
        self._transport = transport
        self._conn = conn
        self._framing = framing
        self._timeout = read_timeout
        self._complete = False
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn, timeout, framing = self._conn, self._timeout, self._framing
        try:
            if framing.chunked:
                async for data in _chunked(conn, timeout):
                    yield data
            elif framing.length is not None:
                remaining = framing.length
                while remaining:
                    if not conn.buf and not await conn.fill(timeout):
                        raise httpx.RemoteProtocolError(
                            f"upstream closed the connection {remaining} bytes before the "
                            f"end of a {framing.length}-byte body"
                        )
                    data = bytes(conn.buf[:remaining])
                    del conn.buf[: len(data)]
                    remaining -= len(data)
                    yield data
            else:
                while conn.buf or await conn.fill(timeout):
                    data = bytes(conn.buf)
                    conn.buf.clear()
                    yield data
        except _ReadTimedOut as exc:
            raise httpx.ReadTimeout(f"upstream sent nothing for {timeout} s") from exc
        except OSError as exc:
            raise httpx.ReadError(f"reading the upstream's body: {exc!r}") from exc
        self._complete = True

    async def aclose(self) -> None:
        if not self._released:
            self._released = True
            # bytes beyond the response's end: the connection's state is unknown, close it
            reuse = self._complete and self._framing.keep_alive and not self._conn.buf
            self._transport._release(self._conn, reuse=reuse)


async def _chunked(conn: _Connection, timeout: float | None) -> AsyncIterator[bytes]:
    """``Transfer-Encoding: chunked``, decoded: parse what the buffer holds, hand it on, then
    read more. Trailer fields are read and dropped (uvicorn could not send them anyway)."""
    buf = conn.buf
    state, left = _SIZE_LINE, 0
    out: list[bytes] = []
    while True:
        while True:  # as far as the buffer goes
            if state == _DATA:
                if not buf:
                    break
                data = bytes(buf[:left])
                del buf[: len(data)]
                out.append(data)
                left -= len(data)
                if not left:
                    state = _DATA_END
            elif state == _DATA_END:
                if len(buf) < 2:
                    break
                if buf[:2] != _CRLF:
                    raise httpx.RemoteProtocolError("a chunk not followed by CRLF")
                del buf[:2]
                state = _SIZE_LINE
            else:  # a size line or a trailer line
                at = buf.find(_CRLF)
                if at < 0:
                    if len(buf) > _LINE_LIMIT:
                        raise httpx.RemoteProtocolError(f"a chunk line over {_LINE_LIMIT} bytes")
                    break
                line = bytes(buf[:at])
                del buf[: at + 2]
                if state == _TRAILERS:
                    if not line:  # the empty line that ends the body
                        if out:
                            yield b"".join(out)
                        return
                    continue
                left = _chunk_size(line)
                state = _DATA if left else _TRAILERS
        if out:
            yield out[0] if len(out) == 1 else b"".join(out)
            out = []
        if not await conn.fill(timeout):
            where = "mid-chunk" if state == _DATA else "mid-body"
            raise httpx.RemoteProtocolError(f"upstream closed the connection {where}")


def _chunk_size(line: bytes) -> int:
    size_text = line.split(b";", 1)[0].strip(b" \t")
    # hex digits only: int() would also take "0x", a sign, "_" and inner whitespace
    if not size_text or len(size_text) > 16 or size_text.translate(None, _HEX_DIGITS):
        raise httpx.RemoteProtocolError(f"bad chunk size line {line[:40]!r}")
    return int(size_text, 16)


class Http11Transport(httpx.AsyncBaseTransport):
    """Pooled keep-alive HTTP/1.1 to ``http://`` servers (see the module docstring).

    ``max_connections`` bounds connections open at once (a request beyond it waits up to the
    request's ``pool`` timeout, then :class:`httpx.PoolTimeout`); ``max_keepalive_connections``
    bounds the idle ones kept; an idle connection older than ``keepalive_expiry`` seconds is
    closed instead of reused."""

    def __init__(
        self,
        *,
        max_connections: int = 100,
        max_keepalive_connections: int = 100,
        keepalive_expiry: float = 5.0,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._slots = asyncio.Semaphore(max_connections)
        self._max_idle = max_keepalive_connections
        self._expiry = keepalive_expiry
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._idle_count = 0
        self._closed = False

    # ---- the request

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        ext = request.extensions
        return await self.send(
            request.method, request.url, request.headers.raw, body, ext.get("timeout"),
            request=request, trace=ext.get("trace"),
        )  # fmt: skip

    async def send(
        self,
        method: str,
        url: httpx.URL,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
        timeouts: Mapping[str, float | None] | None = None,
        *,
        request: httpx.Request | None = None,
        trace: Trace | None = None,
    ) -> httpx.Response:
        """The request from its parts, without building an ``httpx.Request`` first (the
        proxy's per-request path; building one costs more than writing the bytes). A ``Host``
        header is added from ``url`` when ``headers`` has none; framing headers are ours.
        ``timeouts`` as in httpx (``connect``, ``read``, ``write``, ``pool``; None: no limit).
        ``trace`` is httpx's ``trace`` extension: ``await trace(event, info)`` at the events
        httpcore names ``connection.connect_tcp.started`` / ``.complete``,
        ``http11.send_request_body.complete`` and ``http11.receive_response_headers.complete``
        (how ``promptslim loadtest`` places a request's time)."""
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"this transport speaks plain http, not {url.scheme!r} ({url})"
            )
        if self._closed:
            raise RuntimeError("the transport is closed")
        timeouts = timeouts or {}
        key = (url.host, url.port or 80)
        message = _request_bytes(method, url, headers, body)
        head_only = method == "HEAD"
        await self._take_slot(timeouts.get("pool"))
        conn = self._idle_connection(key)
        reused = conn is not None
        try:
            while True:
                if conn is None:
                    conn = await self._connect(key, timeouts.get("connect"), trace)
                try:
                    head = await self._exchange(conn, message, timeouts, trace)
                    break
                except _ClosedBeforeResponse as exc:
                    conn.close()
                    if not reused:
                        raise httpx.RemoteProtocolError(
                            "upstream closed the connection without a response"
                        ) from exc.__cause__
                    # a keep-alive connection the server had closed while idle: once more,
                    # on a fresh one
                    conn, reused = None, False
        except BaseException:
            if conn is not None:
                conn.close()
            self._slots.release()
            raise
        version, status, reason, headers = head
        try:
            framing = _framing(version, status, headers, head_only=head_only)
        except httpx.RemoteProtocolError:
            conn.close()
            self._slots.release()
            raise
        stream = _Body(self, conn, framing, timeouts.get("read"))
        return httpx.Response(
            status,
            headers=headers,
            stream=stream,
            extensions={"http_version": version, "reason_phrase": reason},
            request=request,
        )

    async def _exchange(
        self,
        conn: _Connection,
        message: bytes,
        timeouts: Mapping[str, float | None],
        trace: Trace | None = None,
    ) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
        """Send the request; read the final response head (interim 1xx ones skipped)."""
        writer = conn.writer
        try:
            writer.write(message)  # head and body: one send
            if writer.transport.get_write_buffer_size():  # a body larger than the socket takes
                await _within(writer.drain(), timeouts.get("write"))
        except asyncio.TimeoutError as exc:
            raise httpx.WriteTimeout("the upstream took no more of the request body") from exc
        except OSError as exc:
            raise _ClosedBeforeResponse from exc
        if trace is not None:
            await trace("http11.send_request_body.complete", {})
        read_timeout = timeouts.get("read")
        buf = conn.buf
        first = True  # no response byte yet: a close now is safe to retry
        while True:
            try:
                while (end := buf.find(b"\r\n\r\n")) < 0:
                    if len(buf) > _HEAD_LIMIT:
                        raise httpx.RemoteProtocolError(f"a response head over {_HEAD_LIMIT} bytes")
                    if not await conn.fill(read_timeout):
                        if first and not buf:
                            raise _ClosedBeforeResponse
                        raise httpx.RemoteProtocolError(
                            "upstream closed the connection mid-response-head"
                        )
            except _ReadTimedOut as exc:
                raise httpx.ReadTimeout(
                    f"no response head from the upstream in {read_timeout} s"
                ) from exc
            except OSError as exc:
                if first and not buf:
                    raise _ClosedBeforeResponse from exc
                raise httpx.ReadError(f"reading the upstream's response: {exc!r}") from exc
            head = _parse_head(bytes(buf[: end + 4]))
            del buf[: end + 4]
            first = False
            if not 100 <= head[1] < 200 or head[1] == 101:
                if trace is not None:
                    await trace("http11.receive_response_headers.complete", {"status": head[1]})
                return head

    # ---- the pool

    async def _take_slot(self, timeout: float | None) -> None:
        if not self._slots.locked():
            await self._slots.acquire()  # free: returns without suspending
            return
        try:
            await _within(self._slots.acquire(), timeout)
        except asyncio.TimeoutError as exc:
            raise httpx.PoolTimeout(f"no upstream connection free within {timeout} s") from exc

    def _idle_connection(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used: the least likely to be closed
            self._idle_count -= 1
            if conn.usable(now, self._expiry):
                return conn
            conn.close()
        return None

    async def _connect(
        self, key: tuple[str, int], timeout: float | None, trace: Trace | None = None
    ) -> _Connection:
        host, port = key
        if trace is not None:
            await trace("connection.connect_tcp.started", {"host": host, "port": port})
        try:
            reader, writer = await _within(asyncio.open_connection(host, port), timeout)
        except asyncio.TimeoutError as exc:
            raise httpx.ConnectTimeout(
                f"connecting to {host}:{port} took over {timeout} s"
            ) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        if trace is not None:
            await trace("connection.connect_tcp.complete", {"host": host, "port": port})
        return _Connection(key, reader, writer)

    def _release(self, conn: _Connection, *, reuse: bool) -> None:
        if reuse and not self._closed and self._idle_count < self._max_idle:
            conn.idle_since = time.monotonic()
            self._idle.setdefault(conn.key, []).append(conn)
            self._idle_count += 1
        else:
            conn.close()
        self._slots.release()

    async def aclose(self) -> None:
        """Close the idle connections; those in use close when their response does."""
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        self._idle_count = 0


class _ClosedBeforeResponse(Exception):
    """The connection ended before a byte of the response: safe to retry on a fresh one."""


def _request_bytes(
    method: str, url: httpx.URL, headers: Sequence[tuple[bytes, bytes]], body: bytes
) -> bytes:
    """Request line, headers (framing replaced by ours) and body, as one message."""
    parts = [method.encode("ascii"), b" ", url.raw_path, b" HTTP/1.1\r\n"]
    has_host = False
    for name, value in headers:
        lowered = name.lower()
        if lowered in _FRAMING:
            continue
        if b"\r" in value or b"\n" in value or b"\r" in name or b"\n" in name or b":" in name:
            raise httpx.LocalProtocolError(f"header {name!r}: line breaks or ':' in it")
        has_host = has_host or lowered == b"host"
        parts += (name, b": ", value, _CRLF)
    if not has_host:
        parts += (b"host: ", url.netloc, _CRLF)
    if body or method in ("POST", "PUT", "PATCH"):
        parts += (b"content-length: ", str(len(body)).encode("ascii"), _CRLF)
    parts += (_CRLF, body)
    return b"".join(parts)


def _parse_head(raw: bytes) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    lines = raw[:-4].split(_CRLF)
    status_line = lines[0].split(b" ", 2)
    version = status_line[0]
    if (
        len(status_line) < 2
        or version not in (b"HTTP/1.1", b"HTTP/1.0")
        or len(status_line[1]) != 3
        or not status_line[1].isdigit()
    ):
        raise httpx.RemoteProtocolError(f"bad status line {lines[0][:60]!r}")
    reason = status_line[2] if len(status_line) > 2 else b""
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
            # no name, whitespace before the colon, or obsolete line folding
            raise httpx.RemoteProtocolError(f"bad header line {line[:60]!r}")
        headers.append((name, value.strip(b" \t")))
    return version, int(status_line[1]), reason, headers


def _framing(
    version: bytes, status: int, headers: list[tuple[bytes, bytes]], *, head_only: bool
) -> _Framing:
    keep_alive = version == b"HTTP/1.1"
    chunked = False
    other_encoding = False
    length: int | None = None
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            codings = [c.strip() for c in value.lower().split(b",")]
            chunked = codings[-1] == b"chunked"
            other_encoding = not chunked
        elif lowered == b"content-length":
            if not value.isdigit():
                raise httpx.RemoteProtocolError(f"bad Content-Length {value[:30]!r}")
            if length is not None and int(value) != length:
                raise httpx.RemoteProtocolError("conflicting Content-Length headers")
            length = int(value)
        elif lowered == b"connection":
            tokens = {t.strip() for t in value.lower().split(b",")}
            if b"close" in tokens:
                keep_alive = False
            elif b"keep-alive" in tokens and version == b"HTTP/1.0":
                keep_alive = True
    if head_only or status in _NO_BODY_STATUS:
        return _Framing(chunked=False, length=0, keep_alive=keep_alive)
    if chunked:
        return _Framing(chunked=True, length=None, keep_alive=keep_alive)
    if other_encoding or length is None:  # the body ends when the server closes
        return _Framing(chunked=False, length=None, keep_alive=False)
    return _Framing(chunked=False, length=length, keep_alive=keep_alive)
