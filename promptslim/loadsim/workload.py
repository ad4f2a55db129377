"""Request streams for the simulator: prompts from a benchmark dataset (as sent with or without
a promptslim config) and arrival times.

``arrival_times(n, rate=..., burstiness=..., seed=...)`` follows vLLM's ``bench serve``: gaps
are gamma-distributed with shape ``burstiness`` and mean ``1 / rate`` (1.0 is a Poisson process;
below 1 burstier, above 1 more regular).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

import numpy as np
import numpy.typing as npt

from ..bench.configs import parse_configs
from ..bench.datasets import load_dataset
from ..cache import as_token_array, request_tokens
from ..errors import ConfigError
from ..pipeline import Pipeline
from ..types import Request

__all__ = ["arrival_times", "extend_stream", "load_prompts", "prompt_tokens"]


def arrival_times(n: int, *, rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """``n`` arrival times (seconds, the first after one gap) at ``rate`` requests/s."""
    if not rate > 0:
        raise ConfigError(f"expected a rate > 0, got {rate!r}", field="rate")
    if not burstiness > 0:
        raise ConfigError(f"expected burstiness > 0, got {burstiness!r}", field="burstiness")
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    return np.cumsum(gaps).tolist()  # type: ignore[no-any-return]


def prompt_tokens(request: Request) -> npt.NDArray[np.uint64]:
    """The prompt as the server sees it: documents rendered into the messages (as
    ``Result.to_openai`` sends them), tokenised the way the prefix-cache models expect."""
    sent = request
    if request.documents:
        sent = Request.from_openai(Pipeline([]).run(request).to_openai())
    tokens, _ = request_tokens(sent)
    return as_token_array(tokens)


def load_prompts(
    dataset: str,
    *,
    configs: Sequence[str] = ("baseline",),
    requests: int,
    seed: int = 0,
    max_items: int = 200,
    stream: TextIO | None = None,
) -> dict[str, list[npt.NDArray[np.uint64]]]:
    """``requests`` prompts per config label, from the dataset named by ``dataset`` (a
    ``promptslim.bench`` spec), each item slimmed by the config (``bench`` config specs:
    ``baseline``, ``full``, ``prefix+history``, a config file...).

    At most ``max_items`` distinct items are loaded and slimmed; a longer stream is extended by
    ``extend_stream`` (same seed for every config): a repeat keeps the prefix its prompt shares
    with the dataset's other prompts and is new after it. Repeating whole prompts would let the
    simulated prefix cache skip their prefill: it flattered every config, and ``plan`` gave
    budgets that a server seeing new users' content would not meet.

    Dataset records that cannot be read are skipped, each said on ``stream`` (stderr by
    default), as ``promptslim bench`` says them.
    """
    if requests < 1:
        raise ConfigError(f"expected requests >= 1, got {requests!r}", field="requests")
    loaded = load_dataset(dataset, limit=min(requests, max_items), seed=seed)
    report_skipped(loaded.errors, stream=stream)
    items = loaded.items
    if not items:
        raise ConfigError(f"no readable items in {dataset!r}", field="dataset")
    out: dict[str, list[npt.NDArray[np.uint64]]] = {}
    for config in parse_configs(list(configs)):
        prompts = [prompt_tokens(config.pipeline.run(item.request).request) for item in items]
        out[config.label] = extend_stream(prompts, requests, seed=seed)
    return out


def report_skipped(errors: Sequence[Exception], *, stream: TextIO | None = None) -> None:
    """One line per unreadable dataset record on ``stream`` (stderr by default)."""
    for error in errors:
        print(f"promptslim: skipped {error}", file=stream if stream is not None else sys.stderr)


def extend_stream(
    prompts: Sequence[npt.NDArray[np.uint64]], requests: int, *, seed: int = 0
) -> list[npt.NDArray[np.uint64]]:
    """``requests`` prompts shaped like ``prompts``, for a stream longer than the distinct items
    at hand: the originals first, then, in turn, repeats that keep the longest prefix each
    original shares with another (a system prompt: what a prefix cache may share) and get fresh
    ids, never seen before, for the rest (a new user's content: what no cache holds). Repeating
    whole prompts instead would let a prefix cache skip their prefill and flatter every config.
    """
    if not prompts:
        raise ConfigError("expected at least one prompt", field="prompts")
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(p, dtype=np.uint64) for p in prompts]
    shared = [
        max((_common_prefix(p, q) for j, q in enumerate(arrays) if j != i), default=0)
        for i, p in enumerate(arrays)
    ]
    # fresh ids above any tokenizer's vocabulary: they cannot collide with a real prompt
    fresh_base = np.uint64(1 << 31)
    out = arrays[:requests]
    for k in range(len(arrays), requests):
        i = k % len(arrays)
        fresh = fresh_base + rng.integers(
            0, 1 << 31, size=len(arrays[i]) - shared[i], dtype=np.uint64
        )
        out.append(np.concatenate([arrays[i][: shared[i]], fresh]))
    return out


def _common_prefix(a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64]) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n
