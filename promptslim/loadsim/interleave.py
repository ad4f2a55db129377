"""A/B/C load tests in interleaved blocks, each config with its own share of the time limit.

Run one after another, configs met different machines (speed phases up to ~2x apart here) and
the first could use the whole time limit: tried with 48 requests per config at concurrency 16
and a 480 s limit, the baseline took all of it and the second config completed 0 of 48. Here
the stream is cut into blocks of ``block`` requests and the configs take turns, block by block
(A1 B1 A2 B2 ...), so each sees the same phases of the machine; each block runs alone, so a
config's requests never queue behind another config's. Each config may use ``time_limit_s /
len(configs)`` seconds of sending in all: when its share runs out its block is cut (requests in
flight cancelled) and its later blocks are not sent, and its ``cut`` entry says so, while the
other configs go on with their own shares.

Open-loop blocks keep the stream's arrival times, shifted to start at the block's first.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .records import PreparedRequest, RequestRecord
from .stream import run_stream

__all__ = ["Target", "default_block", "run_interleaved"]


@dataclass(frozen=True)
class Target:
    """Where one config's requests go: its URL, its bodies (same items, same order as the
    other configs'), and headers sent with each (a priority class, a tenant key)."""

    url: str
    requests: Sequence[PreparedRequest]
    headers: Mapping[str, str] = field(default_factory=dict)


def default_block(*, concurrency: int | None, rate: float | None) -> int:
    """Requests per config per block: two rounds of the closed loop's clients (so the server
    reaches its steady load inside a block), or about ten seconds of open-loop arrivals."""
    if rate is not None:
        return max(4, math.ceil(rate * 10.0))
    return max(4, 2 * (concurrency or 1))


def _blocks(n: int, size: int) -> list[range]:
    return [range(s, min(n, s + size)) for s in range(0, n, size)]


def _merge_client(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One config's client overhead over its blocks (lag: the worst block's)."""
    wall = sum(p["wall_s"] for p in parts)
    cpu = sum(p["cpu_s"] for p in parts)
    lag = {k: max((p["loop_lag_ms"][k] for p in parts), default=0.0) for k in ("p50", "p99", "max")}
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_share": cpu / wall if wall > 0 else 0.0,
        "loop_lag_ms": lag,
        "client_bound": any(p["client_bound"] for p in parts),
        "time_limit_reached": any(p["time_limit_reached"] for p in parts),
        "blocks": len(parts),
    }


def _unsent(config: str, index: int, request: PreparedRequest, share_s: float) -> RequestRecord:
    return RequestRecord(
        index,
        config,
        request.prompt_tokens,
        slim_s=request.slim_s,
        status="cancelled",
        error=f"not sent: this config's share of the time limit ({share_s:g} s) was used",
    )


def _stream_length(targets: Mapping[str, Target], arrivals: Sequence[float] | None) -> int:
    """The requests per config, once checked to be the same for all and for ``arrivals``."""
    if not targets:
        raise ConfigError("no configs to run", field="configs")
    sizes = {len(t.requests) for t in targets.values()}
    if len(sizes) != 1:
        raise ConfigError("every config needs the same number of requests", field="requests")
    n = sizes.pop()
    if arrivals is not None and len(arrivals) != n:
        raise ConfigError("one arrival time per request", field="arrivals")
    return n


def run_interleaved(
    targets: Mapping[str, Target],
    *,
    concurrency: int | None = None,
    arrivals: Sequence[float] | None = None,
    timeout_s: float = 60.0,
    time_limit_s: float = 600.0,
    block: int | None = None,
    before_block: Callable[[], None] | None = None,
    stagger_s: float = 0.0,
) -> dict[str, dict[str, Any]]:
    """``{label: {"records": [RequestRecord], "client": {...}, "cut": {...}}}``, the configs
    sent in turns, ``block`` requests at a time (``default_block`` when None).

    ``before_block`` runs before each block is sent: clearing the server's prompt cache there
    keeps one config's prompts from being served from the cache another config filled (two
    configs that send the same slimmed bytes would otherwise favour whichever goes second).
    ``stagger_s``: each block's closed-loop clients start this far apart (``run_stream``)."""
    n = _stream_length(targets, arrivals)
    size = block or default_block(concurrency=concurrency, rate=None if arrivals is None else 1.0)
    if size < 1:
        raise ConfigError(f"expected block >= 1, got {size}", field="block")
    share_s = time_limit_s / len(targets)
    left = dict.fromkeys(targets, share_s)
    records: dict[str, list[RequestRecord]] = {label: [] for label in targets}
    clients: dict[str, list[dict[str, Any]]] = {label: [] for label in targets}
    for span in _blocks(n, size):
        for label, target in targets.items():
            todo = [target.requests[i] for i in span]
            if left[label] <= 0:  # its share is spent: the rest is recorded, never sent
                records[label] += [_unsent(label, i, target.requests[i], share_s) for i in span]
                continue
            if before_block is not None:
                before_block()
            due = None
            if arrivals is not None:
                due = [arrivals[i] - arrivals[span.start] for i in span]
            got, client = asyncio.run(
                run_stream(
                    target.url, todo, config=label, concurrency=concurrency, arrivals=due,
                    timeout_s=timeout_s, time_limit_s=left[label], headers=target.headers,
                    stagger_s=stagger_s,
                )
            )  # fmt: skip
            left[label] = 0.0 if client["time_limit_reached"] else left[label] - client["wall_s"]
            for offset, record in zip(span, got, strict=True):
                record.index = offset  # the stream's index, not the block's
            records[label] += got
            clients[label].append(client)
    return {
        label: {
            "records": records[label],
            "client": _merge_client(clients[label]),
            "cut": _cut(records[label], share_s),
        }
        for label in targets
    }


def _cut(records: Sequence[RequestRecord], share_s: float) -> dict[str, Any]:
    """What the time limit cut from one config: in flight when its share ran out, never sent."""
    in_flight = sum(r.status == "cancelled" and r.sent_clock_s > 0 for r in records)
    unsent = sum(r.status == "cancelled" and r.sent_clock_s == 0 for r in records)
    return {"share_s": share_s, "cancelled_in_flight": in_flight, "not_sent": unsent}
