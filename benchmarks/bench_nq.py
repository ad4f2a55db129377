"""The multi-document QA run: ``promptslim bench`` on nq20-dev,
SmolLM2 on the CPU, baseline vs each stage vs the full pipeline, side by side on every item.

The model is SmolLM2-135M-Instruct from the packaged GGUF. By default it runs on the torch
backend (``promptslim bench``'s ``hf:default``): prefill timed as one forward pass with
last-position logits, greedy answer, gold answer log-probability; about 10 s per ~2,700-token
baseline prompt on this 2-core CPU, so 200 items x 6 configs take about an hour. ``--model
llama-server`` serves the same model through llama-cpp-python's OpenAI-compatible server on
127.0.0.1 (started and stopped here, by PID), so "first token" is a real server's TTFT on the
client clock; on this machine it measured slower than torch (20-60 s for 2,200 tokens).

Fairness of the comparison:
- with ``--model llama-server``, the server keeps the previous prompt's KV cache and reuses its longest common prefix. Left
  alone, a config measured right after the baseline of the same item would be served partly
  from the baseline's cache (same instructions, often the same first document). Before every
  measured request we send one tiny unrelated request, so every measured prompt finds only the
  chat template's few leading tokens cached -- the same for every config.
- a config whose prompt is byte-identical to one already measured on the item (prefix and
  history have nothing to change on a single-turn RAG prompt) reuses that measurement
  (``reused_measurement`` in results.jsonl) rather than paying for a second identical one.

Usage::

    python benchmarks/bench_nq.py --quick --json                       # 4 items
    python benchmarks/bench_nq.py --limit 200 --out benchmarks/results/bench_nq
    python benchmarks/bench_nq.py --limit 200 --out benchmarks/results/bench_nq --resume

With ``--out``, every finished row is appended to ``OUT/progress.jsonl`` at once; ``--resume``
reads it and runs only the items not finished yet (the full run takes more than two hours on
two CPU cores), then the outputs cover every item.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import LlamaServer, data_file, emit, machine, parser

from promptslim.bench.backends import Measurement, OpenAIBackend, load_backend
from promptslim.bench.command import DEFAULT_CONFIGS
from promptslim.bench.datasets import LoadedDataset, load_dataset
from promptslim.bench.report import RunLog, write_outputs
from promptslim.bench.runner import BenchRun, Progress, parse_configs, run_bench

#: replaces the server's cached prompt between measured requests (see the module docstring)
FLUSH = [{"role": "user", "content": "Say OK."}]


class FreshSlotBackend(OpenAIBackend):
    """The openai backend, with one tiny request before each measured one so that no measured
    prompt reuses the KV cache of the prompt measured before it."""

    def measure(self, messages: Sequence[dict[str, Any]], *, answers: Sequence[str]) -> Measurement:
        body = {"model": self.model, "messages": FLUSH, "max_tokens": 1, "temperature": 0.0}
        self._client.post(self.url, json=body).raise_for_status()
        return super().measure(messages, answers=answers)


def compact(summary: dict[str, Any]) -> dict[str, Any]:
    """Per config: tokens, time and quality with its paired-bootstrap interval."""
    out: dict[str, Any] = {}
    for label, c in summary["configs"].items():
        row: dict[str, Any] = {
            "n": c["n"],
            "errors": c["errors"],
            "token_ratio": c["token_ratio"],
            "tokens_out": c["tokens_out"],  # cl100k, as the pipeline counts
            # the model's own tokenizer, when the backend reports it
            "prompt_tokens": c["prompt_tokens"],
            "slim_p50_ms": c["slim_ms"].get("p50"),
            "slim_p99_ms": c["slim_ms"].get("p99"),
            "first_token_p50_s": c["first_token_s"].get("p50"),
            "first_token_p99_s": c["first_token_s"].get("p99"),
            "net_ttft_ratio_median": (c.get("net_ttft_ratio") or {}).get("median"),
            "quality": c["quality"],
        }
        if "delta_vs_baseline" in c:
            row["delta_vs_baseline"] = c["delta_vs_baseline"]
        out[label] = row
    return out


def parse_args() -> argparse.Namespace:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--dataset", help="default: nq20-dev.jsonl.gz in $PROMPTSLIM_DATA_DIR")
    p.add_argument("--limit", type=int, default=200)
    p.add_argument("--configs", default=DEFAULT_CONFIGS)
    p.add_argument("--model", choices=("hf", "llama-server"), default="hf")
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out", type=Path, help="write results.jsonl, summary.json, report.md and the plot here"
    )
    p.add_argument(
        "--resume", action="store_true", help="skip the items finished in OUT/progress.jsonl"
    )
    args = p.parse_args()
    args.dataset = args.dataset or str(data_file("nq20-dev.jsonl.gz"))
    if args.resume and not args.out:
        p.error("--resume needs --out")
    return args


def run_nq(args: argparse.Namespace, limit: int) -> tuple[BenchRun, LoadedDataset]:
    """The configs side by side on the dataset, on SmolLM2 (torch, or a llama-cpp server)."""
    start = time.perf_counter()
    configs = parse_configs(args.configs)
    dataset = load_dataset(f"nq:{args.dataset}", limit=limit, seed=args.seed)
    server: LlamaServer | None = None
    if args.model == "hf":
        backend = load_backend("hf:default", repeats=1, max_new_tokens=args.max_new_tokens)
    else:
        server = LlamaServer(n_ctx=8192)
        backend = FreshSlotBackend(server.base + "/v1", max_tokens=args.max_new_tokens)
    log = RunLog(args.out, resume=args.resume, start=start) if args.out else None
    finished = log.finished_items(len(configs)) if log else 0
    try:
        run = run_bench(
            dataset,
            backend,
            configs,
            seed=args.seed,
            done=log.done if log else (),
            on_row=log.write if log else None,
            progress=Progress(max(len(dataset.items) - finished, 0) * len(configs)),
            meta={
                "machine": machine(),
                "model": "SmolLM2-135M-Instruct (packaged GGUF, Q4_1) via llama-cpp-python server"
                if server
                else "SmolLM2-135M-Instruct (torch fp32, from the packaged GGUF)",
                "fresh_slot": server is not None,
            },
        )
    finally:
        if log is not None:
            log.close()
        backend.close()
        if server is not None:
            server.stop()
    run.summary["wall_s"] = log.wall_s() if log else time.perf_counter() - start
    if log is not None:
        write_outputs(run, args.out)
        log.finish()  # results.jsonl now holds every row
    return run, dataset


def nq_table(result: dict[str, Any]) -> str:
    lines = [
        f"nq run: {result['N']} items, {result['wall_s']:.0f} s, {result['model']}",
        f"{'config':28} {'tokens':>7} {'TTFT p50':>9} {'net':>6} {'EM':>6} {'dEM [95% CI]':>22}",
    ]
    for label, c in result["configs"].items():
        d = (c.get("delta_vs_baseline") or {}).get("em")
        ci = f"{d['mean']:+.3f} [{d['low']:+.3f},{d['high']:+.3f}]" if d else ""
        lines.append(
            f"{label:28} {c['tokens_out']:7.0f} {c['first_token_p50_s'] or 0:9.3f} "
            f"{c['net_ttft_ratio_median'] or 0:6.3f} {c['quality']['em']['mean']:6.3f} {ci:>22}"
        )
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    run, dataset = run_nq(args, 4 if args.quick else args.limit)
    result = {
        "dataset": Path(args.dataset).name,
        "N": len(dataset.items),
        "skipped": dataset.skipped,
        "model": run.summary["model"],
        "machine": run.summary["machine"],
        "wall_s": run.summary["wall_s"],
        "configs": compact(run.summary),
    }
    emit(result, args, nq_table(result))


if __name__ == "__main__":
    main()
