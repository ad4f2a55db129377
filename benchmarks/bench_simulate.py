"""Simulator speed and a TTFT-vs-concurrency sweep on built-in RAG data.

The cost model is fitted to SmolLM2-135M's fp32 prefill on a 2-core CPU (median of three
passes: 256 tokens 0.43 s, 512 0.89 s, 1,024 1.86 s, 2,048 4.23 s), a small-model CPU figure:
the sweep shows the simulator's shape, not a GPU server's numbers.
``--quick`` runs 100 requests at concurrency 1-100; the full run 1,000 requests at 1-1,000.
"""

from __future__ import annotations

import time

from common import emit, machine, parser

from promptslim.loadsim import CostModel, ServerConfig, SimRequest, load_prompts, simulate_server

#: (prompt tokens, prefill seconds): SmolLM2-135M fp32, 2 CPU cores, median of three passes
CPU_PREFILL_POINTS = [[256, 0.43], [512, 0.89], [1024, 1.86], [2048, 4.23]]


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    requests = 100 if args.quick else 1000
    sweep = (1, 10, 100) if args.quick else (1, 10, 100, 500, 1000)
    cost = CostModel.from_dict({"points": CPU_PREFILL_POINTS, "decode_step_s": 0.02})
    server = ServerConfig(max_num_seqs=256, max_batched_tokens=8192)
    streams = load_prompts("builtin:rag", configs=["baseline"], requests=requests, max_items=100)
    reqs = [SimRequest(p, 32) for p in streams["baseline"]]
    rows: dict[str, dict[str, float]] = {}
    for c in sweep:
        start = time.perf_counter()
        run = simulate_server(reqs, cost=cost, server=server, concurrency=c)
        wall = time.perf_counter() - start
        s = run.summary()
        rows[str(c)] = {
            **{f"ttft_{k}_s": v for k, v in s["ttft_s"].items()},
            "queue_p99_s": s["queue_s"]["p99"],
            "hit_rate": s["cache_hit_rate"],
            "steps": s["steps"],
            "sim_wall_s": wall,
            "sim_steps_per_s": s["steps"] / wall if wall > 0 else 0.0,
        }
    table = "| concurrency | TTFT p50 | TTFT p99 | hit rate | sim wall (s) |\n| --- | --- | --- | --- | --- |\n"
    table += "".join(
        f"| {c} | {r['ttft_p50_s']:.2f} | {r['ttft_p99_s']:.2f} | {r['hit_rate']:.2f} | {r['sim_wall_s']:.3f} |\n"
        for c, r in rows.items()
    )
    result = {
        "bench": "simulate",
        "requests": requests,
        "cost_model": {**cost.as_dict(), "source": "SmolLM2-135M fp32 prefill on 2 CPU cores, fitted"},
        "server": server.as_dict(),
        "sweep": rows,
        "machine": machine(),
    }
    emit(result, args, table)


if __name__ == "__main__":
    main()
