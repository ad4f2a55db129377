"""Upstream connections opened ahead (``promptslim/serve/spares.py``), on real sockets.

A real ``promptslim serve`` process in front of ``tests/hostile_upstream.py``, which counts the
connections it accepted, the open ones that have not sent a request yet (the proxy's spares)
and the most requests any one connection carried, and can close or write junk on a connection
as soon as it has accepted it. What a client sees is asserted, and what the upstream saw.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from promptslim.errors import ConfigError
from promptslim.serve import ServeConfig

httpx = pytest.importorskip("httpx")
httpcore = pytest.importorskip("httpcore")
pytest.importorskip("uvicorn")

from promptslim.serve.spares import SpareConnections, SpareTransport

from .hostile_upstream import HostileUpstream
from .test_serve_hostile import ProxyProcess, _body

pytestmark = pytest.mark.slow

SPARES = 3


@pytest.fixture
def upstream() -> Iterator[HostileUpstream]:
    with HostileUpstream() as up:
        yield up


def _start(upstream: HostileUpstream, *extra: str) -> ProxyProcess:
    return ProxyProcess(upstream.url, "--no-pipeline", "--upstream-spares", str(SPARES), *extra)


def _until(condition: Callable[[], bool], within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _answer(proxy: ProxyProcess, token: str, *, stream: bool = False) -> str:
    r = httpx.post(proxy.url + "/v1/chat/completions", json=_body(token, stream=stream), timeout=10)
    assert r.status_code == 200, r.text
    if stream:
        return str(r.text)
    return str(r.json()["choices"][0]["message"]["content"])


def test_spares_are_opened_ahead_bounded_and_each_carries_one_request(
    upstream: HostileUpstream,
) -> None:
    proxy = _start(upstream, "--upstream-spare-idle", "60")
    try:
        # opened at start-up, before any request: exactly the bound
        assert _until(lambda: upstream.waiting == SPARES)

        async def burst() -> list[tuple[str, str]]:
            async with httpx.AsyncClient(timeout=10) as client:

                async def one(i: int) -> tuple[str, str]:
                    r = await client.post(proxy.url + "/v1/chat/completions", json=_body(f"c{i}"))
                    return f"answer for c{i}", r.json()["choices"][0]["message"]["content"]

                return await asyncio.gather(*(one(i) for i in range(40)))

        for _ in range(3):
            answers = asyncio.run(burst())
            assert all(want == got for want, got in answers)
            # replaced as the answered requests' connections closed, never beyond the bound
            assert _until(lambda: upstream.waiting == SPARES)
            time.sleep(0.2)
            assert upstream.waiting == SPARES
        assert upstream.most_requests == 1  # no connection ever carried a second request
        # 120 requests on 120 connections, plus the spares open now
        assert upstream.connections == 120 + SPARES
    finally:
        proxy.stop()


@pytest.mark.parametrize("early", ["close", "junk"])
def test_a_spare_closed_or_written_to_by_the_upstream_is_never_used(
    upstream: HostileUpstream, early: str
) -> None:
    # the spares opened at start-up are closed by the upstream at once, or get a whole
    # answer before any request was sent on them
    upstream.early = {n: early for n in range(1, SPARES + 1)}
    proxy = _start(upstream, "--upstream-spare-idle", "60")
    try:
        assert _until(lambda: upstream.connections >= SPARES)
        time.sleep(0.3)  # the upstream's FIN or bytes have arrived at the proxy
        for i in range(6):
            assert _answer(proxy, f"after-{i}") == f"answer for after-{i}"
        assert "answer for EARLY" not in _answer(proxy, "streamed", stream=True)
        assert upstream.most_requests == 1
    finally:
        proxy.stop()


def test_idle_spares_are_closed_and_come_back_with_traffic(upstream: HostileUpstream) -> None:
    proxy = _start(upstream, "--upstream-spare-idle", "0.5")
    try:
        assert _until(lambda: upstream.waiting == SPARES)
        # idle past their time: closed by the proxy, and not reopened while nothing happens
        assert _until(lambda: upstream.waiting == 0, within_s=5)
        time.sleep(1.0)
        assert upstream.waiting == 0
        assert _answer(proxy, "later") == "answer for later"
        assert _until(lambda: upstream.waiting == SPARES)
    finally:
        proxy.stop()


@pytest.mark.parametrize("spares", ["0", "4"])
def test_no_answer_reaches_another_client_after_desync_attempts_with_spares(
    upstream: HostileUpstream, spares: str
) -> None:
    proxy = ProxyProcess(upstream.url, "--no-pipeline", "--upstream-spares", spares)

    async def run() -> list[tuple[str, Any]]:
        gate = asyncio.Semaphore(8)
        async with httpx.AsyncClient(timeout=10) as client:

            async def one(i: int) -> tuple[str, Any]:
                token = f"client-{i}"  # every third request tries to smuggle a second answer
                async with gate:
                    r = await client.post(
                        proxy.url + "/v1/chat/completions", json=_body(token),
                        headers={"X-Hostile": "desync" if i % 3 == 0 else "ok"},
                    )  # fmt: skip
                return token, r.json()["choices"][0]["message"]["content"]

            return await asyncio.gather(*(one(i) for i in range(300)))

    try:
        answers = asyncio.run(run())
    finally:
        proxy.stop()
    assert all(got == f"answer for {token}" for token, got in answers)
    assert upstream.most_requests == 1


@pytest.mark.parametrize("count", [-1, 65])
def test_the_spare_count_is_bounded(count: int) -> None:
    with pytest.raises(ConfigError) as err:
        ServeConfig(upstream="http://127.0.0.1:9/v1", upstream_spares=count)
    assert err.value.field == "upstream_spares"


class _Recording(httpcore.AsyncNetworkBackend):
    """httpcore's own network backend, with every write each connection makes recorded."""

    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.writes: list[list[bytes]] = []

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        stream = await self.inner.connect_tcp(*args, **kwargs)
        writes: list[bytes] = []
        self.writes.append(writes)
        return _RecordingStream(stream, writes)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _RecordingStream(httpcore.AsyncNetworkStream):
    def __init__(self, stream: httpcore.AsyncNetworkStream, writes: list[bytes]) -> None:
        self.stream, self.writes = stream, writes

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.writes.append(buffer)
        await self.stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.stream.aclose()

    def get_extra_info(self, info: str) -> Any:
        return self.stream.get_extra_info(info)


async def _echo_sizes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One request read whole (by its Content-Length); the answer is the body's size."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:  # a spare the proxy closed unused
        writer.close()
        return
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    body = await reader.readexactly(length)
    answer = str(len(body)).encode()
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                 % (len(answer), answer))  # fmt: skip
    await writer.drain()
    writer.close()


def test_a_small_request_goes_upstream_in_one_write_and_a_large_body_as_it_is() -> None:
    async def run() -> list[list[bytes]]:
        server = await asyncio.start_server(_echo_sizes, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        recording = _Recording()
        spares = SpareConnections("127.0.0.1", port, spares=1, idle_s=5, connect_timeout_s=5,
                                  backend=recording)  # fmt: skip
        limits = httpx.Limits(max_connections=4, max_keepalive_connections=0)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        try:
            async with httpx.AsyncClient(transport=SpareTransport(spares, limits=limits)) as client:
                for size in (100, 2 * 1024 * 1024):
                    r = await client.post(url, content=b"x" * size)
                    assert r.status_code == 200 and r.text == str(size)
            await asyncio.sleep(0.1)  # the spare left open, closed with the client, seen closed
        finally:
            server.close()
            await server.wait_closed()
        return [w for w in recording.writes if w]

    writes = asyncio.run(run())
    assert len(writes) == 2  # one connection per request
    small, large = writes
    # head and body of the small request in one segment: the upstream wakes once for it
    assert len(small) == 1 and small[0].startswith(b"POST ") and small[0].endswith(b"x" * 100)
    # the large one: its head on its own, then the body as it was given, not copied into one
    assert len(large) == 2 and large[0].startswith(b"POST ") and large[1] == b"x" * 2 * 1024 * 1024
