"""From a TTFT SLO to a prompt budget: "TTFT P99 is over 3 s at 500 concurrent requests and we
need 1.5 s" answered with promptslim's simulator, on the cost model of an 8B model on one H200
that ships with promptslim (prefill measured with benchmarks/gpu_prefill.py, decode from the
roofline: its ``source`` says which is which). Use a cost model fitted on your own server for
real decisions (``promptslim loadtest`` results or ``benchmarks/gpu_prefill.py``).

1. simulate the request stream as it is, on a vLLM-like server (continuous batching, chunked
   prefill, prefix cache; vLLM's batch defaults for a large GPU);
2. plan the largest prompt budget whose simulated P99 meets the SLO, each step of the search
   simulating what the planned stages send under the budget (``promptslim plan`` does the
   same from the command line), and write it as a pipeline config;
3. run that pipeline on the same requests and simulate what it sends;
4. what it does to answers is the other half: measure that with ``promptslim bench`` on the
   written config before adopting a budget (the script prints the command).

    python examples/slo_plan.py [--slo 1.5] [--concurrency 500] [--dataset builtin:rag] [--out F]
"""

from __future__ import annotations

import argparse
import tempfile
from importlib.resources import files
from pathlib import Path

from promptslim.bench.metrics import percentile
from promptslim.loadsim import (
    CostModel,
    ServerConfig,
    SimRequest,
    dataset_profile,
    load_prompts,
    pipeline_stream,
    plan_budget,
    simulate_server,
    write_config,
)

OUTPUT_TOKENS = 128


def p99_ttft(prompts: list, cost: CostModel, server: ServerConfig, concurrency: int) -> float:
    run = simulate_server(
        [SimRequest(p, OUTPUT_TOKENS) for p in prompts],
        cost=cost,
        server=server,
        concurrency=concurrency,
    )
    return percentile([r.ttft_s for r in run.requests], 99)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slo", type=float, default=1.5, help="TTFT P99 goal, seconds")
    ap.add_argument("--concurrency", type=int, default=500)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--dataset", default="builtin:rag")
    ap.add_argument("--out", type=Path, help="where to write the config (default: a temp folder)")
    args = ap.parse_args()

    cost = CostModel.load(Path(str(files("promptslim") / "examples" / "cost_h200_llama3_8b.json")))
    server = ServerConfig(max_num_seqs=1024, max_batched_tokens=8192)
    prompts, segments = dataset_profile(args.dataset, requests=args.requests)
    mean = sum(len(p) for p in prompts) / len(prompts)
    before = p99_ttft(prompts, cost, server, args.concurrency)
    print(f"as sent:   {mean:6.0f} prompt tokens a request, TTFT P99 {before:.2f} s "
          f"at {args.concurrency} concurrent requests")  # fmt: skip

    slim = pipeline_stream(args.dataset, segments=segments, requests=args.requests)
    plan = plan_budget(
        prompts, cost=cost, slo_p99_s=args.slo, concurrency=args.concurrency,
        segments=segments, server=server, output_tokens=OUTPUT_TOKENS, slim=slim,
    )  # fmt: skip
    print(f"planned:   budget {plan.total} tokens a request (history {plan.history}, "
          f"documents {plan.documents}); simulated P99 {plan.ttft_p99_s:.2f} s <= {args.slo} s")  # fmt: skip
    if plan.unconstrained:  # the budget is the longest prompt: it binds no request
        print("           the stages alone meet the SLO: no budget is needed on this stream")

    config = args.out or Path(tempfile.mkdtemp(prefix="promptslim-plan-")) / "slim.json"
    write_config(plan.config(), config)
    streams = load_prompts(args.dataset, configs=[str(config)], requests=args.requests)
    (slimmed,) = (stream for label, stream in streams.items() if label != "baseline")
    mean = sum(len(p) for p in slimmed) / len(slimmed)
    after = p99_ttft(slimmed, cost, server, args.concurrency)
    verdict = "meets" if after <= args.slo else "misses"
    print(f"slimmed:   {mean:6.0f} prompt tokens a request, TTFT P99 {after:.2f} s: "
          f"{verdict} the {args.slo} s goal ({before / after:.1f}x lower)")  # fmt: skip
    print(f"config:    {config}\nquality:   promptslim bench --dataset {args.dataset} "
          f"--configs baseline,{config}")  # fmt: skip


if __name__ == "__main__":
    main()
