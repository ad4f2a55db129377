"""The lean HTTP/1.1 client transport (``promptslim.http11``): the proxy's upstream client and
the load tester's.

The server here is a scripted asyncio socket server on 127.0.0.1 that writes exact bytes: a
seam for checking our own HTTP/1.1 framing, pooling and error mapping byte by byte (chunk
boundaries, a server that closes a kept-alive connection, malformed heads), which a real
server would not produce on demand. End to end through the proxy against a real model server
is in test_serve.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

httpx = pytest.importorskip("httpx")

from promptslim.http11 import Http11Transport

from .conftest import assert_missing_extra

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, "Script"], Awaitable[None]]


class Script:
    """A server that runs ``handler`` for each connection and records what it saw."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.first_reads: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer, self)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1/chat/completions"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


async def read_request(reader: asyncio.StreamReader, script: Script | None = None) -> bytes:
    """One request (head + Content-Length body); the first socket read is recorded."""
    data = await reader.read(65536)
    if not data:
        raise asyncio.IncompleteReadError(b"", None)
    if script is not None:
        script.first_reads.append(data)
    while b"\r\n\r\n" not in data:
        data += await reader.read(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += await reader.readexactly(length - len(body))
    return head + b"\r\n\r\n" + body


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


async def send(
    transport: Http11Transport, url: str, body: bytes = b"{}", **timeouts: float
) -> httpx.Response:
    limits = {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0, **timeouts}
    request = httpx.Request(
        "POST", url, content=body, headers={"authorization": "Bearer k"},
        extensions={"timeout": limits},
    )  # fmt: skip
    return await transport.handle_async_request(request)


async def body_of(response: httpx.Response) -> bytes:
    try:
        return b"".join([part async for part in response.aiter_raw()])
    finally:
        await response.aclose()


# ---------------------------------------------------------------- streaming and reuse


@pytest.mark.asyncio
async def test_chunks_are_handed_over_as_they_arrive_and_the_connection_is_reused() -> None:
    gap = 0.3

    async def handler(reader: Any, writer: Any, script: Script) -> None:
        while True:
            await read_request(reader, script)
            writer.write(SSE_HEAD + chunk(b"data: one\n\n"))
            await writer.drain()
            await asyncio.sleep(gap)
            writer.write(chunk(b"data: two\n\n") + b"0\r\n\r\n")
            await writer.drain()

    script = Script(handler)
    transport = Http11Transport()
    async with script as url:
        for _ in range(3):
            response = await send(transport, url, b'{"stream": true}')
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            start = time.monotonic()
            parts = []
            async for part in response.aiter_raw():
                parts.append((part, time.monotonic() - start))
            await response.aclose()
            assert b"".join(p for p, _ in parts) == b"data: one\n\ndata: two\n\n"
            # the first event was not held back until the second came
            assert parts[0][0] == b"data: one\n\n" and parts[0][1] < gap / 2
        await transport.aclose()
    assert script.connections == 1  # kept alive and reused
    # head and body left in one write: the server's first read holds the whole request
    for first in script.first_reads:
        assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
        assert first.endswith(b'\r\n\r\n{"stream": true}')
        assert b"content-length: 16\r\n" in first and b"authorization: Bearer k\r\n" in first


@pytest.mark.asyncio
async def test_chunks_that_arrive_together_go_on_together_and_extra_bytes_end_reuse() -> None:
    async def handler(reader: Any, writer: Any, script: Script) -> None:
        await read_request(reader)
        # two events in one write, then (a broken server) bytes after the body's end
        writer.write(SSE_HEAD + chunk(b"data: a\n\n") + chunk(b"data: b\n\n") + b"0\r\n\r\nXX")
        await writer.drain()
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    script = Script(handler)
    transport = Http11Transport()
    async with script as url:
        response = await send(transport, url)
        parts = [part async for part in response.aiter_raw()]
        await response.aclose()
        assert parts == [b"data: a\n\ndata: b\n\n"]
        assert (await send(transport, url)).status_code == 200
        await transport.aclose()
    assert script.connections == 2  # the connection with stray bytes was not reused


@pytest.mark.asyncio
async def test_content_length_and_close_delimited_bodies() -> None:
    replies = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nagain",
        # no length, no chunking: the body is whatever comes until the server closes
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end",
    ]

    async def handler(reader: Any, writer: Any, script: Script) -> None:
        while replies:
            await read_request(reader)
            reply = replies.pop(0)
            writer.write(reply)
            await writer.drain()
            if b"Content-Length" not in reply:
                return  # Script closes the connection

    script = Script(handler)
    transport = Http11Transport()
    async with script as url:
        assert await body_of(await send(transport, url)) == b"hello"
        assert await body_of(await send(transport, url)) == b"again"
        assert await body_of(await send(transport, url)) == b"to the end"
        await transport.aclose()
    assert script.connections == 1


@pytest.mark.asyncio
async def test_connection_close_is_not_reused_and_interim_responses_are_skipped() -> None:
    async def handler(reader: Any, writer: Any, script: Script) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
        )
        await writer.drain()

    script = Script(handler)
    transport = Http11Transport()
    async with script as url:
        for _ in range(2):
            response = await send(transport, url)
            assert response.status_code == 201
            assert response.extensions["reason_phrase"] == b"Created"
            assert await body_of(response) == b"ok"
        await transport.aclose()
    assert script.connections == 2


@pytest.mark.asyncio
async def test_a_kept_alive_connection_closed_by_the_server_is_retried_once() -> None:
    served = 0

    async def handler(reader: Any, writer: Any, script: Script) -> None:
        nonlocal served
        await read_request(reader)
        served += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n%d" % served)
        await writer.drain()
        # the next request on this connection is read, then dropped without a reply:
        # what a server does when its keep-alive timer fires as a request arrives
        await reader.read(65536)

    script = Script(handler)
    transport = Http11Transport()
    async with script as url:
        assert await body_of(await send(transport, url)) == b"1"
        assert await body_of(await send(transport, url)) == b"2"  # on a fresh connection
        await transport.aclose()
    assert script.connections == 2


@pytest.mark.asyncio
async def test_a_fresh_connection_closed_without_a_response_is_an_error() -> None:
    async def handler(reader: Any, writer: Any, script: Script) -> None:
        await read_request(reader)  # and close

    transport = Http11Transport()
    async with Script(handler) as url:
        with pytest.raises(httpx.RemoteProtocolError, match="without a response"):
            await send(transport, url)
        await transport.aclose()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.binary(min_size=0, max_size=3000),
    sizes=st.lists(st.integers(1, 700), min_size=1, max_size=8),
    cuts=st.lists(st.integers(1, 50), min_size=1, max_size=20),
)
def test_any_chunking_and_any_packet_split_gives_the_body_back(
    body: bytes, sizes: list[int], cuts: list[int]
) -> None:
    # the body in chunks of the given sizes, its bytes written in pieces of the given sizes
    pieces, at, i = [], 0, 0
    while at < len(body):
        pieces.append(body[at : at + sizes[i % len(sizes)]])
        at += sizes[i % len(sizes)]
        i += 1
    wire = SSE_HEAD + b"".join(chunk(p) for p in pieces) + b"0\r\nx-trailer: 1\r\n\r\n"

    async def handler(reader: Any, writer: Any, script: Script) -> None:
        await read_request(reader)
        at, i = 0, 0
        while at < len(wire):
            writer.write(wire[at : at + cuts[i % len(cuts)]])
            await writer.drain()
            at += cuts[i % len(cuts)]
            i += 1
        await read_request(reader)  # the connection must be clean for the next request
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()

    async def run() -> None:
        transport = Http11Transport()
        script = Script(handler)
        async with script as url:
            assert await body_of(await send(transport, url)) == body
            assert (await send(transport, url)).status_code == 204
            await transport.aclose()
        assert script.connections == 1

    asyncio.run(run())


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (b"HTTX/1.1 200 OK\r\n\r\n", "bad status line"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "bad status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"),
        (b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n", "bad header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "conflicting"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "before the end"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n", "bad chunk size"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXX",
            "not followed by CRLF",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "mid-chunk"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "mid-response-head"),
    ],
)
@pytest.mark.asyncio
async def test_malformed_responses_are_protocol_errors(reply: bytes, match: str) -> None:
    async def handler(reader: Any, writer: Any, script: Script) -> None:
        await read_request(reader)
        writer.write(reply)
        await writer.drain()  # then close

    transport = Http11Transport()
    async with Script(handler) as url:
        with pytest.raises(httpx.RemoteProtocolError, match=match):
            await body_of(await send(transport, url))
        await transport.aclose()


@pytest.mark.asyncio
async def test_timeouts_and_connection_errors_are_httpx_exceptions() -> None:
    async def silent(reader: Any, writer: Any, script: Script) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async def stalls_mid_body(reader: Any, writer: Any, script: Script) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD + chunk(b"data: one\n\n"))
        await writer.drain()
        await asyncio.sleep(5)

    transport = Http11Transport(max_connections=1)
    async with Script(silent) as url:
        with pytest.raises(httpx.ReadTimeout):
            await send(transport, url, read=0.2)
    async with Script(stalls_mid_body) as url:
        response = await send(transport, url, read=0.2)
        # the held response keeps the only connection slot: the next request times out in the pool
        with pytest.raises(httpx.PoolTimeout):
            await send(transport, url, pool=0.1)
        with pytest.raises(httpx.ReadTimeout):
            await body_of(response)
    # nothing listens on a port just closed
    async with Script(silent) as url:
        pass
    with pytest.raises(httpx.ConnectError):
        await send(transport, url)
    with pytest.raises(httpx.UnsupportedProtocol):
        await send(transport, url.replace("http://", "https://"))
    await transport.aclose()


@pytest.mark.asyncio
async def test_send_from_parts_adds_host_and_replaces_framing() -> None:
    async def handler(reader: Any, writer: Any, script: Script) -> None:
        await read_request(reader, script)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()

    script = Script(handler)
    transport = Http11Transport()
    async with script as url:
        parts = [(b"x-a", b"1"), (b"Content-Length", b"999"), (b"Transfer-Encoding", b"chunked")]
        response = await transport.send("POST", httpx.URL(url), parts, b"{}")
        assert await body_of(response) == b"ok"
        await transport.aclose()
    (first,) = script.first_reads
    netloc = url.split("/")[2].encode()
    assert first == (
        b"POST /v1/chat/completions HTTP/1.1\r\nx-a: 1\r\nhost: " + netloc
        + b"\r\ncontent-length: 2\r\n\r\n{}"
    )  # fmt: skip


@pytest.mark.asyncio
async def test_trace_events_as_httpx_names_them() -> None:
    async def handler(reader: Any, writer: Any, script: Script) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    events: list[str] = []

    async def trace(name: str, info: dict[str, Any]) -> None:
        events.append(name)

    transport = Http11Transport()
    async with Script(handler) as url:
        for _ in range(2):
            request = httpx.Request("POST", url, content=b"{}", extensions={"trace": trace})
            assert await body_of(await transport.handle_async_request(request)) == b"ok"
        await transport.aclose()
    sent, headers = "http11.send_request_body.complete", "http11.receive_response_headers.complete"
    connect = ["connection.connect_tcp.started", "connection.connect_tcp.complete"]
    assert events == [*connect, sent, headers, sent, headers]  # the second request reused it


@pytest.mark.asyncio
async def test_the_read_timeout_bounds_each_wait_not_the_whole_body() -> None:
    served = 0

    async def handler(reader: Any, writer: Any, script: Script) -> None:
        nonlocal served
        while True:
            await read_request(reader)
            served += 1
            if served == 1:  # a slow stream: 6 events 0.1 s apart, 0.6 s in all
                writer.write(SSE_HEAD)
                for i in range(6):
                    await asyncio.sleep(0.1)
                    writer.write(chunk(b"data: %d\n\n" % i))
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            elif served == 2:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
            # the third request gets no answer at all

    script = Script(handler)
    transport = Http11Transport()
    async with script as url:
        # each gap (0.1 s) is under the limit, the whole body (0.6 s) is not: no timeout
        body = await body_of(await send(transport, url, read=0.3))
        assert body == b"".join(b"data: %d\n\n" % i for i in range(6))
        await asyncio.sleep(0.5)  # the first request's watchdog fires and stands down
        assert await body_of(await send(transport, url, read=30.0)) == b"ok"
        # same connection, a much shorter limit than the 30 s the last request armed: it holds
        # at its own length
        start = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            await send(transport, url, read=0.2)
        assert time.monotonic() - start < 2.0
        await transport.aclose()
    assert script.connections == 1


def test_without_httpx_the_import_names_the_extra() -> None:
    assert_missing_extra("promptslim.http11", ["httpx"], "serve")


@pytest.mark.asyncio
async def test_header_values_cannot_inject_lines() -> None:
    transport = Http11Transport()
    request = httpx.Request(
        "POST", "http://127.0.0.1:9/v1", content=b"{}", headers={"x-a": "1\r\nx-b: 2"}
    )
    with pytest.raises(httpx.LocalProtocolError):
        await transport.handle_async_request(request)
    await transport.aclose()


@pytest.mark.asyncio
async def test_an_httpx_client_can_wrap_it() -> None:
    async def handler(reader: Any, writer: Any, script: Script) -> None:
        while True:
            request = await read_request(reader)
            assert request.startswith(b"GET /v1/models HTTP/1.1\r\n")
            assert b"content-length" not in request.lower()  # no body, no length
            payload = b'{"data": []}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(payload), payload))  # fmt: skip
            await writer.drain()

    script = Script(handler)
    async with script as url:
        base = url.removesuffix("/chat/completions")
        async with httpx.AsyncClient(transport=Http11Transport(), trust_env=False) as client:
            for _ in range(2):
                response = await client.get(base + "/models")
                assert response.json() == {"data": []}
    assert script.connections == 1
