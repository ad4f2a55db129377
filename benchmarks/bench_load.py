"""P99 TTFT under load on a real continuous-batching server: llama.cpp's ``llama-server``
(parallel slots, continuous batching, prompt cache) on the packaged SmolLM2 GGUF.

One mixed stream (``builtin:rag`` multi-document QA, ~600 tokens a prompt, and
``builtin:chat`` multi-turn chats with tool calls, ~400; the ``tools:`` traces are left out by
default, ``FULL["tools"]``: their prompts run to 50,000-100,000 tokens, 16,000 slimmed, past
what SmolLM2's slots hold here and hours of prefill at ~100-300 tokens/s), sent in three
configs that take turns in blocks (``loadsim.interleave``), so each sees the same phases of a
shared machine and never the others' queue:

- ``baseline``: the requests as they are, straight to the server;
- ``client``: slimmed by ``Pipeline.default()`` in the client (its slimming time is added to
  its TTFT: it delays the send);
- ``proxy``: the baseline bodies through ``promptslim serve`` (a subprocess), which slims them;
  it admits as many requests as the server has slots (``--max-concurrency`` = ``-np``), as its
  README says to, so requests beyond them wait in the proxy.

Phases (``FULL``): concurrency 1 (8 requests: the simulator's fit), closed loop at 2 (baseline
only), 4 and 8 (all three configs) over 24 requests each, open loop over 36 requests, and the
priority phase over 36. Per config and phase: P50/P95/P99 TTFT on the client clock (first
non-empty token), ITL, error and timeout rates, throughput, prompt tokens sent, the server's
own cached-token counts, and the EM of the streamed answers, paired with the baseline's
(bootstrap interval).

Open loop: bursty arrivals (gamma gaps of shape ``BURSTINESS``) at a rate chosen, not fixed:
the capacity is measured in the closed loop at the highest concurrency (``load_model.speed``
carries the simulator's rates over to the machine's speed then), and the load is the lowest
of ``LOADS`` at which the fitted simulator, on this very stream and these arrivals, puts the
baseline's P99 TTFT at ``TARGET_TAIL`` times its P50 or more (else the closest). The JSON
says what was predicted and whether the measured tail reached 3x.

Priority (``load_priority``): short requests among long ones, open loop at 1.3 times the
mix's capacity (a burst past it: the proxy's queue fills), through two proxies admitting
``SLOTS`` at a time, as many as the server has slots: first come first served vs.
``--priority-classes interactive,batch`` with the batch tenant capped at half the slots
(``--tenant-max-concurrency``), interleaved.

Simulator: fitted from the concurrency-1 requests (llama-server's own prompt timings and the
client's TTFT) and the slot count and batch size, it predicts the baseline's P50/P99 at the
three closed-loop levels (``sim_error_max``: the largest relative error). Each closed-loop
block's clients start ``STAGGER_S`` apart, and the simulator is given that gap and the
clients' turnaround between requests (``load_model.turnaround``): llama-server starts a step
as soon as a prompt is queued, so whether two prompts share a step is decided by who arrives
before that step starts.

Sizes: about 10-15 minutes on two quiet cores (SmolLM2 Q4_1 prefill ~300 tokens/s there,
~100 when other jobs share the cores, and llama.cpp's threads slow down far more than that
when the cores are oversubscribed; the open loop is arrival-bound, 36 requests at roughly
0.5/s for each config, the longest phase). Each phase has a time limit, shared by its
configs; what it cuts is reported per config (``cut``) and lowers ``completed_share``.
llama-server closes its connections after each streamed answer while advertising keep-alive;
a request sent on one as it closes is sent again once by the client (``retried``, as the
OpenAI SDK does); every failure's message is in its config's ``errors``. A P99
of 24-36 requests is the interpolation between the two largest TTFTs: a tail figure the
configs are compared on, not a stable 99th percentile, which would need hundreds of requests
a phase and hours on this machine. 24 items per closed level, 36 open: the most that fit.

    python benchmarks/bench_load.py [--quick] [--json] [--save bench_load]

A full run writes its plot to ``results/bench_load.png``. ``--quick`` (under two minutes) is a
smoke run: few requests, one closed-loop level, a short open loop and priority phase; its
figures are not the goals'. Servers run on 127.0.0.1, stopped by PID.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, emit, machine, parser
from load_model import (
    capacity,
    choose_rate,
    fit,
    predict_closed,
    sim_requests,
    speed,
    turnaround,
)
from load_priority import PRIORITY_LOAD, priority_phase, priority_stream
from load_report import headline, plot, table
from load_scenario import Item, Proxy, mixed_stream, quality, ttft_pcts

from promptslim import Pipeline
from promptslim.backends.models import smollm2_gguf_path
from promptslim.loadsim.interleave import Target, run_interleaved
from promptslim.loadsim.llama_server import LlamaServer
from promptslim.loadsim.loadtest import RequestRecord, summarise
from promptslim.loadsim.workload import arrival_times

SLOTS = 4
MAX_TOKENS = 16
#: closed loop: each block's clients start this far apart. llama-server starts a step as soon
#: as one prompt is queued, so two prompts sent at the same instant share the first step or
#: run one after another depending on a race inside it (which way it goes changes from run to
#: run and machine to machine, and with it the median TTFT at concurrency 2, by up to 2x); a
#: gap far above that race and far below a prefill settles it, and the simulator is given it
STAGGER_S = 0.05
FULL: dict[str, Any] = {
    "rag": 24,
    "chat": 12,
    "tools": 0,
    "c1": 8,
    "closed": 24,  # requests per closed-loop level
    "sim_levels": (2, 4, 8),  # the simulator predicts these (baseline)
    "ab_levels": (4, 8),  # and these run all three configs
    "open": 36,
    "priority": 36,
    "phase_limit_s": {"closed": 300.0, "open": 480.0, "priority": 360.0},
}
QUICK: dict[str, Any] = {
    "rag": 2,
    "chat": 1,
    "tools": 0,
    "c1": 1,
    "closed": 3,
    "sim_levels": (4,),
    "ab_levels": (4,),
    "open": 2,
    "priority": 4,
    "phase_limit_s": {"closed": 120.0, "open": 120.0, "priority": 120.0},
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
    return run_interleaved(targets, timeout_s=300.0, before_block=erase_slots, **load)


def _report(run: dict[str, Any], *, with_slim: bool = False) -> dict[str, Any]:
    records: list[RequestRecord] = run["records"]
    s = summarise(records, wall_s=run["client"]["wall_s"])
    ok = [r for r in records if r.status == "ok"]
    return {
        "ttft_s": ttft_pcts(records, with_slim=with_slim),
        "itl_ms": {k: s["itl_ms"].get(k) for k in ("p50", "p99")},
        "error_rate": s["error_rate"],
        "timeout_rate": s["timeout_rate"],
        # why requests failed, so that a config's missing completions explain themselves
        "errors": sorted(
            {r.error for r in records if r.status in ("error", "timeout") and r.error}
        ),
        "retried": s["retried"],
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


def run(quick: bool) -> dict[str, Any]:
    plan = QUICK if quick else FULL
    pipeline = Pipeline.default()
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
        # the proxy admits what the server has slots for: beyond them requests wait in it
        limits = ("--max-concurrency", str(SLOTS), "--queue-timeout", "600", "--timeout", "300")
        proxy = Proxy(srv.base_url, *limits)  # warms its pipeline while the stream is prepared
        n = max(plan["open"], plan["closed"])
        items = mixed_stream(
            rag=math.ceil(n * 2 / 3), chat=n - math.ceil(n * 2 / 3), tools=plan["tools"],
            max_tokens=MAX_TOKENS, pipeline=pipeline,
        )  # fmt: skip
        proxy.wait()
        try:
            return _phases(items, proxy, srv.base_url, plan)
        finally:
            proxy.stop()


def _closed(
    items: list[Item], proxy: Proxy, server: str, plan: dict[str, Any], the_fit: Any,
    think_s: float,
) -> tuple[dict[str, Any], dict[str, Any], float]:  # fmt: skip
    """The closed-loop levels, the simulator's predictions for them, and ``speed``."""
    closed: dict[str, Any] = {}
    simulator: dict[str, Any] = {}
    limit = plan["phase_limit_s"]["closed"]
    stream = items[: plan["closed"]]
    factor = 1.0
    for c in sorted(set(plan["sim_levels"]) | set(plan["ab_levels"])):
        load = {"concurrency": c, "block": 2 * c, "time_limit_s": limit, "stagger_s": STAGGER_S}
        if c in plan["ab_levels"]:
            phase = ab_phase(stream, proxy, server, **load)
            base_run = phase.pop("_records")["baseline"]
            closed[str(c)] = phase
        else:  # the simulator's level alone: the baseline
            base_run = _phase({"baseline": Target(server, [i.baseline for i in stream])}, **load)
            base_run = base_run["baseline"]
        measured = _report(base_run)
        records = base_run["records"]
        sim_args = {
            "concurrency": c, "slots": SLOTS, "block": 2 * c, "stagger_s": STAGGER_S,
            "think_s": think_s,
        }  # fmt: skip
        if c in plan["sim_levels"]:
            simulator[str(c)] = {
                "measured": measured["ttft_s"],
                "predicted": predict_closed(records, the_fit, **sim_args),
                "completed": measured["completed"],  # of the stream simulated
            }
        factor = speed(records, measured["request_throughput"], the_fit, **sim_args)
    return closed, simulator, factor  # speed: at the highest level, the last one run


def _phases(items: list[Item], proxy: Proxy, server: str, plan: dict[str, Any]) -> dict[str, Any]:
    limits = plan["phase_limit_s"]
    c1 = [i.baseline for i in items][: plan["c1"]]
    # not counted: the first request pages the model in
    _phase({"warm": Target(server, [items[-1].slimmed])}, concurrency=1, time_limit_s=60.0)
    first = _phase({"baseline": Target(server, c1)}, concurrency=1, time_limit_s=limits["closed"])
    done = [r for r in first["baseline"]["records"] if r.status == "ok" and r.e2e_s]
    if not done:  # the machine is too slow for even one request in the limit: say so, stop
        raise SystemExit("bench_load: no concurrency-1 request completed within the time limit")
    the_fit = fit(done)
    think_s = turnaround(done)
    out: dict[str, Any] = {"fit": {**the_fit.as_dict(), "turnaround_s": think_s}}
    out["closed"], out["simulator"], factor = _closed(items, proxy, server, plan, the_fit, think_s)
    out["speed"] = factor
    n = plan["open"]
    if n:
        out["open"] = open_phase(items[:n], proxy, server, the_fit, factor, limits["open"])
    m = plan["priority"]
    stream, _ = priority_stream(items, m)
    reqs = sim_requests([r.prompt_tokens for r in stream], [MAX_TOKENS] * m, the_fit)
    rate = PRIORITY_LOAD * capacity(reqs, the_fit, slots=SLOTS) * factor
    out["priority"] = priority_phase(
        items, server, n=m, rate=rate, slots=SLOTS, before_block=erase_slots,
        time_limit_s=limits["priority"],
    )  # fmt: skip
    return out


def open_phase(
    items: list[Item], proxy: Proxy, server: str, the_fit: Any, factor: float, limit: float
) -> dict[str, Any]:
    """The three configs open loop, at the rate ``choose_rate`` picks for the baseline."""
    n = len(items)
    block = max(2, math.ceil(n / 2))
    reqs = sim_requests([i.baseline.prompt_tokens for i in items], [MAX_TOKENS] * n, the_fit)
    chosen = choose_rate(reqs, the_fit, slots=SLOTS, block=block, speed_factor=factor)
    arrivals = arrival_times(n, rate=chosen["rate"], burstiness=chosen["burstiness"], seed=0)
    phase = ab_phase(
        items, proxy, server, arrivals=arrivals, concurrency=None, block=block,
        time_limit_s=limit,
    )  # fmt: skip
    phase.pop("_records")
    return {**chosen, "block": block, **phase}


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
    if not args.quick:  # a smoke run's figures never replace the full run's plot
        result["plot"] = str(plot(result, RESULTS / "bench_load.png").relative_to(RESULTS.parent))
    emit(result, args, table(result))


if __name__ == "__main__":
    main()
