"""What one load-test request is: the body sent (``PreparedRequest``), its timings and outcome
(``RequestRecord``), and the reading of its server-sent events into that record."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

__all__ = ["PreparedRequest", "RequestRecord", "phases", "read_events"]


@dataclass(frozen=True)
class PreparedRequest:
    """A body ready to send, its prompt size (client tokenizer), what slimming it cost, and
    headers of its own (a priority class, a tenant: a mixed stream's requests differ in them),
    sent on top of the run's."""

    body: dict[str, Any]
    prompt_tokens: int
    slim_s: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)


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
    #: sent again after a kept-alive connection closed under it unanswered (``stream``)
    retries: int = 0
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


# ---------------------------------------------------------------- reading a stream


def phases(record: RequestRecord, marks: Mapping[str, float], start: float) -> None:
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


async def read_events(lines: Any, record: RequestRecord, start: float) -> None:
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
