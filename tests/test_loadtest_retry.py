"""The load-test client against a server that closes kept-alive connections under the next
request (llama-server does this after streamed responses): such a request is sent again once,
on a new connection, and counted; a request that dies on a new connection is an error."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest

from promptslim.loadsim.loadtest import PreparedRequest, run_stream, summarise

_EVENT = {"choices": [{"index": 0, "delta": {"content": "hi"}}]}
_BODY = f"data: {json.dumps(_EVENT)}\n\ndata: [DONE]\n\n".encode()


async def _read_request(reader: asyncio.StreamReader) -> bool:
    """Read one request; False when the peer closed first."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    length = 0
    for line in head.decode("latin-1").split("\r\n"):
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    await reader.readexactly(length)
    return True


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, mode: str) -> None:
    """``stale``: answer the first request on a connection (keep-alive, chunked), then close
    under the second unanswered. ``dead``: close under every request unanswered."""
    try:
        if mode == "stale" and await _read_request(reader):
            chunk = f"{len(_BODY):x}\r\n".encode() + _BODY + b"\r\n0\r\n\r\n"
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100\r\n\r\n" + chunk
            )
            await writer.drain()
        await _read_request(reader)
    finally:
        writer.close()


@pytest.fixture(params=["stale", "dead"])
def closing_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def start() -> None:
        server = await asyncio.start_server(
            lambda r, w: _handle(r, w, request.param), "127.0.0.1", 0
        )
        holder["server"], holder["port"] = server, server.sockets[0].getsockname()[1]
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()))
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{holder['port']}/v1", request.param
    finally:
        loop.call_soon_threadsafe(holder["server"].close)  # type: ignore[attr-defined]
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_request_on_a_connection_closed_under_it_is_sent_again_once(
    closing_server: tuple[str, str],
) -> None:
    url, mode = closing_server
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    requests = [PreparedRequest(body, 5) for _ in range(6)]
    records, _ = asyncio.run(run_stream(url, requests, concurrency=1, timeout_s=10))
    summary = summarise(records, wall_s=1.0)
    if mode == "stale":
        # the first request opens the connection; each later one finds it closing, once
        assert [r.status for r in records] == ["ok"] * 6
        assert [r.retries for r in records] == [0] + [1] * 5
        assert all(r.answer == "hi" for r in records)
        assert summary["retried"] == 5 and summary["error_rate"] == 0.0
    else:  # never answered, on new connections: errors, not retried
        assert [r.status for r in records] == ["error"] * 6
        assert all(r.retries == 0 for r in records)
        assert all("RemoteProtocolError" in (r.error or "") for r in records)
        assert summary["retried"] == 0 and summary["error_rate"] == 1.0
