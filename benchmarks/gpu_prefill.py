"""Prefill time on a GPU, baseline vs slimmed prompts, at the size of a real serving model.

Builds a Llama-3-8B-shaped model with random weights on CUDA (bf16). Prefill time does not
depend on the weight values, only on shapes and token count, so this measures what an 8B model
would spend; answers from it are meaningless and are not produced. With ``--model PATH`` a real
local model (loaded through promptslim's one model loader) is measured as well.

Prompts come from a dataset spec (default ``builtin:rag``, or e.g. ``nq:../shared/data/...``),
slimmed by each config; token ids for the random model are drawn at the prompt's length in
promptslim's counter (cl100k, close to Llama-3's 128k vocabulary in granularity).

    python benchmarks/gpu_prefill.py --quick --json
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SHARED_DATA, emit, machine, parser

LLAMA3_8B = {
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
}


def random_llama(layers: int | None) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{**LLAMA3_8B, **({"num_hidden_layers": layers} if layers else {})})
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    return model


def time_prefill(model: Any, ids: list[int], repeats: int) -> float:
    import torch

    x = torch.tensor([ids], device="cuda")
    times = []
    with torch.inference_mode():
        model(x[:, :16])
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            model(x, use_cache=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--dataset", default="builtin:rag")
    p.add_argument("--configs", default="baseline,retrieval,compress:extractive@0.33,full")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--model", help="also measure this local model (path or cached name)")
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_prefill: no CUDA device here; nothing measured (run it on a GPU machine).")
        if args.json:
            print('{"skipped": "no CUDA device"}')
        return 0
    from promptslim.bench.datasets import load_dataset
    from promptslim.bench.runner import parse_configs
    from promptslim.tokens import count_request

    limit = 4 if args.quick else args.limit
    repeats = 3 if args.quick else args.repeats
    spec = args.dataset.replace("SHARED", str(SHARED_DATA))
    items = load_dataset(spec, limit=limit).items
    configs = parse_configs(args.configs)
    start = time.perf_counter()
    model = random_llama(None)
    build_s = time.perf_counter() - start
    real = None
    if args.model:
        from promptslim.backends.models import load_causal_lm

        real = load_causal_lm(args.model, device="cuda")
    rng = random.Random(0)
    per_config: dict[str, dict[str, list[float]]] = {}
    for item in items:
        for config in configs:
            t0 = time.perf_counter()
            result = config.pipeline.run(item.request)
            slim_s = time.perf_counter() - t0
            n = count_request(result.request)
            ids = [rng.randrange(LLAMA3_8B["vocab_size"]) for _ in range(n)]
            row = per_config.setdefault(config.label, {"tokens": [], "prefill_s": [], "slim_s": [], "real_s": []})
            row["tokens"].append(n)
            row["prefill_s"].append(time_prefill(model, ids, repeats))
            row["slim_s"].append(slim_s)
            if real is not None:
                from promptslim.bench.backends import HFBackend

                backend = HFBackend.__new__(HFBackend)  # reuse its prompt formatting on the loaded model
                backend.lm, backend.repeats, backend._warm = real, repeats, False
                real_ids = backend.prompt_ids(result.to_openai()["messages"])
                row["real_s"].append(time_prefill(real.model, real_ids, repeats))
    base = per_config["baseline"]
    summary: dict[str, Any] = {
        "model": "random-weight Llama-3-8B shape, bf16 (prefill time does not depend on weight values)",
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "build_s": build_s,
        "dataset": spec,
        "items": len(items),
        "repeats": repeats,
        "machine": machine(),
        "configs": {},
    }
    lines = [f"{'config':32} {'tokens':>8} {'prefill ms p50':>15} {'net ratio':>10}"]
    for label, row in per_config.items():
        net = (sum(row["slim_s"]) + sum(row["prefill_s"])) / sum(base["prefill_s"])
        entry = {
            "tokens_mean": statistics.fmean(row["tokens"]),
            "prefill_ms_p50": 1e3 * statistics.median(row["prefill_s"]),
            "slim_ms_p50": 1e3 * statistics.median(row["slim_s"]),
            "net_ttft_ratio": net,
        }
        if row["real_s"]:
            entry["real_model_prefill_ms_p50"] = 1e3 * statistics.median(row["real_s"])
        summary["configs"][label] = entry
        lines.append(f"{label:32} {entry['tokens_mean']:8.0f} {entry['prefill_ms_p50']:15.1f} {net:10.2f}")
    lines.append(summary["model"])
    emit(summary, args, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
