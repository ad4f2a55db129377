"""What the shared stores did in this process: hits, misses, faults, work done, Redis latency.

``STORE_STATS`` is the one per-process ``StoreStats``: the Redis stores (``redis_store``) count
their hits, misses and faults in it, and the summary and embedding code note each piece of work
they had to do themselves (``note_computed``) — so a replica can tell how much work another
replica had already done for it. ``STORE_STATS.snapshot()`` is a flat dict of numbers, for a
metrics endpoint::

    {"redis_hits": 812, "redis_misses": 40, "redis_errors": 3, "degraded": 17,
     "computed_summary": 12, "computed_embedding": 85, "redis_p99_ms": 0.41, ...}

``degraded_scope()`` collects, for one request (a context variable, so concurrent requests on
threads or tasks stay apart), the reasons a shared store fell back to the local one; the
history stage turns them into a report warning.

With ``PROMPTSLIM_STATS_FILE`` set in the environment, the process also keeps a bounded log of
its events (kind, key digest, wall-clock time) and writes the log and the snapshot to
``<that path>.<pid>.json`` at exit: the scale-out benchmark attributes work to requests with it.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..stats import percentile

__all__ = ["STORE_STATS", "StoreStats", "degraded_scope", "note_computed", "note_degraded"]

STATS_FILE_ENV = "PROMPTSLIM_STATS_FILE"
#: events kept for the stats file (oldest dropped first); latencies kept for the percentile
MAX_EVENTS = 200_000
MAX_LATENCIES = 8192

_scope: ContextVar[list[str] | None] = ContextVar("promptslim_degraded", default=None)


class StoreStats:
    """Thread-safe counters of the shared stores, and the latency of recent Redis calls."""

    def __init__(self, *, log_events: bool = False) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self._latency_ms: deque[float] = deque(maxlen=MAX_LATENCIES)
        self.events: deque[tuple[str, str, float]] | None = (
            deque(maxlen=MAX_EVENTS) if log_events else None
        )

    def count(self, name: str, n: int = 1, *, key: str = "") -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + n
            if self.events is not None:
                self.events.append((name, key, time.time()))

    def latency(self, ms: float) -> None:
        self._latency_ms.append(ms)  # deque.append is atomic

    def latency_p99_ms(self) -> float | None:
        values = list(self._latency_ms)
        return float(percentile(values, 99)) if values else None

    def snapshot(self) -> dict[str, float]:
        """Every counter, and ``redis_p50_ms``/``redis_p99_ms`` of the recent calls."""
        with self._lock:
            out: dict[str, float] = dict(self.counts)
        values = list(self._latency_ms)
        if values:
            out["redis_p50_ms"] = float(percentile(values, 50))
            out["redis_p99_ms"] = float(percentile(values, 99))
        return out

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self._latency_ms.clear()
            if self.events is not None:
                self.events.clear()

    def dump(self, path: str) -> None:
        """The snapshot and the event log as one JSON file (the benchmark's reader)."""
        with self._lock:
            events = list(self.events or ())
        data = {"pid": os.getpid(), "stats": self.snapshot(), "events": events}
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)


STORE_STATS = StoreStats(log_events=bool(os.environ.get(STATS_FILE_ENV)))


def _dump_at_exit() -> None:
    base = os.environ.get(STATS_FILE_ENV)
    if base:
        try:
            STORE_STATS.dump(f"{base}.{os.getpid()}.json")
        except (OSError, ImportError) as exc:  # at exit: say so, never raise
            logging.getLogger(__name__).warning("could not write %s: %s", base, exc)


atexit.register(_dump_at_exit)


def digest(key: str | bytes) -> str:
    """A short digest naming a piece of work in the event log (never its text)."""
    data = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def note_computed(kind: str, key: str | bytes, n: int = 1) -> None:
    """Work done here that a shared store could have saved: ``kind`` is ``summary`` or
    ``embedding``; ``key`` names it (digested before it is kept)."""
    STORE_STATS.count(
        f"computed_{kind}", n, key=digest(key) if STORE_STATS.events is not None else ""
    )


def note_degraded(reason: str) -> None:
    """A shared store fell back to the local one (``reason`` is short and has no prompt text)."""
    STORE_STATS.count("degraded", key=reason)
    found = _scope.get()
    if found is not None and reason not in found and len(found) < 8:
        found.append(reason)


@contextmanager
def degraded_scope() -> Iterator[list[str]]:
    """The reasons shared stores degraded during the block, in this context only."""
    found: list[str] = []
    token = _scope.set(found)
    try:
        yield found
    finally:
        _scope.reset(token)
