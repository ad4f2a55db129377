"""Admission control: a concurrency limit, a bounded queue, priority classes, shortest prompt
first within a class, per-tenant concurrency caps and a queue-wait budget per class.

Past the limit a request waits; past the queue bound it is refused at once (the caller turns
that into ``429`` with ``Retry-After``), so an overloaded upstream does not make every
request's TTFT grow without bound. A freed slot goes to the waiting request of the highest
class (``AdmissionPolicy.classes``, highest first), and within a class to the one with the
fewest prompt tokens (when ``shortest_first``), ties in arrival order. The proxy slims a
request that has to wait *before* it queues: the size it is ordered by is what the upstream
will prefill, and once admitted it holds its slot for the upstream exchange alone, never for
the pipeline. Short requests then do not queue behind long ones: the seed's "high-value short
requests must not wait for very long ones".

The queue is only where the waiting happens when the limit is the upstream's own: set it to
the server's parallel slots (llama.cpp's ``-np``, vLLM's ``--max-num-seqs``). A larger limit
sends everything on, and the requests then wait in the server's queue, first come first
served, where no class or size can reorder them. A request whose tenant already has
``tenant_limit`` requests in flight waits even when a slot is free, so one tenant cannot take
every slot. Each class may have its own longest queue wait (``queue_budget_s``); past it, 429.

Who is who comes from request headers: ``X-PromptSlim-Priority`` names the class (an unknown
or missing name gets ``default_class``: a typo never escalates), ``X-PromptSlim-Tenant`` the
tenant (else a hash of ``Authorization``, so each upstream key is a tenant; else none, no cap).
Clients can claim any class: put the proxy behind something that sets or strips the header
when clients are not trusted. Single event loop: no locks needed.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import ConfigError

__all__ = [
    "PRIORITY_HEADER",
    "TENANT_HEADER",
    "Admission",
    "AdmissionPolicy",
    "Overloaded",
    "Ticket",
]

PRIORITY_HEADER = "x-promptslim-priority"
TENANT_HEADER = "x-promptslim-tenant"


class Overloaded(Exception):
    """No slot and no room in the queue (or the queue wait timed out)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, kw_only=True)
class AdmissionPolicy:
    """How waiting requests are ordered and capped. The default is one class, first come
    first served, no tenant caps: the proxy's behaviour before priorities existed."""

    #: class names, highest priority first; empty: one class, ``default``
    classes: tuple[str, ...] = ()
    #: the class of a request that names none (or an unknown one); the lowest when None
    default_class: str | None = None
    #: within a class, the request with the fewest prompt tokens goes first
    shortest_first: bool = False
    #: requests one tenant may have in flight at once (None: no cap)
    tenant_limit: int | None = None
    #: per class, the longest queue wait (s) before 429; others use the proxy's queue timeout
    queue_budget_s: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = self.classes or ("default",)
        if len(set(names)) != len(names):
            raise ConfigError("class names must be distinct", field="priority_classes")
        if self.default_class is not None and self.default_class not in names:
            raise ConfigError(f"not one of {list(names)}", field="default_class")
        if self.tenant_limit is not None and self.tenant_limit < 1:
            raise ConfigError("must be at least 1", field="tenant_max_concurrency")
        for name, budget in self.queue_budget_s.items():
            if name not in names:
                raise ConfigError(f"{name!r} is not one of {list(names)}", field="queue_budget")
            if not budget > 0:
                raise ConfigError(f"{name}: must be positive", field="queue_budget")

    @property
    def names(self) -> tuple[str, ...]:
        return self.classes or ("default",)

    @property
    def ordered(self) -> bool:
        """Whether the queue is anything but first come, first served."""
        return len(self.names) > 1 or self.shortest_first or self.tenant_limit is not None

    def ticket(self, headers: Mapping[str, str], *, key: str = "") -> Ticket:
        """The class and tenant of a request, from its headers (lower-case names)."""
        names = self.names
        default = self.default_class or names[-1]
        asked = headers.get(PRIORITY_HEADER, "").strip().lower()
        klass = next((n for n in names if n.lower() == asked), default) if asked else default
        tenant = headers.get(TENANT_HEADER, "").strip() or None
        if tenant is None and (auth := headers.get("authorization")):
            tenant = "key:" + hashlib.sha256(auth.encode()).hexdigest()[:16]  # never the key
        return Ticket(key=key, klass=klass, rank=names.index(klass), tenant=tenant)


@dataclass
class Ticket:
    """One request's place in line: its class (``rank`` 0 is the highest), its tenant, and its
    prompt size once known (``tokens``; 0 until then)."""

    key: str = ""
    klass: str = "default"
    rank: int = 0
    tenant: str | None = None
    tokens: int = 0


@dataclass(order=True)
class _Waiter:
    order: tuple[int, int, int]
    ticket: Ticket = field(compare=False)
    future: asyncio.Future[None] = field(compare=False)


class Admission:
    """``await acquire(...)`` before talking to the upstream, ``release(...)`` when done."""

    def __init__(
        self, *, limit: int, max_queue: int, policy: AdmissionPolicy | None = None
    ) -> None:
        self.limit = limit
        self.max_queue = max_queue
        self.policy = policy or AdmissionPolicy()
        self._active = 0
        self._heap: list[_Waiter] = []
        self._seq = itertools.count()
        self._tenants: dict[str, int] = {}  # in flight per tenant
        self._holders: dict[str, str | None] = {}  # ticket key -> tenant, while it holds a slot

    @property
    def active(self) -> int:
        return self._active

    @property
    def queued(self) -> int:
        return sum(1 for w in self._heap if not w.future.done())

    def would_wait(self, ticket: Ticket) -> bool:
        """Whether ``ticket`` would queue if it asked now (then its size is worth knowing)."""
        return not self._free_for(ticket) or self.queued > 0

    def has_room(self) -> bool:
        """Whether the queue can take one more (a request past it is refused at once)."""
        return self.queued < self.max_queue

    def budget_s(self, ticket: Ticket, default_s: float) -> float:
        return float(self.policy.queue_budget_s.get(ticket.klass, default_s))

    async def acquire(self, *, timeout_s: float, ticket: Ticket | None = None) -> None:
        """Take a slot, waiting in the queue if needed; ``Overloaded`` when refused."""
        ticket = ticket or Ticket()
        if self._free_for(ticket) and not self._eligible_waiting():
            self._take(ticket)
            return
        if not self.has_room():
            raise Overloaded(f"{self._active} requests in flight and {self.queued} queued")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        size = ticket.tokens if self.policy.shortest_first else 0
        heapq.heappush(self._heap, _Waiter((ticket.rank, size, next(self._seq)), ticket, fut))
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except BaseException as exc:
            if fut.done() and not fut.cancelled():
                self.release(ticket.key)  # the slot was handed over just as we gave up: pass it on
            else:
                fut.cancel()  # left in the heap, skipped and dropped when it comes up
                self._dispatch()  # it may have been what held a tenant's waiter back
            if isinstance(exc, asyncio.TimeoutError):
                raise Overloaded(f"waited {timeout_s:g} s in the queue ({ticket.klass})") from None
            raise

    def release(self, key: str = "") -> None:
        """Free the slot ``key`` held and hand it to the first eligible waiter."""
        tenant = self._holders.pop(key, None)
        if tenant is not None:
            left = self._tenants[tenant] - 1
            if left:
                self._tenants[tenant] = left
            else:
                del self._tenants[tenant]
        self._active -= 1
        self._dispatch()

    # ---- private

    def _free_for(self, ticket: Ticket) -> bool:
        cap = self.policy.tenant_limit
        if self._active >= self.limit:
            return False
        return cap is None or ticket.tenant is None or self._tenants.get(ticket.tenant, 0) < cap

    def _eligible_waiting(self) -> bool:
        return any(not w.future.done() and self._free_for(w.ticket) for w in self._heap)

    def _take(self, ticket: Ticket) -> None:
        self._active += 1
        self._holders[ticket.key] = ticket.tenant
        if ticket.tenant is not None:
            self._tenants[ticket.tenant] = self._tenants.get(ticket.tenant, 0) + 1

    def _dispatch(self) -> None:
        """Hand free slots to waiters in order, skipping those whose tenant is at its cap."""
        self._heap = [w for w in self._heap if not w.future.done()]
        heapq.heapify(self._heap)
        for waiter in sorted(self._heap):
            if self._active >= self.limit:
                break
            if self._free_for(waiter.ticket):
                self._take(waiter.ticket)
                waiter.future.set_result(None)
        self._heap = [w for w in self._heap if not w.future.done()]
        heapq.heapify(self._heap)
