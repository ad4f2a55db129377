"""Replay a stream of tokenised requests through a cache model and count what hits.

::

    sim = PrefixCacheSimulator(BlockHashCache(block_size=16, capacity_blocks=50_000))
    result = sim.replay(token_lists)          # any iterable of token sequences / arrays
    result.hit_rate, result.hit_tokens, result.evictions, result.per_request[0].hit_tokens

``simulate(stream, models)`` replays one stream through several models at once. Passing numpy
integer arrays (uint64 is used as is) avoids a list-to-array conversion per request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .base import CacheModel, Tokens, as_token_array

if TYPE_CHECKING:
    from ..tokens import TokenCounter
    from ..types import Request

__all__ = ["PrefixCacheSimulator", "RequestHits", "SimulationResult", "request_tokens", "simulate"]


@dataclass(frozen=True)
class RequestHits:
    """One replayed request: its prompt length and the leading tokens served from cache."""

    prompt_tokens: int
    hit_tokens: int

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass
class SimulationResult:
    """Totals of a replay; ``per_request`` is empty when the simulator does not record it."""

    model: str
    requests: int = 0
    prompt_tokens: int = 0
    hit_tokens: int = 0
    evictions: int = 0
    per_request: list[RequestHits] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        """Hit tokens / prompt tokens over the whole stream (0.0 for an empty stream)."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def as_dict(self, *, per_request: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "hit_tokens": self.hit_tokens,
            "hit_rate": self.hit_rate,
            "evictions": self.evictions,
        }
        if per_request:
            out["per_request"] = [[r.prompt_tokens, r.hit_tokens] for r in self.per_request]
        return out


class PrefixCacheSimulator:
    """Feeds requests to one cache model in order and accumulates a ``SimulationResult``."""

    def __init__(self, model: CacheModel, *, record_requests: bool = True) -> None:
        self.model = model
        self.record_requests = record_requests
        self.reset()

    def observe(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        """Replay one request; returns its hit tokens."""
        arr = as_token_array(tokens)
        hit = self.model.observe(arr, breakpoints=breakpoints)
        res = self._result
        res.requests += 1
        res.prompt_tokens += len(arr)
        res.hit_tokens += hit
        if self.record_requests:
            res.per_request.append(RequestHits(len(arr), hit))
        return hit

    def replay(
        self,
        stream: Iterable[Tokens],
        *,
        breakpoints: Iterable[Sequence[int] | None] | None = None,
    ) -> SimulationResult:
        """Replay every request of ``stream`` (``breakpoints``: one entry per request, for
        models with explicit breakpoints) and return the accumulated result."""
        if breakpoints is None:
            for tokens in stream:
                self.observe(tokens)
        else:
            for tokens, points in zip(stream, breakpoints, strict=True):
                self.observe(tokens, breakpoints=points)
        return self.result()

    def result(self) -> SimulationResult:
        """The result so far (evictions read from the model now)."""
        self._result.evictions = self.model.evictions - self._evictions_at_start
        return self._result

    def reset(self) -> None:
        """Forget the counters (the model's cache is kept; call ``model.reset()`` to empty it)."""
        self._result = SimulationResult(model=self.model.name)
        self._evictions_at_start = self.model.evictions


def simulate(
    stream: Sequence[Tokens],
    models: Mapping[str, CacheModel],
    *,
    breakpoints: Sequence[Sequence[int] | None] | None = None,
    record_requests: bool = False,
) -> dict[str, SimulationResult]:
    """Replay ``stream`` through each model (each from its current state); results by name."""
    arrays = [as_token_array(t) for t in stream]
    results = {}
    for name, model in models.items():
        sim = PrefixCacheSimulator(model, record_requests=record_requests)
        results[name] = sim.replay(arrays, breakpoints=breakpoints)
        results[name].model = name
    return results


def request_tokens(request: Request, counter: TokenCounter | None = None) -> tuple[list[int], int]:
    """A request's prompt as a server would tokenise it (tools JSON, then each message as
    ``<|role|>\\ntext\\n``), and the length of its stable prefix (tools plus the messages
    before ``request.prefix_end()``): what to feed a cache model, and where an Anthropic
    breakpoint would go. Chat templates differ between models; the prefix structure does not."""
    from ..tokens import get_counter

    counter = counter or get_counter(request.tokenizer)
    tokens: list[int] = []
    if request.tools:
        tokens += counter.encode(json.dumps(request.tools, ensure_ascii=False))
    end = request.prefix_end()
    prefix_len = len(tokens)
    for i, m in enumerate(request.messages):
        tokens += counter.encode(f"<|{m.role}|>\n{m.text}\n")
        if i + 1 == end:
            prefix_len = len(tokens)
    return tokens, prefix_len
