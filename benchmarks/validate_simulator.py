"""Validate the loadsim simulator against a real server (issue 11, item 3).

Starts llama-cpp-python on 127.0.0.1 with the packaged SmolLM2 GGUF (it serves one request at
a time), then:

1. measures prefill cost points: single requests of a few prompt sizes, ``max_tokens=1``, TTFT
   on the client clock (median of repeats), and the decode cost per token from single requests
   with short outputs;
2. fits the loadsim cost model to them (batch size 1: ``max_num_seqs=1``, no chunking, no
   prefix cache — every prompt starts with a unique line, so llama.cpp's prefix reuse cannot
   hit either);
3. runs ``promptslim loadtest`` (the library call) at concurrency 1, 2, 4 and 8 with ~1,000-token
   prompts and ``max_tokens=16``;
4. simulates the same closed-loop streams (same prompt sizes, the output lengths the server
   actually produced) and reports simulated vs measured TTFT P50 and P99 and the relative error.

    python benchmarks/validate_simulator.py [--quick] [--json] [--save validate_simulator]

The server is stopped by its PID. Only 127.0.0.1 is used. The whole run is bounded.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, emit, machine, parser

from promptslim.backends.models import smollm2_gguf_path
from promptslim.bench.metrics import percentile
from promptslim.loadsim import (
    CostModel,
    LoadtestOptions,
    PreparedRequest,
    ServerConfig,
    SimRequest,
    fit_prefill,
    run_loadtest,
    simulate_server,
)

GOAL = 0.15
READY_TIMEOUT_S = 90.0
CONCURRENCIES = (1, 2, 4, 8)
PROMPT_TOKENS = 1000
MAX_TOKENS = 16
_FILLER = (
    "The archive of the northern valley keeps records of every harvest since the old bridge "
    "was built, and each ledger lists the families, the fields they worked and the weather of "
    "that year. "
)


# ---------------------------------------------------------------- the server we start


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def start_server() -> tuple[subprocess.Popen[bytes], str, list[str]]:
    port = _free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf_path()),
        "--host", "127.0.0.1", "--port", str(port),
        "--interrupt_requests", "False",  # the default cuts concurrent streams off
    ]  # fmt: skip
    log = tempfile.TemporaryFile()  # noqa: SIM115  (the process owns it until it exits)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise SystemExit(
                f"llama_cpp.server exited: {log.read()[-1500:].decode(errors='replace')}"
            )
        try:
            with urllib.request.urlopen(base + "/v1/models", timeout=2):
                return proc, base, cmd
        except OSError:
            time.sleep(0.25)
    stop_server(proc)
    raise SystemExit(f"llama_cpp.server not ready after {READY_TIMEOUT_S:.0f} s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """By its PID only."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# ---------------------------------------------------------------- prompts of a known size


class Prompts:
    """Unique prompts of about ``n`` tokens in the served model's own tokenizer."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._per_filler = len(self.tokenize(_FILLER * 10)) / 10

    def tokenize(self, text: str) -> list[int]:
        return list(_post(self.base + "/extras/tokenize", {"input": text})["tokens"])

    def make(self, n: int, *, max_tokens: int) -> PreparedRequest:
        # a unique first line: llama.cpp reuses the longest prefix of the previous prompt
        head = f"Ticket {uuid.uuid4().hex}. Read the notes below.\n"
        question = "\nSummarise the notes above in one long sentence."
        fixed = len(self.tokenize(head + question)) + 12  # + chat-template tokens
        repeats = max(0, round((n - fixed) / self._per_filler))
        content = head + _FILLER * repeats + question
        body = {
            "model": "smollm2",
            "messages": [{"role": "user", "content": content}],
            "stream": True,
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        return PreparedRequest(body, len(self.tokenize(content)) + 12)


def _loadtest(
    base: str, stream: list[PreparedRequest], *, concurrency: int
) -> list[dict[str, Any]]:
    opts = LoadtestOptions(
        url=base + "/v1", requests=len(stream), concurrency=concurrency, timeout_s=180,
        time_limit_s=400, max_tokens=MAX_TOKENS,
    )  # fmt: skip
    run = run_loadtest(opts, prepared={"baseline": stream})["configs"]["baseline"]
    bad = [r for r in run["records"] if r["status"] != "ok"]
    if bad:
        raise SystemExit(f"{len(bad)} requests failed: {bad[0]['error']}")
    return list(run["records"])


# ---------------------------------------------------------------- the run


def calibrate(
    base: str, prompts: Prompts, *, sizes: tuple[int, ...], repeats: int
) -> dict[str, Any]:
    """Prefill points (TTFT at batch size 1) and the decode cost per output token."""
    points = []
    for n in sizes:
        records = _loadtest(
            base, [prompts.make(n, max_tokens=1) for _ in range(repeats)], concurrency=1
        )
        tokens = statistics.median(r["prompt_tokens"] for r in records)
        points.append([tokens, statistics.median(r["ttft_s"] for r in records)])
    decode = _loadtest(
        base,
        [prompts.make(PROMPT_TOKENS, max_tokens=MAX_TOKENS) for _ in range(repeats)],
        concurrency=1,
    )
    tpot = statistics.median(r["tpot_s"] for r in decode if r["tpot_s"] is not None)
    cost = CostModel(**fit_prefill([(p[0], p[1]) for p in points]), decode_step_s=tpot)
    return {"points": points, "decode_tpot_s": tpot, "cost_model": cost.as_dict()}


def simulate(records: list[dict[str, Any]], cost: CostModel, *, concurrency: int) -> list[float]:
    import numpy as np

    rng = np.random.default_rng(0)
    reqs = [
        # random ids: no two prompts share a block, as the unique first line ensures for real
        SimRequest(
            rng.integers(0, 2**40, size=r["prompt_tokens"], dtype=np.uint64),
            max(1, r["output_tokens"]),
        )
        for r in records
    ]
    server = ServerConfig(
        max_num_seqs=1, max_batched_tokens=1 << 20, chunked_prefill=False, prefix_cache=False
    )
    run = simulate_server(reqs, cost=cost, server=server, concurrency=concurrency)
    return [t.ttft_s for t in run.requests]


def validate(*, quick: bool, budget_s: float, partial: Any = None) -> dict[str, Any]:
    """``partial(result)`` is called after each concurrency level (a bounded run on a busy
    machine still leaves what it measured)."""
    started = time.monotonic()
    proc, base, cmd = start_server()
    try:
        prompts = Prompts(base)
        _loadtest(base, [prompts.make(200, max_tokens=4)], concurrency=1)  # warm-up, not counted
        sizes = (250, 1000) if quick else (250, 600, 1000)
        cal = calibrate(base, prompts, sizes=sizes, repeats=2)
        cost = CostModel(**cal["cost_model"])
        print(f"calibration: {json.dumps(cal)}", file=sys.stderr, flush=True)
        rows: dict[str, Any] = {}
        for c in CONCURRENCIES:
            if rows and time.monotonic() - started > budget_s:
                print(
                    f"time budget of {budget_s:.0f} s spent: stopping before concurrency {c}",
                    file=sys.stderr,
                )
                break
            # This CPU is shared: its speed drifts by 2x within minutes (other jobs). So each
            # level is preceded by two single requests that rescale the fitted curve to the
            # machine's speed right now; the simulator still has to predict the queueing.
            probe = _loadtest(
                base,
                [prompts.make(PROMPT_TOKENS, max_tokens=MAX_TOKENS) for _ in range(2)],
                concurrency=1,
            )
            ttft_now = statistics.median(r["ttft_s"] for r in probe)
            scale = ttft_now / cost.prefill_s(
                round(statistics.median(r["prompt_tokens"] for r in probe))
            )
            tpot_now = statistics.median(r["tpot_s"] for r in probe if r["tpot_s"] is not None)
            level_cost = CostModel(
                a=cost.a * scale, b=cost.b * scale, c=cost.c * scale, decode_step_s=tpot_now
            )
            # a 1,000-token prefill takes seconds on this CPU: few requests, the run stays bounded
            n = max(3, c) if quick else max(4, c + 2)
            records = _loadtest(
                base,
                [prompts.make(PROMPT_TOKENS, max_tokens=MAX_TOKENS) for _ in range(n)],
                concurrency=c,
            )
            measured = [r["ttft_s"] for r in records]
            simulated = simulate(records, level_cost, concurrency=c)
            unscaled = simulate(records, cost, concurrency=c)
            row: dict[str, Any] = {
                "requests": n, "speed_scale": scale, "probe_ttft_s": ttft_now,
                "measured": {}, "simulated": {}, "rel_error": {},
                "simulated_first_calibration": {}, "rel_error_first_calibration": {},
            }  # fmt: skip
            for q in (50, 99):
                m, s, u = (percentile(x, q) for x in (measured, simulated, unscaled))
                row["measured"][f"p{q}"] = m
                row["simulated"][f"p{q}"] = s
                row["rel_error"][f"p{q}"] = (s - m) / m
                row["simulated_first_calibration"][f"p{q}"] = u
                row["rel_error_first_calibration"][f"p{q}"] = (u - m) / m
            row["prompt_tokens_mean"] = statistics.fmean(r["prompt_tokens"] for r in records)
            row["output_tokens_mean"] = statistics.fmean(r["output_tokens"] for r in records)
            rows[str(c)] = row
            print(f"concurrency {c}: {json.dumps(row)}", file=sys.stderr, flush=True)
            if partial is not None:
                partial(_result(quick, cmd, cal, rows, started))
    finally:
        stop_server(proc)
    return _result(quick, cmd, cal, rows, started)


def _result(
    quick: bool, cmd: list[str], cal: dict[str, Any], rows: dict[str, Any], started: float
) -> dict[str, Any]:
    worst = max(abs(e) for row in rows.values() for e in row["rel_error"].values())
    return {
        "benchmark": "validate_simulator",
        "quick": quick,
        "machine": machine(),
        "server": " ".join(Path(cmd[0]).name if i == 0 else a for i, a in enumerate(cmd)),
        "prompt_tokens": PROMPT_TOKENS,
        "max_tokens": MAX_TOKENS,
        "calibration": cal,
        "by_concurrency": rows,
        "concurrencies_not_run": [c for c in CONCURRENCIES if str(c) not in rows],
        "max_abs_rel_error": worst,
        "goal": GOAL,
        "met": worst <= GOAL and len(rows) == len(CONCURRENCIES),
        "wall_s": time.monotonic() - started,
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        (
            "| concurrency | requests | speed vs calibration | measured P50 (s) | simulated P50 (s) "
            "| error | measured P99 (s) | simulated P99 (s) | error | P99 error, unrescaled |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c, row in result["by_concurrency"].items():
        m, s, e = row["measured"], row["simulated"], row["rel_error"]
        lines.append(
            f"| {c} | {row['requests']} | {row['speed_scale']:.2f} | {m['p50']:.2f} | {s['p50']:.2f} "
            f"| {e['p50']:+.1%} | {m['p99']:.2f} | {s['p99']:.2f} | {e['p99']:+.1%} "
            f"| {row['rel_error_first_calibration']['p99']:+.1%} |"
        )
    cm = result["calibration"]["cost_model"]
    lines += [
        "",
        f"Cost model (fitted at batch size 1): t(n) = {cm['a']:.4f} + {cm['b']:.3e} n + "
        f"{cm['c']:.3e} n^2 s, decode {cm['decode_step_s'] * 1000:.1f} ms/token; points "
        + ", ".join(f"{int(n)} tok {s:.2f} s" for n, s in result["calibration"]["points"]),
        (
            f"Worst relative error {result['max_abs_rel_error']:.1%} (goal {result['goal']:.0%}: "
            f"{'not run at concurrency ' + str(result['concurrencies_not_run']) + '; ' if result['concurrencies_not_run'] else ''}"
            f"{'met' if result['met'] else 'NOT met'}); run took {result['wall_s']:.0f} s."
        ),
    ]
    return "\n".join(lines)


def _save(name: str, result: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(
        "# Simulator vs a real server (llama-cpp-python, SmolLM2-135M, this CPU)\n\n"
        f"TTFT under closed-loop load, ~{PROMPT_TOKENS}-token prompts, max_tokens "
        f"{MAX_TOKENS}; measured by `promptslim loadtest`, simulated by loadsim fitted at "
        "batch size 1 (each level rescaled by two single requests just before it: the shared "
        "CPU's speed drifts). `python benchmarks/validate_simulator.py --save "
        f"{name}`\n\n" + table(result) + "\n"
    )


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--budget-s", type=float, default=540.0, help="start no new level after this")
    args = p.parse_args()
    save = (lambda r: _save(args.save, r)) if args.save else None
    result = validate(quick=args.quick, budget_s=args.budget_s, partial=save)
    if save:
        save(result)
    args.save = None  # written above, with the Markdown
    emit(result, args, table(result))


if __name__ == "__main__":
    main()
