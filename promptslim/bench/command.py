"""What ``promptslim bench`` does, callable from Python: load the dataset, build the configs
and the model backend, run them side by side, write the outputs."""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..errors import ConfigError
from .backends import load_backend
from .datasets import load_dataset
from .report import RunLog, write_outputs
from .runner import BenchRun, Progress, parse_configs, run_bench

__all__ = ["DEFAULT_CONFIGS", "QUICK", "BenchOptions", "bench"]

DEFAULT_CONFIGS = "baseline,prefix,history,retrieval,compress:extractive@0.33,full"


@dataclass(frozen=True)
class BenchOptions:
    dataset: str = "builtin:rag"
    model: str = "hf:default"
    configs: str = DEFAULT_CONFIGS
    limit: int | None = None
    seed: int = 0
    device: str = "auto"
    repeats: int = 3
    max_new_tokens: int = 24


#: ``--quick``: a handful of small built-in items, one timed repeat, short answers, and the
#: configs that change a RAG prompt (prefix and history have nothing to do on it), so the run
#: takes a few minutes on a 2-core CPU.
QUICK = BenchOptions(
    dataset="builtin:rag",
    configs="baseline,retrieval,compress:extractive@0.33,full",
    limit=4,
    repeats=1,
    max_new_tokens=12,
)


def bench(
    options: BenchOptions,
    *,
    out: str | Path | None,
    stream: TextIO | None = None,
    resume: bool = False,
) -> BenchRun:
    """Run the benchmark; write outputs to ``out`` when given. Progress and skipped dataset
    records go to ``stream`` (stderr by default). With ``out``, rows are also logged as they
    finish (``report.RunLog``); ``resume=True`` skips the items an interrupted run of the same
    options already finished there."""
    if resume and out is None:
        raise ConfigError("resuming needs the output folder of the run to resume", field="out")

    stream = stream if stream is not None else sys.stderr
    start = time.perf_counter()
    configs = parse_configs(options.configs)  # fails fast on a bad spec, before any model loads
    dataset = load_dataset(options.dataset, limit=options.limit, seed=options.seed)
    for error in dataset.errors:
        print(f"promptslim bench: skipped {error}", file=stream)
    if not dataset.items:
        raise ConfigError(f"no readable items in {options.dataset!r}", field="dataset")
    backend = load_backend(
        options.model,
        device=options.device,
        repeats=options.repeats,
        max_new_tokens=options.max_new_tokens,
    )
    log = RunLog(out, resume=resume, start=start) if out is not None else None
    todo = len(dataset.items) - (log.finished_items(len(configs)) if log else 0)
    try:
        run = run_bench(
            dataset,
            backend,
            configs,
            seed=options.seed,
            progress=Progress(max(todo, 0) * len(configs), stream=stream),
            meta={"options": options.__dict__, "machine": _machine()},
            done=log.done if log else (),
            on_row=log.write if log else None,
        )
    finally:
        backend.close()
        if log is not None:
            log.close()
    run.summary["wall_s"] = log.wall_s() if log else time.perf_counter() - start
    if log is not None and out is not None:
        write_outputs(run, out)
        log.finish()
    return run


def _machine() -> dict[str, object]:
    info: dict[str, object] = {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info
