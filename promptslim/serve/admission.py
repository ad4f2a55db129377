"""Admission control: a concurrency limit and a bounded FIFO queue.

Past the limit a request waits; past the queue bound it is refused at once (the caller turns
that into ``429`` with ``Retry-After``), so an overloaded upstream does not make every
request's TTFT grow without bound. Single event loop: no locks needed.
"""

from __future__ import annotations

import asyncio
import collections

__all__ = ["Admission", "Overloaded"]


class Overloaded(Exception):
    """No slot and no room in the queue (or the queue wait timed out)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class Admission:
    """``await acquire(...)`` before talking to the upstream, ``release()`` when done."""

    def __init__(self, *, limit: int, max_queue: int) -> None:
        self.limit = limit
        self.max_queue = max_queue
        self._active = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def active(self) -> int:
        return self._active

    @property
    def queued(self) -> int:
        return len(self._waiters)

    async def acquire(self, *, timeout_s: float) -> None:
        """Take a slot, waiting in the queue if needed; ``Overloaded`` when refused."""
        if self._active < self.limit and not self._waiters:
            self._active += 1
            return
        if len(self._waiters) >= self.max_queue:
            raise Overloaded(f"{self._active} requests in flight and {len(self._waiters)} queued")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except BaseException as exc:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot was handed over just as we gave up: pass it on
            else:
                fut.cancel()
                try:
                    self._waiters.remove(fut)
                except ValueError:
                    pass
            if isinstance(exc, asyncio.TimeoutError):
                raise Overloaded(f"waited {timeout_s:g} s in the queue") from None
            raise

    def release(self) -> None:
        """Hand the slot to the oldest waiter, or free it."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot moves; ``_active`` stays the same
                return
        self._active -= 1
