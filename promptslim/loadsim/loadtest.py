"""``promptslim loadtest``: many concurrent streaming chat completions against an
OpenAI-compatible server, with and without promptslim, on the same request stream.

Load is closed-loop (``concurrency`` clients, each sending its next request when the previous
one ends) or open-loop (``rate`` requests/s, gaps from ``workload.arrival_times``: Poisson, or
gamma with ``burstiness``; ``concurrency`` then caps requests in flight). Every config sends the
same items in the same order at the same times; configs take turns in blocks of requests,
each with its share of the time limit (``interleave``).

Per request, on the client clock (``time.perf_counter``), seconds from the moment it was sent:
scheduling delay (how late the client sent it), connect / request sent / first byte (httpx's
``trace`` extension, over its own pooled transport), TTFT (first non-empty content delta),
inter-token latencies, end-to-end latency, output tokens, status, error. Aggregates use vLLM ``bench serve`` names in ms (``ttft``,
``tpot``, ``itl``, ``e2el``), overall and per prompt-length bucket. The client measures its own
overhead (event-loop lag, CPU) so a client bottleneck is reported, not mistaken for the server.

httpx, numpy and matplotlib are imported only when a load test runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import BackendUnavailable, ConfigError
from ..stats import percentiles

__all__ = [
    "LoadtestOptions",
    "PreparedRequest",
    "RequestRecord",
    "format_markdown",
    "plot_percentiles",
    "prepare_requests",
    "run_loadtest",
    "run_stream",
    "summarise",
    "write_report",
]

#: prompt-length bucket edges (tokens): a long-prompt tail hides in an overall percentile
BUCKET_EDGES: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192)
QUANTILES: tuple[float, ...] = (50, 90, 95, 99)
#: how often the loop-lag probe wakes up (s); its oversleep is the client's own delay
_PROBE_S = 0.005
#: how long a finished stream's end-of-body marker is waited for (see ``_drain``)
_DRAIN_S = 0.05


@dataclass(frozen=True)
class LoadtestOptions:
    """One load test: the server, the stream and the load."""

    url: str
    dataset: str = "builtin:rag"
    configs: tuple[str, ...] = ("baseline",)
    requests: int = 100
    concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    timeout_s: float = 60.0
    time_limit_s: float = 600.0
    slo_ttft_ms: float | None = None
    max_tokens: int = 32
    model: str = "default"
    seed: int = 0
    #: content deltas this close to the first count as bunched (buffering detection)
    bunch_window_ms: float = 5.0
    #: requests per config per turn (``interleave.default_block`` when None)
    block: int | None = None

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"expected an http(s) URL, got {self.url!r}", field="url")
        try:
            port = urlsplit(self.url).port  # ValueError when not a number in 0..65535
        except ValueError as exc:
            raise ConfigError(f"invalid port in {self.url!r}: {exc}", field="url") from exc
        if port == 0:
            raise ConfigError(f"invalid port in {self.url!r}: expected 1..65535", field="url")
        if self.slo_ttft_ms is not None and not 0 < self.slo_ttft_ms < float("inf"):
            raise ConfigError(
                f"expected a TTFT SLO > 0 ms, got {self.slo_ttft_ms}", field="slo_ttft_ms"
            )
        if (self.concurrency is None) and (self.rate is None):
            raise ConfigError("give --concurrency, --rate, or both", field="concurrency")
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError(
                f"expected concurrency >= 1, got {self.concurrency}", field="concurrency"
            )
        if self.block is not None and self.block < 1:
            raise ConfigError(f"expected block >= 1, got {self.block}", field="block")
        for name in ("requests", "max_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"expected {name} >= 1, got {getattr(self, name)}", field=name)
        for name in ("timeout_s", "time_limit_s", "bunch_window_ms"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"expected {name} > 0, got {getattr(self, name)}", field=name)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PreparedRequest:
    """A body ready to send, its prompt size (client tokenizer) and what slimming it cost."""

    body: dict[str, Any]
    prompt_tokens: int
    slim_s: float = 0.0


@dataclass
class RequestRecord:
    """One request's timings (seconds from its send, on the client clock) and outcome."""

    index: int
    config: str
    prompt_tokens: int
    scheduled_s: float = 0.0  # when it should have been sent, from the run's start
    sent_clock_s: float = 0.0  # time.perf_counter() when it was sent: to line up with other logs
    sched_delay_s: float = 0.0  # how much later it was sent
    slim_s: float = 0.0
    connect_s: float | None = None  # None: a kept-alive connection was reused
    request_sent_s: float | None = None
    first_byte_s: float | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    delta_times_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    server_prompt_tokens: int | None = None
    #: prompt tokens the server served from its cache (``usage.prompt_tokens_details``)
    server_cached_tokens: int | None = None
    #: the server's own prompt evaluation (llama.cpp's ``timings``: prompt_ms / prompt_n)
    server_prefill_s: float | None = None
    server_prefill_tokens: int | None = None
    http_status: int | None = None
    status: str = "pending"  # ok | error | timeout | cancelled
    error: str | None = None
    #: the streamed answer, for scoring; never written to reports (``as_dict`` leaves it out)
    answer: str = field(default="", repr=False)

    @property
    def itl_s(self) -> list[float]:
        t = self.delta_times_s
        return [b - a for a, b in pairwise(t)]

    @property
    def tpot_s(self) -> float | None:
        """vLLM: time per output token after the first."""
        if self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def bunched(self, window_s: float) -> bool | None:
        """Were the content deltas held back and released together? None: too few to tell.

        Bunched: at least 4 deltas, 90 % of them within ``window_s`` of the first, while the
        wait for the first was long enough (10 windows) that they could have been generated
        one by one during it: a stream that was buffered somewhere on the way."""
        t = self.delta_times_s
        if len(t) < 4 or self.ttft_s is None:
            return None
        close = sum(1 for x in t if x - t[0] <= window_s)
        return close >= 0.9 * len(t) and self.ttft_s >= 10 * window_s

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["answer"]
        out["itl_s"] = self.itl_s
        out["tpot_s"] = self.tpot_s
        return out


# ---------------------------------------------------------------- the request stream


def prepare_requests(
    *,
    dataset: str,
    configs: Sequence[str],
    requests: int,
    max_tokens: int,
    model: str = "default",
    seed: int = 0,
) -> dict[str, list[PreparedRequest]]:
    """``requests`` bodies per config label, items in the same order for every config (the
    A/B stream). Config specs are ``promptslim bench``'s, plus ``pipeline`` for
    ``Pipeline.default()``. Items repeat in order when the dataset has fewer."""
    from ..bench.datasets import load_dataset
    from ..bench.runner import BenchConfig, build_config
    from ..pipeline import Pipeline
    from ..tokens import count_messages
    from ..types import Request

    if requests < 1:
        raise ConfigError(f"expected requests >= 1, got {requests}", field="requests")
    from .workload import report_skipped

    loaded = load_dataset(dataset, limit=min(requests, 500), seed=seed)
    report_skipped(loaded.errors)  # said, never silently dropped
    items = loaded.items
    if not items:
        raise ConfigError(f"no readable items in {dataset!r}", field="dataset")
    labels = [c.strip() for c in configs if c.strip()] or ["baseline"]
    out: dict[str, list[PreparedRequest]] = {}
    for spec in labels:
        config = (
            BenchConfig("pipeline", Pipeline.default())
            if spec == "pipeline"
            else build_config(spec)
        )
        if config.label in out:
            raise ConfigError(f"config given twice: {config.label}", field="configs")
        prepared: list[PreparedRequest] = []
        for item in items:
            start = time.perf_counter()
            result = config.pipeline.run(item.request)
            slim_s = time.perf_counter() - start
            body = result.to_openai()
            body.update(model=model, stream=True, max_tokens=max_tokens, temperature=0.0)
            body["stream_options"] = {"include_usage": True}
            tokens = count_messages(Request.from_openai(body).messages)
            prepared.append(PreparedRequest(body, tokens, slim_s))
        out[config.label] = [prepared[i % len(prepared)] for i in range(requests)]
    return out


# ---------------------------------------------------------------- the client


class _LoopProbe:
    """Wakes every few ms and records how late: the client's own scheduling delay."""

    def __init__(self) -> None:
        self.lags_s: list[float] = []

    async def run(self) -> None:
        while True:
            due = time.perf_counter() + _PROBE_S
            await asyncio.sleep(_PROBE_S)
            self.lags_s.append(max(0.0, time.perf_counter() - due))


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
            "POST", url, json=request.body, extensions={"trace": trace}
        ) as response:
            record.http_status = response.status_code
            if response.status_code >= 400:
                text = (await response.aread()).decode("utf-8", "replace")
                record.error = f"HTTP {response.status_code}: {text[:200]}"
                return
            lines = response.aiter_lines()
            await _read_events(lines, record, start)
            record.e2e_s = time.perf_counter() - start  # the content ended here
            await _drain(lines, httpx.HTTPError)

    start = record.sent_clock_s = time.perf_counter()
    try:
        # the whole exchange, not each read: a server trickling bytes must still time out
        await asyncio.wait_for(exchange(), timeout_s)
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
        _phases(record, marks, start)


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


def _phases(record: RequestRecord, marks: Mapping[str, float], start: float) -> None:
    def since(name: str) -> float | None:
        return marks[name] - start if name in marks else None

    connected = marks.get(
        "connection.start_tls.complete", marks.get("connection.connect_tcp.complete")
    )
    if connected is not None and "connection.connect_tcp.started" in marks:
        record.connect_s = connected - marks["connection.connect_tcp.started"]
    record.request_sent_s = since("http11.send_request_body.complete") or since(
        "http2.send_request_body.complete"
    )
    record.first_byte_s = since("http11.receive_response_headers.complete") or since(
        "http2.receive_response_headers.complete"
    )


async def _read_events(lines: Any, record: RequestRecord, start: float) -> None:
    """Server-sent events: content deltas timed as they arrive, usage kept, errors recorded."""
    try:
        await _read_until_done(lines, record, start)
    finally:
        if record.output_tokens == 0:
            # no usage from the server: one content delta is one token (llama.cpp, vLLM stream so)
            record.output_tokens = len(record.delta_times_s)


async def _read_until_done(lines: Any, record: RequestRecord, start: float) -> None:
    async for line in lines:
        if not line.startswith("data:"):
            continue
        now = time.perf_counter() - start
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            continue  # keep-alives and partial junk are not content
        if not isinstance(event, dict):
            continue
        if "error" in event:
            record.error = str(event["error"])[:300]
            continue
        usage = event.get("usage") or {}
        if usage.get("prompt_tokens") is not None:
            record.server_prompt_tokens = int(usage["prompt_tokens"])
        _server_figures(event, usage, record)
        if usage.get("completion_tokens") is not None:
            record.output_tokens = int(usage["completion_tokens"])
        for choice in event.get("choices") or ():
            if content := (choice.get("delta") or {}).get("content"):
                if record.ttft_s is None:
                    record.ttft_s = now
                record.delta_times_s.append(now)
                record.answer += str(content)


def _server_figures(
    event: Mapping[str, Any], usage: Mapping[str, Any], record: RequestRecord
) -> None:
    """The server's cached-token count and its own prompt timing, when it sends them."""
    details = usage.get("prompt_tokens_details")
    if isinstance(details, Mapping) and isinstance(details.get("cached_tokens"), int):
        record.server_cached_tokens = details["cached_tokens"]
    timings = event.get("timings")
    if isinstance(timings, Mapping):
        ms, n = timings.get("prompt_ms"), timings.get("prompt_n")
        if isinstance(ms, (int, float)) and isinstance(n, int):
            record.server_prefill_s, record.server_prefill_tokens = float(ms) / 1000, n
        cached = timings.get("cache_n")
        if record.server_cached_tokens is None and isinstance(cached, int):
            record.server_cached_tokens = cached


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
) -> tuple[list[RequestRecord], dict[str, Any]]:
    """Send ``requests`` to ``url`` (a base URL or the chat-completions endpoint): at most
    ``concurrency`` in flight, each no earlier than its arrival time when ``arrivals`` are
    given. Stops by itself after the last request or ``time_limit_s`` (requests still in
    flight are cancelled and recorded so). Returns the records and the client's overhead."""
    try:
        import httpx
    except ImportError as exc:
        raise BackendUnavailable("httpx (for promptslim loadtest)", extra="bench") from exc
    from ..bench.backends import chat_completions_url

    if concurrency is None and arrivals is None:
        raise ConfigError("give a concurrency, arrival times, or both", field="concurrency")
    if arrivals is not None and len(arrivals) != len(requests):
        raise ConfigError("one arrival time per request", field="arrivals")
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

        async def send(i: int, due: float) -> float:
            record = records[i]
            record.scheduled_s = due
            record.sched_delay_s = max(0.0, time.perf_counter() - wall0 - due)
            await _one(client, endpoint, requests[i], record, timeout_s)
            return time.perf_counter() - wall0

        async def closed_loop_client(first: int, step: int) -> None:
            # client k sends requests k, k+c, k+2c... each as soon as its previous one ends
            due = 0.0
            for i in range(first, len(requests), step):
                due = await send(i, due)

        gate = asyncio.Semaphore(concurrency or len(requests))

        async def open_loop_request(i: int, due: float) -> None:
            await asyncio.sleep(max(0.0, due - (time.perf_counter() - wall0)))
            async with gate:  # late when the concurrency cap holds it: that is scheduling delay
                await send(i, due)

        if arrivals is None:
            assert concurrency is not None
            jobs = [
                closed_loop_client(k, concurrency) for k in range(min(concurrency, len(requests)))
            ]
        else:
            jobs = [open_loop_request(i, t) for i, t in enumerate(arrivals)]
        # the clock starts after the client is built (its TLS context alone takes tens of ms)
        cpu0, wall0 = time.process_time(), time.perf_counter()
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
    wall_s = time.perf_counter() - wall0
    for record in records:
        if record.status == "pending":  # never sent before the time limit
            record.status, record.error = "cancelled", "not sent before the time limit"
    return records, _overhead(probe.lags_s, time.process_time() - cpu0, wall_s, bool(pending))


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


# ---------------------------------------------------------------- aggregates


def _stats_ms(values_s: Sequence[float]) -> dict[str, float]:
    if not values_s:
        return {"n": 0}
    ms = [v * 1000 for v in values_s]
    out: dict[str, float] = {"n": len(ms), "mean": sum(ms) / len(ms)}
    out.update(percentiles(ms, QUANTILES))
    out["max"] = max(ms)
    return out


def bucket_label(tokens: int) -> str:
    low = 0
    for edge in BUCKET_EDGES:
        if tokens < edge:
            return f"{low}-{edge - 1}"
        low = edge
    return f">={low}"


def _latency(records: Sequence[RequestRecord]) -> dict[str, dict[str, float]]:
    ok = [r for r in records if r.status == "ok"]
    return {
        "ttft_ms": _stats_ms([r.ttft_s for r in ok if r.ttft_s is not None]),
        "tpot_ms": _stats_ms([t for r in ok if (t := r.tpot_s) is not None]),
        "itl_ms": _stats_ms([x for r in ok for x in r.itl_s]),
        "e2el_ms": _stats_ms([r.e2e_s for r in ok if r.e2e_s is not None]),
    }


def summarise(
    records: Sequence[RequestRecord],
    *,
    wall_s: float,
    slo_ttft_ms: float | None = None,
    bunch_window_ms: float = 5.0,
) -> dict[str, Any]:
    """Numbers only (ms for latencies): percentiles overall and per prompt-length bucket,
    error and timeout rates, throughput, goodput under the TTFT SLO, buffering verdict."""
    n = len(records)
    ok = [r for r in records if r.status == "ok"]
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens for r in ok)
    buckets: dict[str, list[RequestRecord]] = {}
    for r in sorted(records, key=lambda r: r.prompt_tokens):
        buckets.setdefault(bucket_label(r.prompt_tokens), []).append(r)
    verdicts = [v for r in ok if (v := r.bunched(bunch_window_ms / 1000)) is not None]
    bunched = sum(verdicts)
    summary: dict[str, Any] = {
        "requests": n,
        "completed": len(ok),
        "error_rate": sum(r.status == "error" for r in records) / n if n else 0.0,
        "timeout_rate": sum(r.status == "timeout" for r in records) / n if n else 0.0,
        "cancelled": sum(r.status == "cancelled" for r in records),
        "duration_s": wall_s,
        "request_throughput": len(ok) / wall_s if wall_s > 0 else 0.0,
        "output_token_throughput": out_tokens / wall_s if wall_s > 0 else 0.0,
        "total_token_throughput": (in_tokens + out_tokens) / wall_s if wall_s > 0 else 0.0,
        "prompt_tokens_mean": in_tokens / len(ok) if ok else 0.0,
        **_latency(records),
        "sched_delay_ms": _stats_ms([r.sched_delay_s for r in records if r.status != "cancelled"]),
        "slim_ms": _stats_ms([r.slim_s for r in records]),
        "phases_ms": {
            "connect": _stats_ms([r.connect_s for r in ok if r.connect_s is not None]),
            "request_sent": _stats_ms(
                [r.request_sent_s for r in ok if r.request_sent_s is not None]
            ),
            "first_byte": _stats_ms([r.first_byte_s for r in ok if r.first_byte_s is not None]),
            "first_token": _stats_ms([r.ttft_s for r in ok if r.ttft_s is not None]),
        },
        "by_prompt_bucket": {
            label: {"requests": len(rs), **_latency(rs)} for label, rs in buckets.items()
        },
        "buffering": {
            "streams_checked": len(verdicts),
            "bunched": bunched,
            # most streams bunched: something between server and client holds tokens back
            "buffered": bool(verdicts) and bunched >= 0.5 * len(verdicts),
            "window_ms": bunch_window_ms,
        },
    }
    if slo_ttft_ms is not None:
        good = [r for r in ok if r.ttft_s is not None and r.ttft_s * 1000 <= slo_ttft_ms]
        summary["slo_ttft_ms"] = slo_ttft_ms
        summary["goodput"] = len(good) / wall_s if wall_s > 0 else 0.0
        summary["slo_attainment"] = len(good) / n if n else 0.0
    return summary


# ---------------------------------------------------------------- the whole run


def run_loadtest(
    options: LoadtestOptions,
    *,
    prepared: Mapping[str, Sequence[PreparedRequest]] | None = None,
) -> dict[str, Any]:
    """Every config on the same stream, in interleaved blocks, each with an equal share of
    the time limit: ``{"options", "configs": {label: {"summary", "client", "cut",
    "records"}}}``. ``prepared`` bodies replace the dataset."""
    from .interleave import Target, default_block, run_interleaved
    from .workload import arrival_times

    streams = prepared or prepare_requests(
        dataset=options.dataset,
        configs=options.configs,
        requests=options.requests,
        max_tokens=options.max_tokens,
        model=options.model,
        seed=options.seed,
    )
    targets = {
        label: Target(options.url, list(stream)[: options.requests])
        for label, stream in streams.items()
    }
    n = min(len(t.requests) for t in targets.values())
    targets = {label: Target(t.url, t.requests[:n]) for label, t in targets.items()}
    arrivals = None
    if options.rate is not None:
        arrivals = arrival_times(
            n, rate=options.rate, burstiness=options.burstiness, seed=options.seed
        )
    block = options.block or default_block(concurrency=options.concurrency, rate=options.rate)
    runs = run_interleaved(
        targets, concurrency=options.concurrency, arrivals=arrivals, timeout_s=options.timeout_s,
        time_limit_s=options.time_limit_s, block=block,
    )  # fmt: skip
    result: dict[str, Any] = {"options": options.as_dict(), "block": block, "configs": {}}
    for label, run in runs.items():
        records, client = run["records"], run["client"]
        summary = summarise(
            records,
            wall_s=client["wall_s"],
            slo_ttft_ms=options.slo_ttft_ms,
            bunch_window_ms=options.bunch_window_ms,
        )
        result["configs"][label] = {
            "summary": summary,
            "client": client,
            "cut": run["cut"],
            "records": [r.as_dict() for r in records],
        }
    return result


# ---------------------------------------------------------------- reports


def _row(label: str, s: Mapping[str, float]) -> str:
    if not s.get("n"):
        return f"| {label} | 0 | – | – | – | – | – | – |"
    cells = " | ".join(f"{s[k]:.1f}" for k in ("p50", "p90", "p95", "p99", "max", "mean"))
    return f"| {label} | {int(s['n'])} | {cells} |"


def format_markdown(result: Mapping[str, Any]) -> str:
    """Tables for people: per config, latency percentiles (ms), per bucket TTFT, rates."""
    o = result["options"]
    load = f"concurrency {o['concurrency']}" if o["rate"] is None else f"rate {o['rate']}/s"
    lines = [
        f"# promptslim loadtest: {o['url']}",
        "",
        f"{o['dataset']}, {o['requests']} requests, {load}",
        "",
    ]
    header = "| metric | n | p50 | p90 | p95 | p99 | max | mean |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
    for label, run in result["configs"].items():
        s, c = run["summary"], run["client"]
        lines += [f"## {label}", "", header]
        lines += [
            _row(k, s[k]) for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms", "sched_delay_ms")
        ]
        lines += [_row(f"phase {k}", v) for k, v in s["phases_ms"].items()]
        lines += [
            "",
            "| prompt tokens | requests | TTFT p50 | TTFT p99 | E2E p99 |",
            "| --- | --- | --- | --- | --- |",
        ]
        for bucket, b in s["by_prompt_bucket"].items():
            t, e = b["ttft_ms"], b["e2el_ms"]
            if t.get("n"):
                lines.append(
                    f"| {bucket} | {b['requests']} | {t['p50']:.1f} | {t['p99']:.1f} | {e['p99']:.1f} |"
                )
            else:
                lines.append(f"| {bucket} | {b['requests']} | – | – | – |")
        lines += [
            "",
            (
                f"- completed {s['completed']}/{s['requests']}; error rate {s['error_rate']:.1%}, "
                f"timeout rate {s['timeout_rate']:.1%}, cancelled {s['cancelled']}"
            ),
            (
                f"- throughput {s['request_throughput']:.2f} req/s, {s['output_token_throughput']:.1f} "
                f"output tok/s, {s['total_token_throughput']:.1f} total tok/s over {s['duration_s']:.1f} s"
            ),
        ]
        if "goodput" in s:
            lines.append(
                f"- goodput {s['goodput']:.2f} req/s with TTFT <= {s['slo_ttft_ms']:g} ms "
                f"({s['slo_attainment']:.1%} of requests)"
            )
        buf = s["buffering"]
        if buf["buffered"]:
            lines.append(
                f"- **buffered stream**: {buf['bunched']} of {buf['streams_checked']} streams "
                f"delivered their tokens within {buf['window_ms']:g} ms of the first after a long "
                "wait; something between the server and this client (a proxy, gateway or "
                "client) holds tokens back, so TTFT here is not the server's"
            )
        lag = c["loop_lag_ms"]
        lines.append(
            f"- client overhead: CPU {c['cpu_share']:.0%} of one core, event-loop lag p50 "
            f"{lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms, max {lag['max']:.1f} ms"
            + ("; **the client may be the bottleneck**" if c["client_bound"] else "")
        )
        cut = run.get("cut", {})
        if c["time_limit_reached"] or cut.get("not_sent"):
            lines.append(
                f"- stopped at its share of the time limit ({cut.get('share_s', 0):g} s): "
                f"{cut.get('cancelled_in_flight', 0)} cancelled in flight, "
                f"{cut.get('not_sent', 0)} not sent"
            )
        lines.append("")
    return "\n".join(lines)


def plot_percentiles(result: Mapping[str, Any], path: str | Path) -> None:
    """TTFT, ITL and E2E at P50/P90/P95/P99/max, a line per config, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window
    import matplotlib.pyplot as plt

    keys = ("p50", "p90", "p95", "p99", "max")
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, metric in zip(axes, ("ttft_ms", "itl_ms", "e2el_ms"), strict=True):
        for label, run in result["configs"].items():
            s = run["summary"][metric]
            if s.get("n"):
                ax.plot(list(keys), [s[k] for k in keys], marker="o", label=label)
        ax.set_title(metric.replace("_ms", "").upper())
        ax.set_ylabel("ms (client clock)")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # nothing succeeded: no lines, no legend
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(result: Mapping[str, Any], out: str | Path) -> dict[str, Path]:
    """``loadtest.json``, ``loadtest.md`` and ``loadtest.png`` in ``out`` (created)."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {k: folder / f"loadtest.{k}" for k in ("json", "md", "png")}
    paths["json"].write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    paths["md"].write_text(format_markdown(result), encoding="utf-8")
    plot_percentiles(result, paths["png"])
    return paths
