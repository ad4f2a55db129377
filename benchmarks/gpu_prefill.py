"""Prefill time on a GPU at the size of a real serving model: the cost curve, packed steps,
decode steps, and baseline vs slimmed prompts.

Builds a Llama-3-8B-shaped model with random weights on CUDA (bf16). Prefill time does not
depend on the weight values, only on shapes and token count, so this measures what an 8B model
would spend; answers from it are meaningless and are not produced. Logits are computed for the
last position only, as a serving engine does. What it measures:

- ``curve``: one sequence of n tokens in one forward pass, n from 64 to 16,384, run eagerly
  and (on CUDA) captured once as a CUDA graph and replayed; ``cost_model`` holds the faster of
  the two per length (the points a ``loadsim`` cost model fits), ``fit`` the coefficients when
  promptslim is importable here;
- ``packed``: B sequences of n tokens in one pass, B x n = 8,192 (vLLM's default step budget),
  beside what the single-sequence fit predicts for them (how loadsim costs a mixed step);
  the faster of eager and replayed, as for the curve;
- ``decode``: one decode step of m sequences at 512 tokens of context, in transformers' eager
  mode with its DynamicCache (which copies the cache every step and launches every kernel from
  Python: an upper bound on what an engine with CUDA graphs and a paged cache spends);
- ``cached``: n new tokens after k tokens already in the KV cache (a prefix-cache hit),
  beside loadsim's cost for it (the pass constant plus the chunk from k to k + n);
- ``configs``: the prompts of a dataset, as sent and after each promptslim config (the faster
  of eager and replayed per prompt).

The configs' prompts can be prepared on any machine and the GPU part run where promptslim is
not installed (the GPU machine needs only torch and transformers)::

    python benchmarks/gpu_prefill.py --write-prompts prompts.json      # here: runs the configs
    python benchmarks/gpu_prefill.py --prompts prompts.json --json     # on the GPU machine

Without ``--prompts`` the configs run in this process. ``--model PATH`` also measures a real
local model (through promptslim's one model loader) on the same prompts.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import data_dir, emit, machine, parser
from gpu_prompts import measure_configs, prepare_prompts
from gpu_timing import (
    fastest_pass,
    graph_error,
    ms,
    time_cached,
    time_decode,
    time_pass,
)

if TYPE_CHECKING:
    from promptslim.loadsim.costmodel import CostModel

LLAMA3_8B = {
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 32768,
    "rope_theta": 500000.0,
}
CURVE = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
CURVE_QUICK = (128, 512, 2048, 8192)
STEP_TOKENS = 8192  # vLLM's default max_num_batched_tokens on a large GPU
PACKED = (1, 4, 16, 64)  # sequences per packed step of STEP_TOKENS
DECODE_BATCHES = (1, 32, 128)
DECODE_CONTEXT = 512
#: (cached prefix tokens, new tokens) for the prefix-cache section
CACHED = ((0, 1024), (1024, 1024), (4096, 1024), (0, 4096), (4096, 4096), (12288, 4096))
SECTIONS = ("curve", "packed", "decode", "cached", "configs")


# ---------------------------------------------------------------- prompts (any machine)


# ---------------------------------------------------------------- the GPU part


def random_llama(layers: int | None, device: str) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{**LLAMA3_8B, **({"num_hidden_layers": layers} if layers else {})})
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # initialise in bf16: no 32 GB fp32 detour
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(previous)
    return model


def cost_points(curve: list[dict[str, Any]]) -> list[list[float]]:
    """``[tokens, seconds]`` per length: the faster of the eager and the graph-replayed pass.

    Both overstate what the GPU needs for that pass, each in its own way: eager passes carry
    transformers' kernel launches (a ~20 ms floor here), and inside a graph capture
    scaled_dot_product_attention has fewer kernels to choose from (on the H200, 16k tokens
    took 0.92 s replayed against 0.57 s eager). The faster one is the tighter bound."""
    return [
        [c["tokens"], min(c[k]["p50"] for k in ("eager_ms", "graph_ms") if k in c) / 1e3]
        for c in curve
    ]


def fit(points: list[list[float]]) -> CostModel | None:
    """loadsim's cost model through the points (None where promptslim is not importable: the
    GPU machine may have only torch and transformers)."""
    try:
        from promptslim.loadsim.costmodel import CostModel
    except ImportError:
        return None
    return CostModel.from_dict({"points": points})


class Session:
    """One model on one device, and what each section has measured and printed so far."""

    def __init__(self, model: Any, device: str, repeats: int, quick: bool) -> None:
        import torch

        self.model, self.device, self.repeats, self.quick = model, device, repeats, quick
        self.rng = random.Random(0)
        self.lines: list[str] = []
        self.result: dict[str, Any] = {
            "gpu": torch.cuda.get_device_name(0) if device == "cuda" else device,
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
            "attention": getattr(model.config, "_attn_implementation", None),
            "repeats": repeats,
        }
        failed = graph_error(model, self.ids(1, 128))
        self.graph = failed is None
        self.result["pass_mode"] = "cuda_graph" if self.graph else "eager"
        if failed:
            self.result["graph_error"] = failed
        self.cost: CostModel | None = None

    def ids(self, batch: int, n: int, vocab: int | None = None) -> Any:
        """Random token ids (prefill time does not depend on which), ``vocab``: the model's."""
        import torch

        vocab = vocab or self.model.config.vocab_size
        rows = [[self.rng.randrange(vocab) for _ in range(n)] for _ in range(batch)]
        return torch.tensor(rows, device=self.device)

    def curve(self) -> None:
        curve = []
        for n in CURVE_QUICK if self.quick else CURVE:
            x = self.ids(1, n)
            entry = {"tokens": n, "eager_ms": ms(time_pass(self.model, x, self.repeats))}
            if self.graph:
                entry["graph_ms"] = ms(time_pass(self.model, x, self.repeats, graph=True))
            curve.append(entry)
        points = cost_points(curve)
        self.cost = fit(points)
        self.result.update(
            curve=curve,
            cost_model={"points": points, "source": f"gpu_prefill.py on {self.result['gpu']}"},
            fit={k: getattr(self.cost, k) for k in "abc"} if self.cost else None,
        )
        self.lines.append(
            f"{'tokens':>8} {'eager ms p50':>13} {'graph ms p50':>13} {'min':>8} {'max':>8} "
            f"{'tokens/s':>10}"
        )
        for c in curve:
            graph_p50 = f"{c['graph_ms']['p50']:13.2f}" if self.graph else f"{'-':>13}"
            fastest = min(
                (c[k] for k in ("eager_ms", "graph_ms") if k in c), key=lambda m: m["p50"]
            )
            self.lines.append(
                f"{c['tokens']:8d} {c['eager_ms']['p50']:13.2f} {graph_p50} "
                f"{fastest['min']:8.2f} {fastest['max']:8.2f} "
                f"{c['tokens'] / fastest['p50'] * 1e3:10.0f}"
            )
        if "graph_error" in self.result:
            self.lines.append(
                f"CUDA graph capture failed, eager only: {self.result['graph_error']}"
            )

    def packed(self) -> None:
        packed = []
        for batch in PACKED:
            each = STEP_TOKENS // batch
            x = self.ids(batch, each)
            entry: dict[str, Any] = {"sequences": batch, "tokens_each": each}
            entry["ms"] = ms(fastest_pass(self.model, x, self.repeats, self.graph))
            if self.cost:  # loadsim: one pass constant, then each sequence's chunk
                entry["predicted_ms"] = 1e3 * (self.cost.a + batch * self.cost.chunk_s(0, each))
            packed.append(entry)
        self.result["packed"] = packed
        self.lines.append(f"packed steps of {STEP_TOKENS} tokens: " + ", ".join(
            f"{e['sequences']}x{e['tokens_each']} {e['ms']['p50']:.1f} ms"
            + (f" (fit {e['predicted_ms']:.1f})" if "predicted_ms" in e else "")
            for e in packed
        ))  # fmt: skip

    def cached(self) -> None:
        cached = []
        for prefix, new in CACHED:
            x, y = self.ids(1, prefix), self.ids(1, new)
            entry: dict[str, Any] = {"cached_tokens": prefix, "new_tokens": new}
            entry["ms"] = ms(time_cached(self.model, x, y, self.repeats))
            if self.cost:  # loadsim: the pass constant and the chunk from ``prefix`` on
                entry["predicted_ms"] = 1e3 * (self.cost.a + self.cost.chunk_s(prefix, new))
            cached.append(entry)
        self.result["cached"] = cached
        self.lines.append("new tokens after a cached prefix (eager): " + ", ".join(
            f"{e['cached_tokens']}+{e['new_tokens']} {e['ms']['p50']:.1f} ms"
            + (f" (fit {e['predicted_ms']:.1f})" if "predicted_ms" in e else "")
            for e in cached
        ))  # fmt: skip

    def decode(self) -> None:
        decode: list[dict[str, Any]] = []
        for batch in DECODE_BATCHES:
            steps = 5 if self.quick else 10
            try:
                step = ms(time_decode(self.model, batch, DECODE_CONTEXT, steps))
            except (RuntimeError, TypeError, ValueError, AttributeError) as exc:
                # an API difference or OOM must not cost the prefill figures
                decode.append({"batch": batch, "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            decode.append({"batch": batch, "context": DECODE_CONTEXT, "ms": step})
        self.result["decode"] = decode
        self.result["decode_note"] = (
            "transformers eager mode, DynamicCache: every kernel launched from Python and the "
            "cache copied each step; an upper bound on a serving engine's decode step"
        )
        self.lines.append("decode steps (HF eager, upper bound): " + ", ".join(
            f"m={d['batch']} {d['ms']['p50']:.1f} ms" if "ms" in d else f"m={d['batch']} {d['error']}"
            for d in decode
        ))  # fmt: skip

    def configs(self, prepared_sets: list[dict[str, Any]], real: Any | None) -> None:
        self.result["datasets"] = {}
        for prepared in prepared_sets:
            self.lines.append(f"{prepared['dataset']} ({prepared['items']} items)")
            self.lines.append(
                f"{'config':32} {'tokens':>8} {'prefill ms p50':>15} {'net ratio':>10}"
            )
            configs = measure_configs(
                prepared,
                lambda n: fastest_pass(self.model, self.ids(1, n), self.repeats, self.graph),
                self.lines,
            )
            if real is not None:
                vocab = real.model.config.vocab_size
                measured = measure_configs(
                    prepared,
                    lambda n, vocab=vocab: time_pass(
                        real.model, self.ids(1, n, vocab), self.repeats
                    ),
                    [],
                )
                for label, entry in measured.items():
                    configs[label]["real_model_prefill_ms_p50"] = entry["prefill_ms_p50"]
            self.result["datasets"][prepared["dataset"]] = {
                "items": prepared["items"],
                "prompts_machine": prepared["machine"],
                "configs": configs,
            }


def parse_args() -> argparse.Namespace:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--dataset", default="builtin:rag", help="a dataset spec; DATA/ is $PROMPTSLIM_DATA_DIR"
    )
    p.add_argument("--configs", default="baseline,retrieval,compress:extractive@0.33,full")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--layers", type=int, help="fewer layers than Llama-3-8B's 32 (a smoke test)")
    p.add_argument("--model", help="also measure this local model (path or cached name)")
    p.add_argument("--write-prompts", type=Path, help="only run the configs; write their prompts")
    p.add_argument(
        "--prompts", type=Path, action="append", help="prompts written by --write-prompts (repeat)"
    )
    p.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"what to measure, comma-separated, from {','.join(SECTIONS)} (curve always)",
    )
    p.add_argument(
        "--no-vectors",
        action="store_true",
        help="RAG requests without their vector store's embeddings (retrieval embeds every passage)",
    )
    p.add_argument(
        "--device", default="cuda", help="cpu: a smoke test of this script with --layers"
    )
    args = p.parse_args()
    args.section_set = set(args.sections.split(","))
    if unknown := args.section_set - set(SECTIONS):
        p.error(f"--sections: unknown {', '.join(sorted(unknown))}")
    return args


def main() -> int:
    args = parse_args()
    limit = 4 if args.quick else args.limit
    # DATA/ stands for the evaluation data's folder, so a recorded spec names no machine's path
    spec = args.dataset.replace("DATA/", f"{data_dir()}/")
    if args.write_prompts:
        prepared = {
            **prepare_prompts(spec, args.configs, limit, not args.no_vectors),
            "dataset": args.dataset,
        }
        args.write_prompts.write_text(json.dumps(prepared) + "\n", encoding="utf-8")
        print(
            f"gpu_prefill: wrote {len(prepared['configs'])} configs' prompts to {args.write_prompts}"
        )
        return 0
    return measure(args, spec, limit)


def measure(args: argparse.Namespace, spec: str, limit: int) -> int:
    """Every section asked for, on the random-weight model (and ``--model``'s, for configs)."""
    import torch

    sections = args.section_set

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_prefill: no CUDA device here; nothing measured (run it on a GPU machine).")
        if args.json:
            print('{"skipped": "no CUDA device"}')
        return 0
    started = time.perf_counter()
    model = random_llama(args.layers, args.device)
    build_s = time.perf_counter() - started
    run = Session(model, args.device, 3 if args.quick else args.repeats, args.quick)
    name = "random-weight Llama-3-8B shape, bf16 (prefill time does not depend on weight values)"
    run.result = {
        "benchmark": "gpu_prefill",
        "model": name + (f", {args.layers} layers" if args.layers else ""),
        **run.result,
        "build_s": build_s,
        "machine": machine(),
    }
    run.lines.append(
        f"{run.result['gpu']}: {run.result['model']}; attention {run.result['attention']}"
    )
    run.curve()
    for section in ("packed", "cached", "decode"):
        if section in sections:
            getattr(run, section)()
    if "configs" in sections:
        prepared_sets = (
            [json.loads(path.read_text(encoding="utf-8")) for path in args.prompts]
            if args.prompts
            else [prepare_prompts(spec, args.configs, limit, not args.no_vectors)]
        )
        real = None
        if args.model:
            from promptslim.backends.models import load_causal_lm

            real = load_causal_lm(args.model, device=args.device)
        run.configs(prepared_sets, real)
    else:
        run.result["datasets"] = {}
    run.result.update(
        max_memory_gib=torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else None,
        wall_s=time.perf_counter() - started,
    )
    emit(run.result, args, "\n".join(run.lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
