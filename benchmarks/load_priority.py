"""bench_load's priority phase: short requests among long ones, through ``promptslim serve``
configured as a user would put it in front of llama-server, first come first served vs.
priority classes, interleaved on the same stream.

Both proxies admit as many requests as the server has slots (``--max-concurrency`` = its
``-np``): the waiting then happens in the proxy, where a class can reorder it. (With a larger
limit every request goes straight on and waits in llama-server's own first-come queue, where
nothing can reorder it; and a stream that never fills the limit has nothing to reorder: an
earlier version's quick run sent three requests, the one short one last, and measured no
effect.) The short requests come from one tenant and class (``X-PromptSlim-Tenant: chat-app``,
``X-PromptSlim-Priority: interactive``), the long ones from another (``batch-jobs``,
``batch``). The priority proxy adds ``--priority-classes interactive,batch`` (a freed slot goes
to a waiting short request first) and ``--tenant-max-concurrency`` at half the slots (the
batch jobs never hold every slot, so a short request that arrives finds one free instead of
waiting for a long one to end, and shares a server step with at most two long prefills; on
two CPU cores two long requests in flight keep the server as busy as four). Why both: in a
model of llama-server's steps (slots filled in turn up to its 2,048-token batch) behind a
proxy's queue, on this stream at 1.3x capacity and three arrival draws, first come first
served put the short requests' P99 at 10-11 s; classes alone at 3-7 s (two draws under 2x
better: a short request still shares its step with up to three long prefills); classes and
the cap at half the slots at 4.0-4.5 s (2.3-2.6x), the long requests' P99 at most 3 % above
first come first served.

``--shortest-first`` is left off: within a class it puts 400-token chats before 600-token RAG
prompts, which lengthens the longest requests' tail (the goal bounds it at 1.2x), and the
short requests here are of one size, so it would not help them. Both proxies forward bodies
unchanged (``--no-pipeline``): admission alone is measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from load_scenario import Item, Proxy, ttft_pcts

from promptslim.loadsim.interleave import Target, run_interleaved
from promptslim.loadsim.loadtest import PreparedRequest
from promptslim.loadsim.workload import arrival_times

SHORT_CLASS, LONG_CLASS = "interactive", "batch"
#: the priority stream's arrivals as a share of its capacity: a burst past it, the case that
#: priority is for. At 1.0 the fitted simulator has at most 4-5 requests waiting beyond the 4
#: slots in a block of 18 arrivals, so there is little to reorder; at 1.3, 6-8 (first come,
#: first served: short requests' P99 TTFT 10-13 s there, against a few seconds once they go
#: next), while the long requests wait for the short ones' work too, about an eighth of it
PRIORITY_LOAD = 1.3


def priority_stream(items: Sequence[Item], n: int) -> tuple[list[PreparedRequest], list[str]]:
    """One short request (a slimmed RAG prompt, ~110 tokens, class interactive) for every two
    long ones (whole RAG prompts and chats, 400-620 tokens, class batch), and their kinds."""
    rag = [i for i in items if i.kind == "rag"] or list(items[:1])
    stream: list[PreparedRequest] = []
    kinds: list[str] = []
    shorts = longs = 0
    for k in range(n):
        if k % 3 == 2:
            req, klass = rag[shorts % len(rag)].slimmed, SHORT_CLASS
            shorts += 1
        else:
            req, klass = items[longs % len(items)].baseline, LONG_CLASS
            longs += 1
        tenant = "chat-app" if klass == SHORT_CLASS else "batch-jobs"
        headers = {"X-PromptSlim-Priority": klass, "X-PromptSlim-Tenant": tenant}
        stream.append(PreparedRequest(req.body, req.prompt_tokens, req.slim_s, headers))
        kinds.append("short" if klass == SHORT_CLASS else "long")
    return stream, kinds


def _proxies(server: str, slots: int) -> dict[str, Proxy]:
    common = ("--no-pipeline", "--max-concurrency", str(slots), "--queue-timeout", "600",
              "--timeout", "300")  # fmt: skip
    ordered = ("--priority-classes", f"{SHORT_CLASS},{LONG_CLASS}",
               "--tenant-max-concurrency", str(max(1, slots // 2)))  # fmt: skip
    return {"fifo": Proxy(server, *common), "priority": Proxy(server, *common, *ordered)}


def priority_phase(
    items: Sequence[Item], server: str, *, n: int, rate: float, slots: int,
    before_block: Callable[[], None], time_limit_s: float,
) -> dict[str, Any]:  # fmt: skip
    """P50/P95/P99 TTFT of the short and the long requests through each proxy, their error
    rates and what the time limit cut; the two proxies take turns in blocks of half the
    stream (F1 P1 F2 P2), the same arrivals (Poisson, ``rate``) in each."""
    stream, kinds = priority_stream(items, n)
    proxies = _proxies(server, slots)
    try:
        targets = {label: Target(p.wait().url, stream) for label, p in proxies.items()}
        runs = run_interleaved(
            targets, arrivals=arrival_times(n, rate=rate, seed=1), timeout_s=600.0,
            time_limit_s=time_limit_s, block=math.ceil(n / 2), before_block=before_block,
        )  # fmt: skip
    finally:
        for p in proxies.values():
            p.stop()
    out: dict[str, Any] = {"rate": rate, "requests": n, "short": kinds.count("short")}
    for label, run in runs.items():
        records = run["records"]
        out[label] = {
            kind: ttft_pcts([r for r, k in zip(records, kinds, strict=True) if k == kind])
            for kind in ("short", "long")
        }
        out[label]["error_rate"] = sum(r.status in ("error", "timeout") for r in records) / n
        out[label]["completed"] = sum(r.status == "ok" for r in records)
        out[label]["cut"] = run["cut"]
    return out
