"""The load-test client: sends prepared requests (closed- or open-loop), times each one on the
client clock and measures the client's own overhead. httpx is imported only when it runs."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from ..bench.openai_backend import chat_completions_url
from ..errors import BackendUnavailable, ConfigError
from ..stats import percentiles
from .records import PreparedRequest, RequestRecord, phases, read_events

__all__ = ["run_stream"]

#: how often the loop-lag probe wakes up (s); its oversleep is the client's own delay
_PROBE_S = 0.005
#: how long a finished stream's end-of-body marker is waited for (see ``_drain``)
_DRAIN_S = 0.05


class _LoopProbe:
    """Wakes every few ms and records how late: the client's own scheduling delay."""

    def __init__(self) -> None:
        self.lags_s: list[float] = []

    async def run(self) -> None:
        while True:
            due = time.perf_counter() + _PROBE_S
            await asyncio.sleep(_PROBE_S)
            self.lags_s.append(max(0.0, time.perf_counter() - due))


def _stale_reuse(marks: Mapping[str, float]) -> bool:
    """Did a kept-alive connection die under the request before any answer came? A server
    that closes connections after each response (llama-server does, while it advertises
    keep-alive) races the next request sent on one; the OpenAI SDK and other well-kept
    clients send such a request again, on a new connection, and so does this client, once."""
    reused = "connection.connect_tcp.started" not in marks
    answered = any(name.endswith("receive_response_headers.complete") for name in marks)
    return reused and not answered


async def _one(
    client: Any, url: str, request: PreparedRequest, record: RequestRecord, timeout_s: float
) -> None:
    """Send one streaming request and fill ``record`` in (never raises, except cancellation)."""
    import httpx

    marks: dict[str, float] = {}

    async def trace(name: str, info: Mapping[str, Any]) -> None:
        marks.setdefault(name, time.perf_counter())

    async def exchange() -> None:
        async with client.stream(
            "POST", url, json=request.body, headers=request.headers, extensions={"trace": trace}
        ) as response:
            record.http_status = response.status_code
            if response.status_code >= 400:
                text = (await response.aread()).decode("utf-8", "replace")
                record.error = f"HTTP {response.status_code}: {text[:200]}"
                return
            lines = response.aiter_lines()
            await read_events(lines, record, start)
            record.e2e_s = time.perf_counter() - start  # the content ended here
            await _drain(lines, httpx.HTTPError)

    async def with_retry() -> None:
        try:
            await exchange()
        except httpx.RemoteProtocolError:
            if not _stale_reuse(marks):
                raise
            record.retries += 1  # the TTFT still counts from the first send
            marks.clear()
            await exchange()

    start = record.sent_clock_s = time.perf_counter()
    try:
        # the whole exchange, not each read: a server trickling bytes must still time out
        await asyncio.wait_for(with_retry(), timeout_s)
        record.status = "ok" if record.error is None else "error"
    except asyncio.TimeoutError:  # not the builtin TimeoutError on Python 3.10
        record.status, record.error = "timeout", f"no complete response within {timeout_s:g} s"
    except asyncio.CancelledError:
        record.status, record.error = "cancelled", "the load test's time limit was reached"
        raise
    except Exception as exc:  # noqa: BLE001  (httpx's errors and any other: this request's error)
        record.status, record.error = "error", f"{type(exc).__name__}: {exc}"[:300]
    finally:
        if record.e2e_s is None:
            record.e2e_s = time.perf_counter() - start
        phases(record, marks, start)


async def _drain(lines: Any, errors: type[Exception]) -> None:
    """Read a stream's remains after ``[DONE]`` (the server's end-of-body marker follows at
    once), so its connection goes back to the pool: returning at ``[DONE]`` left the body
    unfinished, and every request then opened a new connection — not what real clients do,
    and a handshake's work on both sides per request. Gives up after ``_DRAIN_S`` (the
    connection is then closed, as before); what comes after ``[DONE]`` is not measured."""

    async def rest() -> None:
        async for _ in lines:
            pass

    with contextlib.suppress(asyncio.TimeoutError, errors):
        await asyncio.wait_for(rest(), _DRAIN_S)


class _Sender:
    """One run's client and clock: sends request ``i`` no earlier than its due time (seconds
    from ``wall0``) and fills its record in."""

    def __init__(
        self,
        client: Any,
        endpoint: str,
        requests: Sequence[PreparedRequest],
        records: list[RequestRecord],
        *,
        timeout_s: float,
        concurrency: int | None,
    ) -> None:
        self.client, self.endpoint, self.timeout_s = client, endpoint, timeout_s
        self.requests, self.records = requests, records
        self.gate = asyncio.Semaphore(concurrency or len(requests))
        self.wall0 = time.perf_counter()  # reset by ``run_stream`` once the client is built

    async def send(self, i: int, due: float) -> float:
        record = self.records[i]
        record.scheduled_s = due
        record.sched_delay_s = max(0.0, time.perf_counter() - self.wall0 - due)
        await _one(self.client, self.endpoint, self.requests[i], record, self.timeout_s)
        return time.perf_counter() - self.wall0

    async def closed_loop_client(self, first: int, step: int, start_s: float) -> None:
        # client k sends requests k, k+c, k+2c... each as soon as its previous one ends
        due = start_s
        await asyncio.sleep(max(0.0, due - (time.perf_counter() - self.wall0)))
        for i in range(first, len(self.requests), step):
            due = await self.send(i, due)

    async def open_loop_request(self, i: int, due: float) -> None:
        await asyncio.sleep(max(0.0, due - (time.perf_counter() - self.wall0)))
        async with self.gate:  # late when the concurrency cap holds it: that is scheduling delay
            await self.send(i, due)

    def jobs(
        self, concurrency: int | None, arrivals: Sequence[float] | None, stagger_s: float
    ) -> list[Coroutine[Any, Any, None]]:
        if arrivals is None:
            assert concurrency is not None
            n = min(concurrency, len(self.requests))
            return [self.closed_loop_client(k, concurrency, k * stagger_s) for k in range(n)]
        return [self.open_loop_request(i, t) for i, t in enumerate(arrivals)]


async def _run_jobs(
    jobs: Sequence[Coroutine[Any, Any, None]], probe: _LoopProbe, time_limit_s: float
) -> bool:
    """Run ``jobs`` with the loop probe until they end or the time limit; True when cut."""
    probe_task = asyncio.create_task(probe.run())
    tasks = [asyncio.create_task(j) for j in jobs]
    done, pending = await asyncio.wait(tasks, timeout=time_limit_s)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    probe_task.cancel()
    await asyncio.gather(probe_task, return_exceptions=True)
    # ``_one`` records every request's own failure; what is left is a bug of the client's,
    # which must not pass for requests "not sent before the time limit"
    failed = [e for t in done if not t.cancelled() and (e := t.exception()) is not None]
    if failed:
        raise failed[0]
    return bool(pending)


async def run_stream(
    url: str,
    requests: Sequence[PreparedRequest],
    *,
    config: str = "baseline",
    concurrency: int | None = None,
    arrivals: Sequence[float] | None = None,
    timeout_s: float = 60.0,
    time_limit_s: float = 600.0,
    headers: Mapping[str, str] | None = None,
    stagger_s: float = 0.0,
) -> tuple[list[RequestRecord], dict[str, Any]]:
    """Send ``requests`` to ``url`` (a base URL or the chat-completions endpoint): at most
    ``concurrency`` in flight, each no earlier than its arrival time when ``arrivals`` are
    given. Stops by itself after the last request or ``time_limit_s`` (requests still in
    flight are cancelled and recorded so). Returns the records and the client's overhead.

    Closed loop (no ``arrivals``): client ``k`` starts ``k * stagger_s`` after the first.
    Prompts sent at the same instant are batched into one step by a server that finds them
    all queued, or run one after another by one that has started a step on the first: a race
    inside the server, which a gap of tens of milliseconds settles (the second waits)."""
    try:
        import httpx
    except ImportError as exc:
        raise BackendUnavailable("httpx (for promptslim loadtest)", extra="bench") from exc

    if concurrency is None and arrivals is None:
        raise ConfigError("give a concurrency, arrival times, or both", field="concurrency")
    if arrivals is not None and len(arrivals) != len(requests):
        raise ConfigError("one arrival time per request", field="arrivals")
    if not (isinstance(stagger_s, (int, float)) and 0 <= stagger_s < math.inf):
        raise ConfigError(f"expected a finite stagger_s >= 0, got {stagger_s!r}", field="stagger_s")
    endpoint = chat_completions_url(url)
    records = [
        RequestRecord(i, config, r.prompt_tokens, slim_s=r.slim_s) for i, r in enumerate(requests)
    ]
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(timeout_s)
    probe = _LoopProbe()
    async with httpx.AsyncClient(
        limits=limits, timeout=timeout, headers=dict(headers or {}), trust_env=False
    ) as client:
        sender = _Sender(
            client, endpoint, requests, records, timeout_s=timeout_s, concurrency=concurrency
        )
        jobs = sender.jobs(concurrency, arrivals, stagger_s)
        # the clock starts after the client is built (its TLS context alone takes tens of ms)
        cpu0 = time.process_time()
        sender.wall0 = wall0 = time.perf_counter()
        cut = await _run_jobs(jobs, probe, time_limit_s)
    wall_s = time.perf_counter() - wall0
    for record in records:
        if record.status == "pending":  # never sent before the time limit
            record.status, record.error = "cancelled", "not sent before the time limit"
    return records, _overhead(probe.lags_s, time.process_time() - cpu0, wall_s, cut)


def _overhead(lags: Sequence[float], cpu_s: float, wall_s: float, cut: bool) -> dict[str, Any]:
    lag_ms = percentiles([x * 1000 for x in lags], (50, 99)) if lags else {"p50": 0.0, "p99": 0.0}
    lag_ms["max"] = max(lags, default=0.0) * 1000
    cpu_share = cpu_s / wall_s if wall_s > 0 else 0.0
    return {
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        # share of one core the client (this process) used; near 1.0 it is the bottleneck
        "cpu_share": cpu_share,
        "loop_lag_ms": lag_ms,
        "client_bound": cpu_share > 0.9 or lag_ms["p99"] > 20.0,
        "time_limit_reached": cut,
    }
