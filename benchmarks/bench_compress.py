"""Compression benchmark on nq20-dev with all 20 documents in the prompt.

For each compressor and target rate (0.5, 0.33): achieved rate (documents' tokens out / in),
evidence retention (share of items whose gold answer survives, SQuAD-normalised substring),
compression time per item (p50, p99; wall clock, and process CPU time beside it because the
dev box is shared), and ``net_ratio`` = (compression time + compressed prefill) / original
prefill, per item, median over items. Prefill is SmolLM2 on CPU as a serving engine does it
(one forward pass, logits of the last position only), of the whole chat prompt with the
documents rendered in; original and compressed prompts are timed side by side, interleaved
(original, every compressed variant, original again ...), so load drift hits both alike.

``lm`` and ``llmlingua`` (LongLLMLingua mode) run on the same items, one after the other for
each item, and ``lm_speedup_vs_llmlingua`` (per rate: llmlingua's median time / lm's on those
shared items) and ``lm_vs_llmlingua`` (both compressors' rate, retention and time on them)
say how the native compressor compares with the package. On a CPU ``lm`` scores with an int8
copy of the LM (its default there, ``quantize=None``); ``lm_fp32`` is the same compressor on the
float model (``quantize=False``), timed and scored the same way on the same items as ``lm``,
with its own ``lm_fp32_speedup_vs_llmlingua`` and ``lm_fp32_vs_llmlingua``.

    python benchmarks/bench_compress.py --quick --json

llmlingua takes ~25-35 s an item on a 2-core CPU, so it runs on fewer items than ``lm``, and
``lm`` on fewer than ``extractive`` (``--n-lm``, ``--n-llmlingua``; ``--quick``: 50, 4 and 1
rows); prefill on ``--prefill-items``. The JSON says how many each used. ``--quick`` compares
``lm`` and ``llmlingua`` on one item: a smoke check. Judging the speed-up takes a side-by-side
run on several items, for instance ``--compressors lm lm_fp32 llmlingua --n-lm 12
--n-llmlingua 8 --prefill-items 2``. llmlingua overshoots its target rate, so compare the
achieved rates beside the times. Without ``--dataset`` it reads nq20-dev from
``$PROMPTSLIM_DATA_DIR`` (the committed sample otherwise). The goals are
``GOALS["bench_compress"]`` in ``benchmarks/summary.py``.

llmlingua 0.2.2 runs only on transformers <= 4.47.1, and ``.venv`` runs current transformers.
Where llmlingua cannot run in this interpreter, its rows are computed in the lingua environment
(``.venv-lingua``, ``scripts/setup_lingua.sh``; another interpreter with
``$PROMPTSLIM_LINGUA_PYTHON``) by this script in a child process (``--llmlingua-worker``), on the
same items and timed there the same way, before this process's own items (so not interleaved
with ``lm``); its compressed prompts are prefilled here with the others. Without that
environment the llmlingua rows are skipped, saying so (``llmlingua_skipped`` in the JSON).
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import re
import statistics
import string
import time
from pathlib import Path
from typing import Any

from common import data_file, machine, run_in_lingua
from compress_stats import RATES, Records, entry, versus

from promptslim.render import insert_documents
from promptslim.stages.compress import CompressStage
from promptslim.tokens import count_documents, get_counter
from promptslim.types import Document, Request

#: benchmark labels that are a compressor with options: the lm compressor on the float model
#: (``lm`` itself scores with an int8 copy on a CPU, its default there)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {"lm_fp32": ("lm", {"quantize": False})}


def normalise(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in string.punctuation)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def load(path: Path, n: int) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


def request_of(row: dict[str, Any], n_docs: int | None = None) -> Request:
    docs = [
        Document(id=f"doc-{i}", text=c["text"], metadata={"title": c["title"]})
        for i, c in enumerate(row["ctxs"][:n_docs])
    ]
    return Request(
        messages=[
            {"role": "system", "content": "Answer the question using the documents."},
            {"role": "user", "content": row["question"]},
        ],
        documents=docs,
    )


def prompt_ids(lm: Any, request: Request) -> Any:
    """The chat prompt the model would prefill: documents rendered in as the pipeline sends
    them (``insert_documents``), through the model's chat template."""
    messages = [m.to_openai() for m in request.messages]
    messages = insert_documents(messages, request.documents, request.last_user_index())
    ids = lm.tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=False
    )
    return ids.to(lm.device)


def prefill_seconds(lm: Any, ids: Any) -> float:
    """One forward pass keeping only the last position's logits, as serving engines prefill
    (the LM head over every position would add ~20 % that no engine spends)."""
    import torch

    params = inspect.signature(lm.model.forward).parameters
    keep = {"logits_to_keep" if "logits_to_keep" in params else "num_logits_to_keep": 1}
    with torch.inference_mode():
        start = time.perf_counter()
        lm.model(input_ids=ids, **keep)
        return time.perf_counter() - start


def answer_kept(row: dict[str, Any], documents: list[Document]) -> bool:
    context = normalise(" ".join(f"{d.title} {d.text}" for d in documents))
    return any(normalise(a) in context for a in row["answers"])


def _remote_llmlingua(args: argparse.Namespace, n: int) -> dict[str, Any] | str:
    """llmlingua's records from the lingua environment (a child process running this script
    with ``--llmlingua-worker``), or why there are none."""
    return run_in_lingua(__file__, ["--llmlingua-worker", "--dataset", args.dataset, "--n", str(n)])


def _llmlingua_worker(args: argparse.Namespace) -> dict[str, Any]:
    """The llmlingua rows alone, with each compressed request's documents (for the parent's
    prefill): what ``run`` records for llmlingua, computed in this environment."""
    rows = load(Path(args.dataset), args.n)
    counter = get_counter()
    stages = {
        rate: CompressStage(
            compressor="llmlingua", rate=rate, options={"protect_fallback": False}, strict=True
        )
        for rate in RATES
    }
    for stage in stages.values():  # warm-up: the model load is not compression time
        stage.run(request_of(rows[0], n_docs=3))
    out: dict[str, list[dict[str, Any]]] = {str(rate): [] for rate in RATES}
    for row in rows:
        request = request_of(row)
        before = count_documents(request.documents, counter)
        for rate, stage in stages.items():
            wall, cpu = time.perf_counter(), time.process_time()
            result = stage.run(request)
            out[str(rate)].append({
                "ms": (time.perf_counter() - wall) * 1e3,
                "cpu_ms": (time.process_time() - cpu) * 1e3,
                "rate": count_documents(result.documents, counter) / before,
                "kept": answer_kept(row, result.documents),
                "documents": [d.model_dump(mode="json") for d in result.documents],
            })  # fmt: skip
    return out


Stages = dict[tuple[str, float], CompressStage]


def run(args: argparse.Namespace) -> dict[str, Any]:
    rows = load(Path(args.dataset), args.n)
    remote = _remote_or_skip(args, rows)  # may take llmlingua out of args.compressors
    stages, sizes = _stages(args, rows, remote)
    lm = None
    if args.prefill_items:
        from promptslim.backends.models import load_causal_lm

        lm = load_causal_lm(device="cpu")
    records = _compress_rows(args, rows, stages, sizes, remote, lm)
    return _summary(args, rows, records, sizes, remote)


def _remote_or_skip(
    args: argparse.Namespace, rows: list[dict[str, Any]]
) -> dict[str, Any] | str | None:
    """llmlingua's records from the lingua environment when this one lacks it (a dict), why it
    was skipped (a str, and llmlingua left out of ``args.compressors``), or None: run here."""
    remote: dict[str, Any] | str | None = None
    if "llmlingua" in args.compressors:
        from promptslim.backends.compress.lingua import llmlingua_unavailable

        if llmlingua_unavailable() is not None:
            remote = _remote_llmlingua(args, min(len(rows), args.n_llmlingua))
            if isinstance(remote, str):
                print(f"llmlingua skipped: {remote}", flush=True)
                args.compressors = [c for c in args.compressors if c != "llmlingua"]
    return remote


def _stages(
    args: argparse.Namespace, rows: list[dict[str, Any]], remote: dict[str, Any] | str | None
) -> tuple[Stages, dict[str, int]]:
    """A warmed-up stage per (compressor, rate) run here, and the rows each compressor gets."""
    n_lm = min(len(rows), args.n_lm)
    sizes = {
        "extractive": len(rows),
        "lm": n_lm,
        "lm_fp32": n_lm,
        "llmlingua": min(len(rows), args.n_llmlingua),
    }
    sizes = {name: sizes.get(name, len(rows)) for name in args.compressors}
    options: dict[str, tuple[str, dict[str, Any] | None]] = {
        "llmlingua": ("llmlingua", {"protect_fallback": False})
    }
    options |= VARIANTS
    stages = {
        (name, rate): CompressStage(
            compressor=options.get(name, (name, None))[0],
            rate=rate,
            options=options.get(name, (name, None))[1],
            strict=True,
        )
        for name in args.compressors
        for rate in RATES
        if not (name == "llmlingua" and isinstance(remote, dict))
    }
    for stage in stages.values():  # warm-up: model loads are not compression time
        stage.run(request_of(rows[0], n_docs=3))
    return stages, sizes


def _compress_rows(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    stages: Stages,
    sizes: dict[str, int],
    remote: dict[str, Any] | str | None,
    lm: Any,
) -> Records:
    counter = get_counter()
    # per (compressor, rate): per-item records, in row order
    records: Records = {key: [] for key in stages}
    if isinstance(remote, dict):
        records |= {("llmlingua", rate): [] for rate in RATES}
    for i, row in enumerate(rows):
        request = request_of(row)
        before = count_documents(request.documents, counter)
        compressed: dict[tuple[str, float], Request] = {}
        for (name, rate), stage in stages.items():
            if i >= sizes[name]:
                continue
            wall, cpu = time.perf_counter(), time.process_time()
            result = stage.run(request)
            rec = {
                "ms": (time.perf_counter() - wall) * 1e3,
                "cpu_ms": (time.process_time() - cpu) * 1e3,
                "rate": count_documents(result.documents, counter) / before,
                "kept": answer_kept(row, result.documents),
            }
            records[(name, rate)].append(rec)
            compressed[(name, rate)] = result.request
        if isinstance(remote, dict) and i < sizes["llmlingua"]:
            for rate in RATES:
                rec = dict(remote[str(rate)][i])
                docs = [Document.model_validate(d) for d in rec.pop("documents")]
                records[("llmlingua", rate)].append(rec)
                compressed[("llmlingua", rate)] = request.model_copy(update={"documents": docs})
        if lm is not None and i < args.prefill_items:
            _prefill_item(lm, request, compressed, records, args.repeats)
    return records


def _summary(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    records: Records,
    sizes: dict[str, int],
    remote: dict[str, Any] | str | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (name, rate), recs in records.items():
        out.setdefault(name, {})[str(rate)] = entry(recs)
        print(f"{name} {rate}: {out[name][str(rate)]}", flush=True)
    for native in ("lm", "lm_fp32"):
        if native in args.compressors and "llmlingua" in args.compressors:
            out.update(versus(records, sizes["llmlingua"], native))
    out.update(
        N=len(rows),
        N_per_compressor=sizes,
        prefill_items=min(args.prefill_items, len(rows)),
        machine=machine(),
        model=(
            "SmolLM2-135M-Instruct on CPU: fp32 for prefill, llmlingua and lm_fp32; its int8 copy "
            "(Linear layers dynamically quantised) for lm"
        ),
        dataset=Path(args.dataset).name,  # the file, not where this machine keeps it
        llmlingua_skipped=remote if isinstance(remote, str) else None,
        llmlingua_environment=(
            "the lingua environment (transformers <= 4.47.1), a child process"
            if isinstance(remote, dict)
            else "this process"
            if "llmlingua" in args.compressors
            else None
        ),
        notes=(
            "llmlingua in LongLLMLingua mode, protect_fallback off (the raw package); lm and "
            "llmlingua compared on the same first N_per_compressor['llmlingua'] items; model "
            f"compressors run on fewer rows than extractive (llmlingua ~25-35 s an item on a "
            f"2-core CPU){' -- --quick: too few items for more than a smoke check' if args.quick else ''}; "
            "net_ratio on the first prefill_items items, interleaved with the original prefill"
        ),
    )
    return out


def _prefill_item(
    lm: Any,
    request: Request,
    compressed: dict[tuple[str, float], Request],
    records: dict[tuple[str, float], list[dict[str, Any]]],
    repeats: int,
) -> None:
    """Prefill the original and every compressed prompt of one item, interleaved, and add
    each compressed variant's ``net`` = (compression + compressed prefill) / original."""
    original = prompt_ids(lm, request)
    variants = {key: prompt_ids(lm, req) for key, req in compressed.items()}
    base: list[float] = []
    times: dict[tuple[str, float], list[float]] = {key: [] for key in variants}
    for _ in range(repeats):
        base.append(prefill_seconds(lm, original))
        for key, ids in variants.items():
            times[key].append(prefill_seconds(lm, ids))
    base.append(prefill_seconds(lm, original))  # bracket the variants: drift hits both sides
    original_s = statistics.median(base)
    for key, ts in times.items():
        rec = records[key][-1]
        rec["prefill_original_s"] = original_s
        rec["prefill_compressed_s"] = statistics.median(ts)
        rec["net"] = (rec["ms"] / 1e3 + rec["prefill_compressed_s"]) / original_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="50 rows (4 for lm, 1 for llmlingua, 1 prefilled)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object as the last line")
    parser.add_argument(
        "--dataset",
        help="nq20-dev.jsonl.gz or a file of its format (default: $PROMPTSLIM_DATA_DIR's)",
    )
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--n-lm", type=int, default=None)
    parser.add_argument("--n-llmlingua", type=int, default=None)
    parser.add_argument("--prefill-items", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument(
        "--compressors", nargs="+", default=["extractive", "lm", "lm_fp32", "llmlingua"]
    )
    parser.add_argument("--llmlingua-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.dataset = args.dataset or str(data_file("nq20-dev.jsonl.gz"))
    if args.llmlingua_worker:  # the child process of _remote_llmlingua
        print(json.dumps(_llmlingua_worker(args)))
        return

    def pick(value: int | None, quick: int, full: int) -> int:
        return value if value is not None else (quick if args.quick else full)

    args.n = pick(args.n, 50, 1000)
    args.n_lm = pick(args.n_lm, 4, 100)
    args.n_llmlingua = pick(args.n_llmlingua, 1, 20)
    args.prefill_items = pick(args.prefill_items, 1, 20)
    args.repeats = pick(args.repeats, 1, 3)
    result = run(args)
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
