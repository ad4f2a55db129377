"""A discrete-event simulation of a continuous-batching LLM server with a prefix cache.

The engine runs in steps, as vLLM's scheduler does. Each step it takes, in order:

1. every running request: one decode token each, or the next chunk of an unfinished prefill;
2. waiting requests, first come first served, while fewer than ``max_num_seqs`` run and the
   step's token budget (``max_batched_tokens``) lasts. A request's leading tokens found in the
   prefix cache (``BlockHashCache``, vLLM's block model, LRU) skip prefill.

With ``chunked_prefill`` a prefill is cut to fit the budget and goes on next step; without it a
prefill runs whole, and a prompt longer than the budget runs in a step of its own. The step
lasts what ``CostModel`` says; then a finished prefill emits the request's first token (its
TTFT) and is inserted into the cache, and each decode emits one more token.

Load is either closed-loop (``concurrency`` clients, each sending its next request when the
previous one finishes, as ``loadtest --concurrency`` does) or open-loop (``arrivals``: a time
per request, from ``workload.arrival_times``). Same inputs, same output: nothing here is random.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..cache import BlockHashCache, Tokens, as_token_array
from ..errors import ConfigError
from ..stats import percentiles
from .costmodel import CostModel

__all__ = ["RequestTiming", "ServerConfig", "ServerRun", "SimRequest", "simulate_server"]


@dataclass(frozen=True)
class ServerConfig:
    """The engine's scheduling limits and its prefix cache (``cache_blocks`` None: unbounded)."""

    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    chunked_prefill: bool = True
    prefix_cache: bool = True
    block_size: int = 16
    cache_blocks: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_batched_tokens", "block_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"expected a positive integer, got {value!r}", field=name)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class SimRequest:
    """One request: its prompt token ids and how many tokens it generates (>= 1).

    ``cost_scale`` multiplies this request's per-token prefill cost (``CostModel.chunk_s``):
    a real server's service time varies around its curve from request to request (here by
    about 10 % at concurrency 1), and a P99 is made of that spread. Draw it from measured
    ratios to simulate it; 1.0 is the curve itself."""

    tokens: Tokens
    output_tokens: int = 1
    cost_scale: float = 1.0


@dataclass(frozen=True)
class RequestTiming:
    """Times (seconds on the simulated clock) of one request, and its cache hit."""

    arrival_s: float
    start_s: float
    first_token_s: float
    end_s: float
    prompt_tokens: int
    hit_tokens: int

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def queue_s(self) -> float:
        """Waiting before the engine first scheduled it."""
        return self.start_s - self.arrival_s

    @property
    def prefill_s(self) -> float:
        """From its first scheduled step to its first token (shared steps included)."""
        return self.first_token_s - self.start_s

    @property
    def e2e_s(self) -> float:
        return self.end_s - self.arrival_s


@dataclass
class ServerRun:
    """Every request's timing, in request order, and the engine's totals."""

    requests: list[RequestTiming]
    makespan_s: float
    busy_s: float
    steps: int
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def hit_rate(self) -> float:
        prompt = sum(r.prompt_tokens for r in self.requests)
        return sum(r.hit_tokens for r in self.requests) / prompt if prompt else 0.0

    @property
    def utilisation(self) -> float:
        """Share of the simulated time the engine was running a step."""
        return self.busy_s / self.makespan_s if self.makespan_s > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        """Numbers only: TTFT, queueing and prefill percentiles (seconds), hit rate, utilisation."""
        qs = (50, 95, 99)
        rs = self.requests
        return {
            "requests": len(rs),
            "ttft_s": percentiles([r.ttft_s for r in rs], qs),
            "queue_s": percentiles([r.queue_s for r in rs], qs),
            "prefill_s": percentiles([r.prefill_s for r in rs], qs),
            "e2e_s": percentiles([r.e2e_s for r in rs], qs),
            "mean_prompt_tokens": sum(r.prompt_tokens for r in rs) / len(rs) if rs else 0.0,
            "cache_hit_rate": self.hit_rate,
            "utilisation": self.utilisation,
            "makespan_s": self.makespan_s,
            "steps": self.steps,
            "throughput_rps": len(rs) / self.makespan_s if self.makespan_s > 0 else 0.0,
        }


class _State:
    __slots__ = (
        "arrival",
        "end",
        "first",
        "hit",
        "i",
        "n",
        "out",
        "pos",
        "start",
        "tokens",
        "want",
    )

    def __init__(self, i: int, tokens: Any, want: int, arrival: float) -> None:
        self.i, self.tokens, self.n, self.want, self.arrival = i, tokens, len(tokens), want, arrival
        self.pos = self.hit = self.out = 0
        self.start = self.first = self.end = -1.0


def simulate_server(
    requests: Sequence[SimRequest],
    *,
    cost: CostModel,
    server: ServerConfig | None = None,
    concurrency: int | None = None,
    arrivals: Sequence[float] | None = None,
    stagger_s: float = 0.0,
    think_s: float = 0.0,
) -> ServerRun:
    """Run ``requests`` through the engine; exactly one of ``concurrency`` / ``arrivals``.

    Closed loop: a client's next request reaches the server ``think_s`` after its previous
    one ended (its client's turnaround: reading the end, connecting, sending). With 0 it joins
    the very next step; any gap at all makes it miss that step, as a request sent over a real
    socket misses the step the server started when it wrote the previous answer's end.

    Closed loop: client ``k`` sends its first request ``k * stagger_s`` after the first
    client. With 0 every client's first prompt arrives at once and the first step batches
    them all, where a server that starts a step as soon as one prompt is queued (llama-server)
    mostly runs them one after another: which of the two happens is a race inside it."""
    _check_inputs(requests, concurrency, arrivals)
    for name, value in (("stagger_s", stagger_s), ("think_s", think_s)):
        if not (isinstance(value, (int, float)) and 0 <= value < math.inf):
            raise ConfigError(f"expected a finite {name} >= 0, got {value!r}", field=name)
    loop = _ClosedLoop(concurrency or 0, stagger_s, think_s)
    return _Engine(requests, cost, server or ServerConfig(), loop, arrivals).run()


@dataclass(frozen=True)
class _ClosedLoop:
    clients: int  # 0: open loop (arrival times given)
    stagger_s: float = 0.0
    think_s: float = 0.0


def _check_inputs(
    requests: Sequence[SimRequest], concurrency: int | None, arrivals: Sequence[float] | None
) -> None:
    if (concurrency is None) == (arrivals is None):
        raise ConfigError("give exactly one of concurrency or arrivals", field="concurrency")
    if concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1):
        raise ConfigError(f"expected a positive integer, got {concurrency!r}", field="concurrency")
    if arrivals is not None and len(arrivals) != len(requests):
        raise ConfigError("one arrival time per request", field="arrivals")
    for i, r in enumerate(requests):
        if len(r.tokens) < 1 or r.output_tokens < 1:
            raise ConfigError(f"request {i} needs >= 1 prompt and output token", field="requests")
        if not (isinstance(r.cost_scale, (int, float)) and 0 < r.cost_scale < math.inf):
            raise ConfigError(
                f"request {i}: cost_scale must be a positive number, got {r.cost_scale!r}",
                field="requests",
            )


class _Engine:
    """One simulation: the clock, the queues, and a step loop (schedule, cost, advance)."""

    def __init__(
        self,
        requests: Sequence[SimRequest],
        cost: CostModel,
        server: ServerConfig,
        loop: _ClosedLoop,
        arrivals: Sequence[float] | None,
    ) -> None:
        self.requests, self.cost, self.server, self.loop = requests, cost, server, loop
        self.cache = (
            BlockHashCache(block_size=server.block_size, capacity_blocks=server.cache_blocks)
            if server.prefix_cache
            else None
        )
        self.total = total = len(requests)
        self.tokens = [as_token_array(r.tokens) for r in requests]
        if arrivals is not None:
            order = sorted(range(total), key=lambda i: (arrivals[i], i))
            self.pending = deque((float(arrivals[i]), i) for i in order)
            self.issued = total
        else:
            self.issued = min(loop.clients, total)
            self.pending = deque((i * loop.stagger_s, i) for i in range(self.issued))
        self.waiting: deque[_State] = deque()
        self.running: list[_State] = []
        self.done: list[_State | None] = [None] * total
        self.finished = self.steps = 0
        self.now = self.busy = 0.0

    def run(self) -> ServerRun:
        # every step makes progress (a token of some request), so this bounds the loop
        pairs = zip(self.tokens, self.requests, strict=True)
        max_steps = sum(len(t) + r.output_tokens for t, r in pairs) + 1
        while self.finished < self.total:
            while self.pending and self.pending[0][0] <= self.now:
                at, i = self.pending.popleft()
                self.waiting.append(_State(i, self.tokens[i], self.requests[i].output_tokens, at))
            if not self.running and not self.waiting:
                self.now = self.pending[0][0]  # idle: jump to the next arrival
                continue
            self.steps += 1
            if self.steps > max_steps:  # pragma: no cover - a scheduler bug, not a user error
                raise RuntimeError("simulation made no progress")
            chunks, decodes = self._schedule()
            dt = self._step_seconds(chunks, decodes)
            self.now += dt
            self.busy += dt
            self._advance(chunks, decodes)
        timings = [
            RequestTiming(s.arrival, s.start, s.first, s.end, s.n, s.hit)
            for s in (d for d in self.done if d is not None)
        ]
        return ServerRun(
            timings,
            makespan_s=self.now,
            busy_s=self.busy,
            steps=self.steps,
            config=self.server.as_dict(),
        )

    def _schedule(self) -> tuple[list[tuple[_State, int]], list[_State]]:
        """This step's prefill chunks and decodes: running requests first, then waiting ones
        admitted while there are sequence slots and token budget."""
        server, cache = self.server, self.cache
        budget = server.max_batched_tokens
        chunks: list[tuple[_State, int]] = []
        decodes: list[_State] = []
        for st in self.running:
            if st.pos < st.n:  # a chunked prefill going on
                k = min(st.n - st.pos, budget)
                if k > 0:
                    chunks.append((st, k))
                    budget -= k
            elif budget > 0:
                decodes.append(st)
                budget -= 1
        while self.waiting and len(self.running) < server.max_num_seqs and budget > 0:
            st = self.waiting[0]
            if st.start < 0 and cache is not None:
                # the last prompt token is always computed: it yields the first output token
                st.hit = min(cache.lookup(st.tokens), st.n - 1)
                st.pos = st.hit
            need = st.n - st.pos
            if not server.chunked_prefill and need > budget and (chunks or decodes):
                break  # whole prefills only: wait for a step with room
            k = min(need, budget) if server.chunked_prefill else need
            self.waiting.popleft()
            st.start = self.now
            self.running.append(st)
            chunks.append((st, k))
            budget -= k
        return chunks, decodes

    def _step_seconds(self, chunks: list[tuple[_State, int]], decodes: list[_State]) -> float:
        cost = self.cost
        dt = cost.decode_s(len(decodes))
        if chunks:
            dt += cost.a + sum(
                cost.chunk_s(st.pos, k) * self.requests[st.i].cost_scale for st, k in chunks
            )
        if not math.isfinite(dt):  # huge coefficients overflow; NaN would stall the clock
            raise ConfigError(f"a step costs {dt} s: coefficients too large", field="cost_model")
        return dt

    def _advance(self, chunks: list[tuple[_State, int]], decodes: list[_State]) -> None:
        """Apply the step: chunks move on (a finished prefill yields the first token and fills
        the cache), decodes add a token, finished requests leave (closed loop: the client sends
        its next one)."""
        ended: list[_State] = []
        for st, k in chunks:
            st.pos += k
            if st.pos == st.n:
                st.first = self.now
                st.out = 1
                if self.cache is not None:
                    self.cache.insert(st.tokens)
                if st.out >= st.want:
                    ended.append(st)
        for st in decodes:
            st.out += 1
            if st.out >= st.want:
                ended.append(st)
        for st in ended:
            st.end = self.now
            self.done[st.i] = st
            self.finished += 1
            if self.issued < self.total:  # in time order: staggered first sends may be later
                bisect.insort(self.pending, (self.now + self.loop.think_s, self.issued))
                self.issued += 1
        if ended:
            self.running = [st for st in self.running if st.end < 0]
