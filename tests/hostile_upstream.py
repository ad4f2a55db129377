"""A deliberately misbehaving HTTP/1.1 upstream on 127.0.0.1, for the proxy's safety tests.

It is a test seam for promptslim's own code (the proxy), written on raw asyncio streams because
no well-behaved server library can be made to send broken framing. The request's
``X-Hostile`` header picks the misbehaviour; every answer carries the ``token`` the request's
last message holds, so a test can tell whose answer a client got. It records each request line
it received and counts the connections that its clients closed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from typing_extensions import Self

Writer = asyncio.StreamWriter


def _answer(token: str) -> bytes:
    message = {"role": "assistant", "content": f"answer for {token}"}
    body = {"id": token, "object": "chat.completion", "model": "hostile",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip
    return json.dumps(body).encode()


def _chunk(token: str, text: str) -> bytes:
    event = {"id": token, "object": "chat.completion.chunk", "model": "hostile",
             "choices": [{"index": 0, "delta": {"content": text}}]}  # fmt: skip
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _head(status: str, headers: list[tuple[str, str]], *, eol: bytes = b"\r\n") -> bytes:
    lines = [f"HTTP/1.1 {status}".encode(), *(f"{k}: {v}".encode() for k, v in headers)]
    return eol.join(lines) + eol + eol


class HostileUpstream:
    """Serves in a thread with its own event loop; ``url`` is its ``/v1`` base."""

    def __init__(self) -> None:
        self.requests: list[str] = []  # request lines, as received
        self.headers: list[dict[str, str]] = []
        self.client_closed = 0  # connections the proxy closed while an answer was pending
        self.connections = 0  # accepted so far
        self.waiting = 0  # open connections that have not sent a request yet
        self.most_requests = 0  # the most requests any one connection carried
        #: what to do right after accepting connection number N (from 1): "close" it, or write
        #: a whole "junk" answer nobody asked for (then serve it as usual)
        self.early: dict[int, str] = {}
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("hostile upstream did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        self.connections += 1
        early = self.early.get(self.connections)
        if early == "close":
            writer.close()
            return
        if early == "junk":
            junk = _answer("EARLY")
            writer.write(_head("200 OK", [("Content-Type", "application/json"),
                                          ("Content-Length", str(len(junk)))]) + junk)  # fmt: skip
        self.waiting += 1
        served = 0
        try:
            while True:
                request = await _read_request(reader)
                if served == 0:
                    self.waiting -= 1
                if request is None:
                    break
                served += 1
                self.most_requests = max(self.most_requests, served)
                line, headers, body = request
                self.requests.append(line)
                self.headers.append(headers)
                keep = await self._respond(line, headers, body, reader, writer)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            if served == 0:
                self.waiting -= 1
        finally:
            writer.close()

    async def _respond(
        self,
        line: str,
        headers: dict[str, str],
        body: bytes,
        reader: asyncio.StreamReader,
        writer: Writer,
    ) -> bool:
        """Answer one request; False to close the connection afterwards."""
        mode = headers.get("x-hostile", "ok")
        token = _token(body)
        stream = _is_stream(body)
        handler = _MODES.get(mode, _ok)
        return await handler(self, writer, reader, token, stream)


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, dict[str, str], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for raw in lines[1:]:
        if ":" in raw:
            name, _, value = raw.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return lines[0], headers, body


def _token(body: bytes) -> str:
    try:
        messages = json.loads(body)["messages"]
        return str(messages[-1]["content"])
    except (ValueError, KeyError, IndexError, TypeError):
        return "none"


def _is_stream(body: bytes) -> bool:
    try:
        return json.loads(body).get("stream") is True
    except (ValueError, AttributeError):
        return False


Handler = Callable[[HostileUpstream, Writer, asyncio.StreamReader, str, bool], Awaitable[bool]]


async def _ok(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    if stream:
        w.write(_head("200 OK", [("Content-Type", "text/event-stream"),
                                 ("Transfer-Encoding", "chunked")]))  # fmt: skip
        for part in (_chunk(token, "answer for "), _chunk(token, token), b"data: [DONE]\n\n"):
            w.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        w.write(b"0\r\n\r\n")
    else:
        payload = _answer(token)
        w.write(_head("200 OK", [("Content-Type", "application/json"),
                                 ("Content-Length", str(len(payload)))]) + payload)  # fmt: skip
    await w.drain()
    return True


async def _desync(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    """A complete Content-Length answer, then a whole second response nobody asked for."""
    payload = _answer(token)
    extra = _answer("SMUGGLED")
    w.write(_head("200 OK", [("Content-Type", "application/json"),
                             ("Content-Length", str(len(payload)))]) + payload)  # fmt: skip
    w.write(_head("200 OK", [("Content-Type", "application/json"),
                             ("Content-Length", str(len(extra)))]) + extra)  # fmt: skip
    await w.drain()
    return True


async def _bad_chunk(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    w.write(_head("200 OK", [("Content-Type", "text/event-stream"),
                             ("Transfer-Encoding", "chunked")]))  # fmt: skip
    part = _chunk(token, "partial")
    w.write(f"{len(part):x}\r\n".encode() + part + b"\r\nzz\r\ngarbage\r\n")
    await w.drain()
    return False


async def _mid_close(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    """A stream that stops in the middle of an event."""
    w.write(_head("200 OK", [("Content-Type", "text/event-stream"), ("Connection", "close")]))
    w.write(_chunk(token, "first") + b'data: {"partial')
    await w.drain()
    return False


async def _bare_lf(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    payload = _answer(token)
    head = _head("200 OK", [("Content-Type", "application/json"),
                            ("Content-Length", str(len(payload)))], eol=b"\n")  # fmt: skip
    w.write(head + payload)
    await w.drain()
    return False


async def _short(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    """Content-Length promises more than is sent, then the connection closes."""
    payload = _answer(token)
    w.write(_head("200 OK", [("Content-Type", "application/json"),
                             ("Content-Length", str(len(payload) + 500))]) + payload)  # fmt: skip
    await w.drain()
    return False


async def _both(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    """Transfer-Encoding: chunked and Content-Length at once (a smuggling classic)."""
    payload = _answer(token)
    w.write(_head("200 OK", [("Content-Type", "application/json"), ("Content-Length", "5"),
                             ("Transfer-Encoding", "chunked")]))  # fmt: skip
    w.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n0\r\n\r\n")
    await w.drain()
    return False


async def _huge_header(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (2 * 1024 * 1024) + b"\r\n")
    await w.drain()
    return False


async def _stall(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    """Headers, then silence until the proxy gives up and closes the connection."""
    w.write(_head("200 OK", [("Content-Type", "text/event-stream"),
                             ("Transfer-Encoding", "chunked")]))  # fmt: skip
    await w.drain()
    try:
        await asyncio.wait_for(r.read(1), 30)
    except asyncio.TimeoutError:
        return False
    up.client_closed += 1
    return False


async def _hold(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    """No answer at all; counts the proxy closing the connection (a client that went away)."""
    try:
        await asyncio.wait_for(r.read(1), 30)
    except asyncio.TimeoutError:
        return False
    up.client_closed += 1
    return False


async def _huge_body(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    """A non-streamed body of HUGE_BODY bytes, sent in pieces."""
    w.write(_head("200 OK", [("Content-Type", "application/octet-stream"),
                             ("Content-Length", str(HUGE_BODY))]))  # fmt: skip
    piece = b"x" * (1024 * 1024)
    for _ in range(HUGE_BODY // len(piece)):
        w.write(piece)
        await w.drain()
    return True


async def _set_cookie(up: HostileUpstream, w: Writer, r: Any, token: str, stream: bool) -> bool:
    """A good answer that sets a cookie, as a session or load-balancer affinity would."""
    payload = _answer(token)
    w.write(_head("200 OK", [("Content-Type", "application/json"),
                             ("Set-Cookie", f"session=secret-of-{token}; Path=/"),
                             ("Content-Length", str(len(payload)))]) + payload)  # fmt: skip
    await w.drain()
    return True


HUGE_BODY = 256 * 1024 * 1024

_MODES: dict[str, Handler] = {
    "ok": _ok, "desync": _desync, "bad-chunk": _bad_chunk, "mid-close": _mid_close,
    "bare-lf": _bare_lf, "short": _short, "both": _both, "huge-header": _huge_header,
    "stall": _stall, "hold": _hold, "huge-body": _huge_body, "set-cookie": _set_cookie,
}  # fmt: skip
