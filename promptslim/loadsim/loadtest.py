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

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from ..bench.configs import BenchConfig, build_config
from ..bench.datasets import load_dataset
from ..errors import ConfigError
from ..pipeline import Pipeline
from ..tokens import count_messages
from ..types import Request

# BUCKET_EDGES, QUANTILES and bucket_label were defined here: still importable from here
from .aggregates import BUCKET_EDGES, QUANTILES, bucket_label, summarise  # noqa: F401
from .interleave import Target, default_block, run_interleaved
from .loadtest_report import format_markdown, plot_percentiles, write_report
from .records import PreparedRequest, RequestRecord
from .stream import run_stream
from .workload import arrival_times, report_skipped

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
    #: closed loop: seconds between the clients' first requests (``stream.run_stream``)
    stagger_s: float = 0.0

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
        if not 0 <= self.stagger_s < float("inf"):
            raise ConfigError(f"expected a stagger >= 0 s, got {self.stagger_s}", field="stagger_s")
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
    if requests < 1:
        raise ConfigError(f"expected requests >= 1, got {requests}", field="requests")
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


# ---------------------------------------------------------------- the whole run


def run_loadtest(
    options: LoadtestOptions,
    *,
    prepared: Mapping[str, Sequence[PreparedRequest]] | None = None,
) -> dict[str, Any]:
    """Every config on the same stream, in interleaved blocks, each with an equal share of
    the time limit: ``{"options", "configs": {label: {"summary", "client", "cut",
    "records"}}}``. ``prepared`` bodies replace the dataset."""
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
        time_limit_s=options.time_limit_s, block=block, stagger_s=options.stagger_s,
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
