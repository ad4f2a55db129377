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
pytest.importorskip("uvicorn")

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
