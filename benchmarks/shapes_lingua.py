"""The shape suite's LongLLMLingua row (``compress:llmlingua@0.2``), beside promptslim's configs.

llmlingua 0.2.2 runs only on transformers <= 4.47.1, so where this interpreter cannot import
it the requests go to the lingua environment (``.venv-lingua``, ``scripts/setup_lingua.sh``,
through ``common.run_in_lingua``, as ``bench_compress.py`` does): this file, run there as a
worker on a JSON file of requests, compresses each and prints, as its last line, what the
shape suite measures of it. Its model loads before the timings (a first request is run once).
Seconds per item on a CPU, so it runs on a few items, after the other configs, not
interleaved with them.

    python benchmarks/shapes_lingua.py --worker REQUESTS.json     # what bench_shapes runs
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import run_in_lingua

SPEC = "compress:llmlingua@0.2"

#: per shape, per request: ``ms``, the messages to send and the documents kept
Records = dict[str, list[dict[str, Any]]]


def compress_all(requests: dict[str, list[dict[str, Any]]]) -> Records:
    """Every request (``Request`` as JSON, per shape) through LongLLMLingua, timed one by one."""
    from promptslim.bench.configs import build_config
    from promptslim.request import Request

    run = build_config(SPEC).pipeline.run
    parsed = {shape: [Request.model_validate(r) for r in rs] for shape, rs in requests.items()}
    first = next((rs[0] for rs in parsed.values() if rs), None)
    if first is not None:
        run(first)  # the model loads outside the timings
    out: Records = {}
    for shape, rs in parsed.items():
        for request in rs:
            start = time.perf_counter()
            result = run(request)
            ms = (time.perf_counter() - start) * 1e3
            out.setdefault(shape, []).append({
                "ms": ms,
                "messages": result.to_openai()["messages"],
                "documents": [d.model_dump(mode="json") for d in result.request.documents],
            })  # fmt: skip
    return out


def longllmlingua(requests: dict[str, list[Any]]) -> Records | str:
    """LongLLMLingua's records of ``requests`` (``Request`` objects, per shape), here when
    llmlingua imports in this interpreter, else in the lingua environment; or why there are
    none (no lingua environment, or its error)."""
    from promptslim.backends.compress.lingua import llmlingua_unavailable

    as_json = {s: [r.model_dump(mode="json") for r in rs] for s, rs in requests.items()}
    if llmlingua_unavailable() is None:
        return compress_all(as_json)
    with tempfile.TemporaryDirectory(prefix="promptslim-shapes-") as folder:
        path = Path(folder) / "requests.json"
        path.write_text(json.dumps(as_json), encoding="utf-8")
        return run_in_lingua(__file__, ["--worker", str(path)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", required=True, metavar="REQUESTS.json")
    args = p.parse_args()
    requests = json.loads(Path(args.worker).read_text(encoding="utf-8"))
    print(json.dumps(compress_all(requests)))


if __name__ == "__main__":
    main()
