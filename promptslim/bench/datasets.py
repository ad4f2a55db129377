"""Benchmark datasets behind one interface: each item is a promptslim ``Request`` plus the gold
answers a model's reply is scored against.

A dataset is named by a spec ``KIND:ARG``::

    nq:PATH          "Lost in the Middle" multi-document QA (question, answers, ctxs)
    kv:PATH          "Lost in the Middle" key-value retrieval (ordered_kv_records, key, value)
    longbench:PATH   LongBench jsonl (input, context, answers)
    jsonl:PATH       promptslim's generic format (messages, documents, answers)
    builtin:rag      generated multi-document QA with distractors (no files needed)
    builtin:rag-zh   the same in Chinese
    builtin:rag-hi   the same in Hindi
    builtin:chat     generated multi-turn chats with tool calls and a volatile system prompt
    builtin:chat-zh  the same in Chinese (Chinese dates and times in the system prompt)
    builtin:kv       generated UUID key-value lookups

A bare path is read as ``jsonl:``, unless its first record has the keys of another format.
Files may be gzip-compressed (``.gz``). A record that cannot be read is reported as a
``DatasetError`` naming the file and line, skipped and counted; loading goes on.

Loaders are looked up in ``DATASETS`` (a ``Registry``); users register their own.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..registry import Registry
from .builtin_datasets import BuiltinLoader
from .dataset_base import BenchItem, DatasetLoader, FileLoader, LoadedDataset, read_records
from .file_datasets import (
    KV_INSTRUCTION,
    LONGBENCH_INSTRUCTION,
    NQ_INSTRUCTION,
    JsonlLoader,
    KVLoader,
    LongBenchLoader,
    NQLoader,
    split_passages,
)

__all__ = [
    "DATASETS",
    "KV_INSTRUCTION",
    "LONGBENCH_INSTRUCTION",
    "NQ_INSTRUCTION",
    "BenchItem",
    "BuiltinLoader",
    "DatasetLoader",
    "FileLoader",
    "JsonlLoader",
    "KVLoader",
    "LoadedDataset",
    "LongBenchLoader",
    "NQLoader",
    "load_dataset",
    "parse_spec",
    "read_records",
    "split_passages",
]


# ---------------------------------------------------------------- lookup

#: dataset loaders by spec kind
DATASETS: Registry[type] = Registry(
    "dataset",
    {
        "nq": "promptslim.bench.datasets:NQLoader",
        "kv": "promptslim.bench.datasets:KVLoader",
        "longbench": "promptslim.bench.datasets:LongBenchLoader",
        "jsonl": "promptslim.bench.datasets:JsonlLoader",
        "builtin": "promptslim.bench.datasets:BuiltinLoader",
        "tools": "promptslim.bench.tool_traces:ToolTracesLoader",
    },
)

# keys that identify a file format from its first record
_SNIFF = (("ctxs", "nq"), ("ordered_kv_records", "kv"), ("context", "longbench"))


def _sniff(path: str) -> str:
    for _, record in read_records(path, lambda e: None):
        for key, kind in _SNIFF:
            if key in record:
                return kind
        return "jsonl"
    return "jsonl"


def parse_spec(spec: str) -> tuple[str, str]:
    """``(kind, source)`` of a dataset spec; a bare existing path gets its kind sniffed."""
    kind, sep, source = spec.partition(":")
    if sep and kind in DATASETS:
        if not source:
            raise ConfigError(f"{spec!r} needs a path or name after ':'", field="dataset")
        return kind, source
    if Path(spec).exists():
        return _sniff(spec), spec
    if sep:
        raise ConfigError(
            f"unknown dataset kind {kind!r} in {spec!r}; known: {', '.join(DATASETS.names())}",
            field="dataset",
        )
    raise ConfigError(f"no such dataset file {spec!r} (or use KIND:PATH)", field="dataset")


def load_dataset(spec: str, *, limit: int | None = None, seed: int = 0) -> LoadedDataset:
    """Load the dataset named by ``spec`` (see the module docstring)."""
    kind, source = parse_spec(spec)
    loader: DatasetLoader = DATASETS.get(kind, field="dataset")(source)
    return loader.load(limit=limit, seed=seed)
