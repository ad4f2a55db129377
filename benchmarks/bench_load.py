"""P99 TTFT under load on a real continuous-batching server: llama.cpp's ``llama-server``
(parallel slots, continuous batching, prompt cache) on the packaged SmolLM2 GGUF.

One mixed stream (``builtin:rag`` multi-document QA, ~600 tokens a prompt, and
``builtin:chat`` multi-turn chats with tool calls, ~400; the ``tools:`` traces are left out by
default, ``FULL["tools"]``: their prompts run to 50,000-100,000 tokens, 16,000 slimmed, past
what SmolLM2's slots hold here and hours of prefill at ~100 tokens/s), sent in three configs that take turns in blocks (``loadsim.interleave``), so each
sees the same phases of a shared machine and never the others' queue:

- ``baseline``: the requests as they are, straight to the server;
- ``client``: slimmed by ``Pipeline.default()`` in the client (its slimming time is added to
  its TTFT: it delays the send);
- ``proxy``: the baseline bodies through ``promptslim serve`` (a subprocess), which slims them.

Load: concurrency 1 (the simulator's fit), closed loop at two concurrencies, and open loop at a
rate of ``RATE_LOAD`` times the baseline's measured capacity (one request per concurrency-1
service time: the slots share two cores' prefill throughput), where the baseline's P99 TTFT is
well above its P50 (the JSON says whether it reached 3x). Per config and phase: P50/P95/P99
TTFT on the client clock (first non-empty token), ITL, error and timeout rates, throughput,
prompt tokens sent, the server's own cached-token counts, and the EM of the streamed answers,
paired with the baseline's (bootstrap interval).

Priority: a second stream of short requests (``X-PromptSlim-Priority: interactive``) mixed
with long ones (``batch``), open loop, through two transparent proxies that admit ``ADMIT``
requests at a time: first come first served vs. ``--priority-classes interactive,batch
--shortest-first``, interleaved.

Simulator: fitted from the concurrency-1 requests (llama-server's own prompt timings and the
client's TTFT) and the slot count, it predicts the closed-loop levels' P50/P99; ``sim_error_max``
is the largest relative error.

    python benchmarks/bench_load.py [--quick] [--json] [--save bench_load]

``--quick`` (under two minutes) is a smoke run: few requests, one closed-loop level, short
priority phase; its figures are not the goals'. Servers run on 127.0.0.1, stopped by PID.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit, machine, parser
from load_scenario import Item, Proxy, fit, mixed_stream, predict, quality, ttft_pcts

from promptslim import Pipeline
from promptslim.backends.models import smollm2_gguf_path
from promptslim.loadsim.interleave import Target, run_interleaved
from promptslim.loadsim.llama_server import LlamaServer
from promptslim.loadsim.loadtest import PreparedRequest, RequestRecord, summarise
from promptslim.loadsim.workload import arrival_times

SLOTS = 4
#: what the priority phase's proxies admit at once: below the slots, so the order in which the
#: proxy's queue lets requests go is what decides a short request's wait
ADMIT = 2
#: open-loop arrivals as a share of the baseline's capacity at concurrency 1
RATE_LOAD = 0.9
FULL = {
    "rag": 24,
    "chat": 12,
    "tools": 0,
    "levels": (2, 4, 8),
    "c1": 8,
    "open": 48,
    "priority": 32,
    "time_limit_s": 900.0,
}
QUICK = {
    "rag": 2,
    "chat": 1,
    "tools": 0,
    "levels": (4,),
    "c1": 1,
    "open": 0,
    "priority": 3,
    "time_limit_s": 150.0,
}


#: the server under test, for clearing its slots' prompt caches between blocks
SERVER: dict[str, str] = {}


def erase_slots() -> None:
    """Empty every slot's prompt cache (llama-server, started with ``--slot-save-path``), so
    a block never reuses what another config's block left there."""
    import urllib.request

    for slot in range(SLOTS):
        url = f"{SERVER['base']}/slots/{slot}?action=erase"
        req = urllib.request.Request(url, data=b"{}", method="POST")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30):
            pass


def _phase(targets: dict[str, Target], **load: Any) -> dict[str, dict[str, Any]]:
    return run_interleaved(targets, timeout_s=120.0, before_block=erase_slots, **load)


def _report(run: dict[str, Any], *, with_slim: bool = False) -> dict[str, Any]:
    records: list[RequestRecord] = run["records"]
    s = summarise(records, wall_s=run["client"]["wall_s"])
    ok = [r for r in records if r.status == "ok"]
    return {
        "ttft_s": ttft_pcts(records, with_slim=with_slim),
        "itl_ms": {k: s["itl_ms"].get(k) for k in ("p50", "p99")},
        "error_rate": s["error_rate"],
        "timeout_rate": s["timeout_rate"],
        "completed": s["completed"],
        "requests": s["requests"],
        "request_throughput": s["request_throughput"],
        "prompt_tokens_sent": sum(r.prompt_tokens for r in records if r.sent_clock_s),
        "server_prompt_tokens": sum(r.server_prompt_tokens or 0 for r in ok),
        "server_cached_tokens": sum(r.server_cached_tokens or 0 for r in ok),
        "cut": run["cut"],
    }


def ab_phase(items: list[Item], proxy: Proxy, server: str, **load: Any) -> dict[str, Any]:
    base = [i.baseline for i in items]
    runs = _phase(
        {
            "baseline": Target(server, base),
            "client": Target(server, [i.slimmed for i in items]),
            "proxy": Target(proxy.url, [i.proxied for i in items]),
        },
        **load,
    )
    out = {k: _report(v, with_slim=k == "client") for k, v in runs.items()}
    for k in ("client", "proxy"):
        out[k]["quality"] = quality(items, runs["baseline"]["records"], runs[k]["records"])
    out["_records"] = runs
    return out


def priority_phase(items: list[Item], server: str, *, n: int, rate: float) -> dict[str, Any]:
    """Short requests (interactive: slimmed RAG prompts, ~110 tokens) among long ones (batch:
    whole RAG prompts and chats, 400-600), FIFO vs priority proxies."""
    rag = [i for i in items if i.kind == "rag"] or items[:1]
    shorts = [i.slimmed for i in rag]
    longs = [i.baseline for i in items]
    stream: list[PreparedRequest] = []
    kinds: list[str] = []
    for k in range(n):  # one short for every two long
        short = k % 3 == 2
        pool = shorts if short else longs
        stream.append(pool[k % len(pool)])
        kinds.append("short" if short else "long")
    fifo = Proxy(server, "--no-pipeline", "--max-concurrency", str(ADMIT))
    prio = Proxy(
        server,
        "--no-pipeline",
        "--max-concurrency",
        str(ADMIT),
        "--priority-classes",
        "interactive,batch",
        "--shortest-first",
    )
    try:
        fifo.wait(), prio.wait()
        heads = [
            {"X-PromptSlim-Priority": "interactive" if k == "short" else "batch"} for k in kinds
        ]
        runs = {}
        for label, proxy in (("fifo", fifo), ("priority", prio)):
            erase_slots()  # the second run must not be served from the first one's cache
            runs[label] = _tagged(proxy.url, stream, heads, rate=rate)
    finally:
        fifo.stop(), prio.stop()
    out: dict[str, Any] = {}
    for label, records in runs.items():
        out[label] = {
            kind: ttft_pcts([r for r, k in zip(records, kinds, strict=True) if k == kind])
            for kind in ("short", "long")
        }
        out[label]["error_rate"] = sum(r.status == "error" for r in records) / len(records)
    return out


def _tagged(
    url: str, stream: list[PreparedRequest], heads: list[dict[str, str]], *, rate: float
) -> list[RequestRecord]:
    """An open-loop stream whose requests carry their own headers: one config, its own run
    (the priority proxies differ only in admission, so they are compared on the same stream)."""
    import asyncio

    from promptslim.loadsim.loadtest import run_stream

    async def one() -> list[RequestRecord]:
        times = arrival_times(len(stream), rate=rate, burstiness=1.0, seed=1)
        tasks = []
        for i, (req, head) in enumerate(zip(stream, heads, strict=True)):
            tasks.append(
                asyncio.create_task(
                    _after(
                        times[i],
                        run_stream(url, [req], concurrency=1, timeout_s=180.0, headers=head),
                    )
                )
            )
        got = await asyncio.gather(*tasks)
        records = [g[0][0] for g in got]
        for i, r in enumerate(records):
            r.index = i
        return records

    return asyncio.run(one())


async def _after(delay_s: float, work: Any) -> Any:
    import asyncio

    await asyncio.sleep(delay_s)
    return await work


def _ratio(a: dict[str, float], b: dict[str, float], q: str = "p99") -> float | None:
    return a[q] / b[q] if a.get(q) and b.get(q) else None


def run(quick: bool) -> dict[str, Any]:
    plan = QUICK if quick else FULL
    pipeline = Pipeline.default()
    import tempfile

    slots_dir = tempfile.TemporaryDirectory(prefix="promptslim-slots-")
    ctx = 8192 if quick else 16384
    # --slot-save-path enables the slots' erase action; --cache-ram 0 turns off the server's
    # host-memory prompt cache, which erasing the slots does not empty (a quick run's second
    # priority run got its 600-token prompts in 0.05 s from it)
    extra = ("--slot-save-path", slots_dir.name, "--cache-ram", "0")
    with (
        slots_dir,
        LlamaServer(smollm2_gguf_path(), parallel=SLOTS, ctx=ctx, extra_args=extra) as srv,
    ):
        SERVER["base"] = srv.base_url.removesuffix("/v1")
        proxy = Proxy(srv.base_url)  # warms its pipeline while the stream is prepared
        items = mixed_stream(
            rag=plan["rag"],
            chat=plan["chat"],
            tools=plan["tools"],
            max_tokens=16,
            pipeline=pipeline,
        )
        proxy.wait()
        try:
            return _phases(items, proxy, srv.base_url, plan)
        finally:
            proxy.stop()


def _phases(items: list[Item], proxy: Proxy, server: str, plan: dict[str, Any]) -> dict[str, Any]:
    limit = plan["time_limit_s"]
    c1 = [i.baseline for i in items][: plan["c1"]]
    # not counted: the first request pages the model in
    _phase({"warm": Target(server, [items[-1].slimmed])}, concurrency=1, time_limit_s=limit)
    first = _phase({"baseline": Target(server, c1)}, concurrency=1, time_limit_s=limit)
    done = [r for r in first["baseline"]["records"] if r.status == "ok" and r.e2e_s]
    if not done:  # the machine is too slow for even one request in the limit: say so, stop
        raise SystemExit("bench_load: no concurrency-1 request completed within the time limit")
    the_fit = fit(done)
    service = statistics.median(r.e2e_s or 0.0 for r in done)
    out: dict[str, Any] = {"fit": the_fit.as_dict(), "closed": {}, "simulator": {}}
    for c in plan["levels"]:
        phase = ab_phase(items, proxy, server, concurrency=c, block=2 * c, time_limit_s=limit)
        records = phase.pop("_records")["baseline"]["records"]
        out["closed"][str(c)] = phase
        measured = phase["baseline"]["ttft_s"]
        sim = predict(records, the_fit, concurrency=c, slots=SLOTS)
        out["simulator"][str(c)] = {
            "measured": measured,
            "predicted": sim,
            "completed": phase["baseline"]["completed"],  # of the stream simulated
        }
    # on two cores the slots share the same prefill throughput: batching adds little capacity
    # to a CPU-bound prefill, so the server's capacity is about one request per service time
    rate = RATE_LOAD / service
    if plan["open"]:
        n = plan["open"]
        stream = (items * (n // len(items) + 1))[:n]
        phase = ab_phase(
            stream,
            proxy,
            server,
            arrivals=arrival_times(n, rate=rate, seed=0),
            concurrency=None,
            block=max(4, n // 2),
            time_limit_s=limit,
        )
        phase.pop("_records")
        out["open"] = {"rate": rate, **phase}
    out["priority"] = priority_phase(items, server, n=plan["priority"], rate=rate)
    return out


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """The contract's keys, from the most loaded phase run."""
    phase = result.get("open") or result["closed"][max(result["closed"], key=int)]
    base = phase["baseline"]["ttft_s"]
    sim_err = [
        abs(v["predicted"][q] - v["measured"][q]) / v["measured"][q]
        for v in result["simulator"].values()
        for q in ("p50", "p99")
        if v["measured"].get(q)
    ]
    prio = result["priority"]
    return {
        "p99_ttft_ratio_client": _ratio(base, phase["client"]["ttft_s"]),
        "p99_ttft_ratio_proxy": _ratio(base, phase["proxy"]["ttft_s"]),
        "baseline_p99_over_p50": base["p99"] / base["p50"] if base.get("p50") else None,
        "error_rate": {k: phase[k]["error_rate"] for k in ("baseline", "client", "proxy")},
        "quality_delta": {k: phase[k]["quality"]["quality_delta"] for k in ("client", "proxy")},
        "completed_share": min(
            phase[k]["completed"] / phase[k]["requests"] for k in ("baseline", "client", "proxy")
        ),
        "short_p99_ratio_priority": _ratio(prio["fifo"]["short"], prio["priority"]["short"]),
        "long_p99_ratio_priority": _ratio(prio["priority"]["long"], prio["fifo"]["long"]),
        "sim_error_max": max(sim_err) if sim_err else None,
    }


def table(result: dict[str, Any]) -> str:
    rows = [
        "| phase | config | TTFT p50 s | p95 | p99 | errors | done | prompt tok | cached |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    phases = {f"closed c={c}": p for c, p in result["closed"].items()}
    if "open" in result:
        phases[f"open {result['open']['rate']:.2f}/s"] = result["open"]
    for name, phase in phases.items():
        for k in ("baseline", "client", "proxy"):
            p, t = phase[k], phase[k]["ttft_s"]
            rows.append(
                f"| {name} | {k} | {t.get('p50', 0):.2f} | {t.get('p95', 0):.2f} | "
                f"{t.get('p99', 0):.2f} | {p['error_rate']:.0%} | {p['completed']}/{p['requests']}"
                f" | {p['prompt_tokens_sent']} | {p['server_cached_tokens']} |"
            )
    head = result["headline"]
    rows += ["", *(f"- {k}: {v}" for k, v in head.items())]
    return "\n".join(rows)


def main() -> None:
    p: argparse.ArgumentParser = parser(__doc__.split("\n\n")[0])
    args = p.parse_args()
    start = time.monotonic()
    result = run(args.quick)
    result["headline"] = headline(result)
    result.update(result["headline"])
    result["quick"] = args.quick
    result["machine"] = machine()
    result["seconds"] = time.monotonic() - start
    emit(result, args, table(result))


if __name__ == "__main__":
    main()
