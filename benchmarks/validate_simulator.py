"""Validate the loadsim simulator against a real server.

Starts llama-cpp-python on 127.0.0.1 with the packaged SmolLM2 GGUF (it serves one request at
a time, logging its own per-request timings), then, in one run:

1. one warm-up request (not counted: the first request pages the model in);
2. concurrency 1: ``requests`` closed-loop requests of ~1,000-token prompts, ``max_tokens`` 4;
   the cost model is fitted from these alone (``loadsim.fit_single_stream``): per-token prefill
   from the server's own prompt-eval timings, the fixed overhead as the client's TTFT beyond
   them, the per-token decode cost as the client's TPOT (median each);
3. concurrency 2, 4 and 8: the same kind of stream through ``promptslim loadtest`` (the library
   call); each is simulated (batch size 1, no chunking, no prefix cache: every prompt starts
   with a unique line, so llama.cpp's prefix reuse cannot hit either) with the output lengths
   the server actually produced, and compared on TTFT P50 and P99;
4. after each of those levels, a calibration round of ``calibration`` requests at concurrency 1.

A fit is the cost curve (``loadsim.fit_single_stream``) and the spread of the service cost
around it: each concurrency-1 request's prefill time per token over their median. A prediction
is the mean P50 and P99 over ``REPLICAS`` simulations of the level's stream, each request's
``SimRequest.cost_scale`` drawn from that spread; with N requests a P99 is the tail of the
service times as much as of the queue, which the curve alone (every request at its median)
cannot produce, even at concurrency 1 (the curve-only figures are kept in the JSON).

Each level is simulated with two fits, both from concurrency-1 requests only (never from the
level's own measurements):

- the *first fit*: the concurrency-1 level of step 2, run minutes before the later levels;
- the *bracketing fit*: the last ``calibration`` requests at concurrency 1 before the level and
  the ``calibration`` requests right after it, pooled. On a shared CPU the server's speed drifts
  by a quarter within minutes (measured here: the same server ran concurrency 4 at 0.76x the
  per-token cost of concurrency 1 in one run and 1.1x in another), which no fit made minutes
  earlier can know; a calibration that brackets the level in time is how a drifting instrument
  is measured. The simulator's queueing is what is being validated, so the goal is judged on the
  bracketing fit (and on level 1, the first fit's own data); the first fit's errors stay in the
  table beside it.

Percentiles are numpy's linear interpolation between order statistics, for measured and
simulated alike over the same N requests. With N requests P99 sits at rank 0.99 (N-1): for
N <= 100 it lies between the two largest TTFTs, so it is the tail of this run, not a stable
population P99.

The CPU here may be shared, and a prefill's speed then drifts. Each level also reports the
server's own prefill time per token relative to concurrency 1 (``speed_vs_c1``) and the error a
simulation with that level's own server timings would have (``rel_error_level_costs``): a
diagnostic that separates drift of the machine from error of the queueing model.

``--quick`` is a smoke run (250-token prompts, 6 requests a level, 3 calibration requests):
about two minutes, not a validation.

    python benchmarks/validate_simulator.py [--quick] [--json] [--save validate_simulator]

The server is stopped by its PID. Only 127.0.0.1 is used. The whole run is bounded
(``--budget-s``: no level starts after it).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import RESULTS, LlamaServer, emit, machine, parser
from summary import goal
from validate_measure import Level, Prompts, loadtest_records
from validate_predict import detail, fit_rounds, p50_p99, predict, rel_error, simulate, spread_of

from promptslim.loadsim import CostModel, SingleStreamFit

GOAL = goal("validate_simulator", "max_abs_rel_error_bracketing").target
CONCURRENCIES = (1, 2, 4, 8)
PROMPT_TOKENS = 1000
#: a few output tokens: the decode cost is fitted and queued behind, a level stays short
MAX_TOKENS = 4
#: closed-loop requests per level (at least the concurrency): full run / --quick
REQUESTS = 16
QUICK_REQUESTS = 6
#: concurrency-1 requests after each higher level (the bracketing fit's calibration rounds)
CALIBRATION_REQUESTS = 6
QUICK_CALIBRATION_REQUESTS = 3
#: --quick's prompts: a smoke run in under two minutes, not a validation
QUICK_PROMPT_TOKENS = 250

#: the names the tests read (the percentiles a level reports)
_p = p50_p99


# ---------------------------------------------------------------- the run


def _fit_summary(f: SingleStreamFit, spread: list[float], first: Level) -> dict[str, Any]:
    """The first fit as the result records it, with the service-cost spread and the server's
    own decode time per token."""
    return {
        **f.as_dict(),
        "service_cost_spread": sorted(round(k, 4) for k in spread),
        "server_decode_s_per_token": (
            statistics.median(
                t.decode_s / t.decode_tokens for t in first.paired if t.decode_tokens
            )
            if first.paired
            else None
        ),
    }


def _bracketing(
    records: list[dict[str, Any]], c: int, bracket: tuple[SingleStreamFit, list[float]],
    measured: dict[str, float],
) -> dict[str, Any]:  # fmt: skip
    """The concurrency-1 rounds just before and after a level, pooled: a prediction from
    concurrency-1 measurements taken when the machine ran at the speed it ran this level at
    (the first fit cannot know a later drift)."""
    b_fit, b_spread = bracket
    b_sim = predict(
        records,
        b_fit.cost,
        concurrency=c,
        template_tokens=b_fit.template_tokens,
        spread=b_spread,
    )
    return {
        "cost_model": b_fit.as_dict()["cost_model"],
        "requests": b_fit.requests,
        "simulated": b_sim,
        "rel_error": rel_error(b_sim, measured),
    }


def _level_row(
    lv: Level, c: int, cost: CostModel, template: float, spread: list[float],
    bracket: tuple[SingleStreamFit, list[float]] | None, c1_per_token: float | None,
) -> dict[str, Any]:  # fmt: skip
    """One level's measured TTFT beside the simulator's predictions: from the first fit, from
    the concurrency-1 rounds bracketing it, and with the costs rescaled to the level's speed."""
    records = lv.records
    measured = p50_p99([r["ttft_s"] for r in records])
    # the curve alone, per request (for the detail below), and the prediction
    simulated_all = simulate(records, cost, concurrency=c, template_tokens=template)
    simulated = predict(records, cost, concurrency=c, template_tokens=template, spread=spread)
    per_token = lv.per_token()
    row: dict[str, Any] = {
        "requests": len(records),
        "level_wall_s": lv.wall_s,
        "measured": measured,
        "simulated": simulated,
        "rel_error": rel_error(simulated, measured),
        "simulated_curve_only": p50_p99(simulated_all),
        "prompt_tokens_mean": statistics.fmean(r["prompt_tokens"] for r in records),
        "output_tokens_mean": statistics.fmean(r["output_tokens"] for r in records),
        "server_prefill_ms_per_token": per_token * 1000 if per_token else None,
        # per request, in send order: when it was sent (from the level's first send),
        # measured and simulated TTFT (the curve alone); the server's order shows in
        # the send + TTFT sums
        "requests_detail": detail(records, simulated_all),
        "speed_vs_c1": None,
        "rel_error_level_costs": None,
        "bracketing_fit": None,
    }
    if bracket is not None:
        row["bracketing_fit"] = _bracketing(records, c, bracket, measured)
    if per_token and c1_per_token:
        # the machine's speed now vs at the fit: rescale the whole model by it
        scale = per_token / c1_per_token
        level_cost = CostModel(**{k: v * scale for k, v in cost.as_dict().items()})
        level_sim = predict(
            records, level_cost, concurrency=c, template_tokens=template, spread=spread
        )
        row["speed_vs_c1"] = scale
        row["rel_error_level_costs"] = rel_error(level_sim, measured)
    return row


def validate(
    *,
    requests: int,
    prompt_tokens: int,
    max_tokens: int,
    budget_s: float,
    threads: int | None,
    calibration: int = CALIBRATION_REQUESTS,
    concurrencies: tuple[int, ...] = CONCURRENCIES,
    partial: Any = None,
) -> dict[str, Any]:
    """``partial(result)`` is called after each level (a bounded run still leaves what it
    measured). After each level above 1 a calibration round of ``calibration`` requests runs
    at concurrency 1; with 0 there are none and only the first fit is reported."""
    started = time.monotonic()
    server = LlamaServer("--verbose", "True", threads=threads)
    rows: dict[str, Any] = {}
    fit: dict[str, Any] = {}
    try:
        prompts = Prompts(server.base)
        loadtest_records(
            server.base, [prompts.make(prompt_tokens, max_tokens=2)], concurrency=1, max_tokens=2
        )  # warm-up, not counted

        def level(n: int, c: int) -> Level:
            return Level(
                server, prompts, n=n, concurrency=c, prompt_tokens=prompt_tokens,
                max_tokens=max_tokens,
            )  # fmt: skip

        first = level(requests, 1)
        f = fit_rounds([(first.records, first.paired)])
        cost, template = f.cost, f.template_tokens
        spread = spread_of([(first.records, first.paired)])
        fit = _fit_summary(f, spread, first)
        print(f"fit: {json.dumps(fit)}", file=sys.stderr, flush=True)
        c1_per_token = first.per_token()
        before = first  # the concurrency-1 round that ran just before the next level
        for c in concurrencies:
            if c == 1:
                lv, bracket = first, None
            else:
                if time.monotonic() - started > budget_s:
                    print(f"budget of {budget_s:.0f} s spent: no level {c}", file=sys.stderr)
                    break
                lv = level(max(requests, c), c)
                after = level(calibration, 1) if calibration else None
                rounds = [before.tail(calibration), after.tail(calibration)] if after else []
                bracket = (fit_rounds(rounds), spread_of(rounds)) if after else None
                before = after or before
            row = _level_row(lv, c, cost, template, spread, bracket, c1_per_token)
            rows[str(c)] = row
            print(f"concurrency {c}: {json.dumps(row)}", file=sys.stderr, flush=True)
            if partial is not None:
                partial(
                    _result(server.cmd, fit, rows, started, requests, prompt_tokens, max_tokens)
                )
    finally:
        server.stop()
    return _result(server.cmd, fit, rows, started, requests, prompt_tokens, max_tokens)


def _result(
    cmd: list[str],
    fit: dict[str, Any],
    rows: dict[str, Any],
    started: float,
    requests: int,
    prompt_tokens: int,
    max_tokens: int,
) -> dict[str, Any]:
    def worst(errors: list[dict[str, float]]) -> float | None:
        return max((abs(e) for err in errors for e in err.values()), default=None)

    # level 1 is the fit's own data (its P99 still has to match): both are reported
    worst_all = worst([row["rel_error"] for row in rows.values()])
    worst_predicted = worst([row["rel_error"] for c, row in rows.items() if c != "1"])
    bracketed = [row["bracketing_fit"] for c, row in rows.items() if c != "1"]
    worst_bracketing = (
        worst([rows["1"]["rel_error"], *(b["rel_error"] for b in bracketed)])
        if bracketed and all(bracketed) and "1" in rows
        else None
    )
    # judged on the bracketing fit when the run has one (see the module docstring)
    judged = worst_bracketing if worst_bracketing is not None else worst_all
    return {
        "benchmark": "validate_simulator",
        "machine": machine(),
        "server": " ".join(Path(cmd[0]).name if i == 0 else a for i, a in enumerate(cmd)),
        "prompt_tokens": prompt_tokens,
        "max_tokens": max_tokens,
        "requests_per_level": requests,
        "fit": fit,
        "by_concurrency": rows,
        "concurrencies_not_run": [c for c in CONCURRENCIES if str(c) not in rows],
        "max_abs_rel_error": worst_all,
        "max_abs_rel_error_c2_to_c8": worst_predicted,
        "max_abs_rel_error_bracketing": worst_bracketing,
        "judged_on": "bracketing fit" if worst_bracketing is not None else "first fit",
        "goal": GOAL,
        "met": judged is not None and judged <= GOAL and len(rows) == len(CONCURRENCIES),
        "wall_s": time.monotonic() - started,
    }


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1%}"


def table(result: dict[str, Any]) -> str:
    lines = [
        (
            "| concurrency | N | measured P50 (s) | P50 error, first fit | P50 error, bracketing "
            "fit | measured P99 (s) | P99 error, first fit | P99 error, bracketing fit | server "
            "speed vs c=1 | P99 error, level's own costs |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c, row in result["by_concurrency"].items():
        m, e = row["measured"], row["rel_error"]
        lv = row["rel_error_level_costs"]
        br = row.get("bracketing_fit")
        be = e if c == "1" else (br["rel_error"] if br else None)  # level 1: the fit itself
        speed = "–" if row["speed_vs_c1"] is None else f"{row['speed_vs_c1']:.2f}"
        lines.append(
            f"| {c}{' (fit)' if c == '1' else ''} | {row['requests']} | {m['p50']:.2f} "
            f"| {e['p50']:+.1%} | {_pct(be['p50'] if be else None)} | {m['p99']:.2f} "
            f"| {e['p99']:+.1%} | {_pct(be['p99'] if be else None)} "
            f"| {speed} | {_pct(lv['p99'] if lv else None)} |"
        )
    lines.append("")
    if result["fit"]:
        cm = result["fit"]["cost_model"]
        lines.append(
            f"First fit, from the first concurrency-1 level ({result['fit']['source']}): "
            f"overhead {cm['a'] * 1000:.0f} ms + {cm['b'] * 1000:.2f} ms/prompt token, decode "
            f"{(cm['decode_step_s'] + cm.get('decode_per_seq_s', 0.0)) * 1000:.1f} ms/output "
            "token (one sequence); template adds "
            f"{result['fit']['template_tokens']} tokens. Bracketing fit, per level: the same fit "
            "from the concurrency-1 requests run just before and just after that level."
        )
    worst, worst_pred = result["max_abs_rel_error"], result["max_abs_rel_error_c2_to_c8"]
    worst_br = result.get("max_abs_rel_error_bracketing")
    not_run = result["concurrencies_not_run"]
    lines.append(
        f"Worst error, first fit: {'–' if worst is None else f'{worst:.1%}'} over all levels, "
        f"{'–' if worst_pred is None else f'{worst_pred:.1%}'} over the predicted ones (2-8). "
        f"Worst error, bracketing fit: {'–' if worst_br is None else f'{worst_br:.1%}'}. "
        f"Goal {result['goal']:.0%}, judged on the {result.get('judged_on', 'first fit')}: "
        f"{'met' if result['met'] else 'NOT met'}"
        f"{f'; not run: {not_run}' if not_run else ''}. Run took {result['wall_s']:.0f} s."
    )
    return "\n".join(lines)


def _save(name: str, result: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(
        "# Simulator vs a real server (llama-cpp-python, SmolLM2-135M, this CPU)\n\n"
        f"TTFT under closed-loop load, ~{result['prompt_tokens']}-token prompts, max_tokens "
        f"{result['max_tokens']}; measured by `promptslim loadtest`, simulated by loadsim at "
        "batch size 1 with the cost model fitted from concurrency-1 requests of the same run. "
        "P99 over N requests is numpy's linear interpolation (for N <= 100: between the two "
        f"largest). `python benchmarks/validate_simulator.py --save {name}`\n\n"
        + table(result)
        + "\n"
    )


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--requests", type=int, help=f"per level (default {REQUESTS}, quick {QUICK_REQUESTS})"
    )
    p.add_argument(
        "--prompt-tokens", type=int,
        help=f"per prompt (default {PROMPT_TOKENS}, quick {QUICK_PROMPT_TOKENS})",
    )  # fmt: skip
    p.add_argument(
        "--calibration", type=int,
        help="concurrency-1 requests after each higher level (default "
        f"{CALIBRATION_REQUESTS}, quick {QUICK_CALIBRATION_REQUESTS}; 0: none)",
    )  # fmt: skip
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    p.add_argument("--threads", type=int, help="llama.cpp threads (default: its own choice)")
    p.add_argument("--budget-s", type=float, default=900.0, help="start no new level after this")
    p.add_argument(
        "--concurrencies", default=",".join(map(str, CONCURRENCIES)), help="levels; 1 comes first"
    )
    args = p.parse_args()
    save = (lambda r: _save(args.save, r)) if args.save else None
    result = validate(
        requests=args.requests or (QUICK_REQUESTS if args.quick else REQUESTS),
        prompt_tokens=args.prompt_tokens or (QUICK_PROMPT_TOKENS if args.quick else PROMPT_TOKENS),
        max_tokens=args.max_tokens,
        calibration=(
            args.calibration
            if args.calibration is not None
            else QUICK_CALIBRATION_REQUESTS
            if args.quick
            else CALIBRATION_REQUESTS
        ),
        budget_s=args.budget_s,
        threads=args.threads,
        concurrencies=tuple(sorted({1, *(int(c) for c in args.concurrencies.split(","))})),
        partial=save,
    )
    result["quick"] = args.quick
    if save:
        save(result)
    args.save = None  # written above, with the Markdown
    emit(result, args, table(result))


if __name__ == "__main__":
    main()
