"""Compression benchmark on nq20-dev with all 20 documents in the prompt.

For each compressor and target rate (0.5, 0.33): achieved rate (documents' tokens out / in),
evidence retention (share of items whose gold answer survives, SQuAD-normalised substring),
compression time per item (p50, p99), and SmolLM2 CPU prefill of the original and compressed
prompt measured in the same run (one forward pass, median of repeats); ``net_ratio`` =
(p50 compression time + median compressed prefill) / median original prefill.

    python benchmarks/bench_compress.py --quick --json

Model compressors are slow on CPU, so they run on fewer items (``--n-lm``, ``--n-llmlingua``)
and prefill is measured on ``--prefill-items`` items; the JSON says how many each used.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import re
import statistics
import string
import time
from pathlib import Path
from typing import Any

from promptslim.stages.compress import CompressStage
from promptslim.tokens import count_documents, get_counter
from promptslim.types import Document, Request

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "nq20-dev.jsonl.gz"
RATES = (0.5, 0.33)


def normalise(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in string.punctuation)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def load(path: Path, n: int) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


def request_of(row: dict[str, Any]) -> Request:
    docs = [
        Document(id=f"doc-{i}", text=c["text"], metadata={"title": c["title"]})
        for i, c in enumerate(row["ctxs"])
    ]
    return Request(
        messages=[
            {"role": "system", "content": "Answer the question using the documents."},
            {"role": "user", "content": row["question"]},
        ],
        documents=docs,
    )


def prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in body["messages"])


def prefill_seconds(lm: Any, text: str, repeats: int) -> float:
    import torch

    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"].to(lm.device)
    times = []
    with torch.inference_mode():
        for _ in range(repeats):
            start = time.perf_counter()
            lm.model(input_ids=ids)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    rows = load(Path(args.dataset), args.n)
    counter = get_counter()
    lm = None
    if args.prefill_items:
        from promptslim.backends.models import load_causal_lm

        lm = load_causal_lm(device="cpu")
    sizes = {"extractive": len(rows), "lm": min(len(rows), args.n_lm), "llmlingua": min(len(rows), args.n_llmlingua)}
    options: dict[str, dict[str, Any]] = {"llmlingua": {"protect_fallback": False}}
    originals: dict[int, float] = {}
    out: dict[str, Any] = {}
    for name in args.compressors:
        out[name] = {}
        for rate in RATES:
            stage = CompressStage(compressor=name, rate=rate, options=options.get(name))
            achieved, kept, times, prefills, base = [], 0, [], [], []
            for i, row in enumerate(rows[: sizes[name]]):
                request = request_of(row)
                if i == 0:
                    stage.run(request)  # warm-up: model loads are not compression time
                start = time.perf_counter()
                result = stage.run(request)
                times.append((time.perf_counter() - start) * 1e3)
                achieved.append(count_documents(result.documents, counter) / count_documents(request.documents, counter))
                context = normalise(" ".join(f"{d.title} {d.text}" for d in result.documents))
                kept += any(normalise(a) in context for a in row["answers"])
                if lm is not None and i < args.prefill_items:
                    if i not in originals:
                        originals[i] = prefill_seconds(lm, prompt_text(request.to_openai()), args.repeats)
                    base.append(originals[i])
                    prefills.append(prefill_seconds(lm, prompt_text(result.to_openai()), args.repeats))
            n = len(times)
            entry: dict[str, Any] = {
                "rate": round(statistics.mean(achieved), 4),
                "retention": round(kept / n, 4),
                "p50_ms": round(percentile(times, 0.5), 2),
                "p99_ms": round(percentile(times, 0.99), 2),
                "net_ratio": None,
                "n": n,
            }
            if prefills:
                entry["prefill_original_s"] = round(statistics.median(base), 3)
                entry["prefill_compressed_s"] = round(statistics.median(prefills), 3)
                entry["net_ratio"] = round(
                    (entry["p50_ms"] / 1e3 + entry["prefill_compressed_s"]) / entry["prefill_original_s"], 3
                )
                entry["prefill_n"] = len(prefills)
            out[name][str(rate)] = entry
            print(f"{name} {rate}: {entry}", flush=True)
    import os

    out.update(
        N=len(rows),
        N_per_compressor=sizes,
        machine=f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} (shared with other jobs: timings are noisy)",
        model="SmolLM2-135M-Instruct (fp32, CPU) for prefill, lm and llmlingua",
        dataset=str(args.dataset),
        notes="llmlingua in LongLLMLingua mode, protect_fallback off (the raw package); "
        "model compressors and prefill on subsets (see N_per_compressor, prefill_n)",
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 rows")
    parser.add_argument("--json", action="store_true", help="one JSON object as the last line")
    parser.add_argument("--dataset", default=str(DATA))
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--n-lm", type=int, default=None)
    parser.add_argument("--n-llmlingua", type=int, default=None)
    parser.add_argument("--prefill-items", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compressors", nargs="+", default=["extractive", "lm", "llmlingua"])
    args = parser.parse_args()
    args.n = args.n or (50 if args.quick else 1000)
    args.n_lm = args.n_lm if args.n_lm is not None else (10 if args.quick else 100)
    args.n_llmlingua = args.n_llmlingua if args.n_llmlingua is not None else (5 if args.quick else 10)
    args.prefill_items = args.prefill_items if args.prefill_items is not None else (5 if args.quick else 20)
    result = run(args)
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
