"""``gpu_prefill.py``'s timing primitives: one forward pass (eager or as a CUDA graph), decode
steps over a KV cache, a suffix after a cached prefix, each synchronised and repeated, and
milliseconds summarised. torch is imported where used: the prompts step needs none."""

from __future__ import annotations

import statistics
import time
from typing import Any

__all__ = [
    "fastest_pass",
    "forward",
    "graph_error",
    "ms",
    "sync",
    "time_cached",
    "time_decode",
    "time_pass",
]


def forward(model: Any, x: Any, **kwargs: Any) -> Any:
    """The decoder over ``x`` and the LM head over the last position only."""
    out = model.get_decoder()(input_ids=x, **kwargs)
    model.get_output_embeddings()(out.last_hidden_state[:, -1:])
    return out


def sync(x: Any) -> None:
    import torch

    if x.is_cuda:
        torch.cuda.synchronize()


def time_pass(model: Any, x: Any, repeats: int, graph: bool = False) -> list[float]:
    """Seconds per forward pass over ``x`` (batch, tokens), after an untimed warm-up.

    ``graph``: the pass captured once as a CUDA graph and replayed, as serving engines run
    their passes; what is timed is then the GPU's work, without the hundreds of kernel launches
    that eager transformers issues from Python for every pass (about 20 ms here for 32 layers:
    a floor under every eager pass that no engine pays)."""
    import torch

    times = []
    with torch.inference_mode():
        if graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the default stream, as capture wants
                for _ in range(2):
                    forward(model, x, use_cache=False)
            torch.cuda.current_stream().wait_stream(side)
            captured = torch.cuda.CUDAGraph()
            with torch.cuda.graph(captured):
                forward(model, x, use_cache=False)
            run = captured.replay
        else:
            forward(model, x, use_cache=False)

            def run() -> None:
                forward(model, x, use_cache=False)

        for _ in range(repeats):
            sync(x)
            start = time.perf_counter()
            run()
            sync(x)
            times.append(time.perf_counter() - start)
    if graph:
        del captured  # its memory pool holds this shape's activations
        torch.cuda.empty_cache()
    return times


def fastest_pass(model: Any, x: Any, repeats: int, graph: bool) -> list[float]:
    """The pass timed eagerly and, with ``graph``, replayed: the times of the faster way
    (see ``cost_points`` for why the faster one is the better bound)."""
    eager = time_pass(model, x, repeats)
    if not graph:
        return eager
    replayed = time_pass(model, x, repeats, graph=True)
    return min(eager, replayed, key=statistics.median)


def graph_error(model: Any, x: Any) -> str | None:
    """Why a pass cannot be captured as a CUDA graph here (None: it can)."""
    if not x.is_cuda:
        return "not a CUDA device"
    try:
        time_pass(model, x, 1, graph=True)
    except (RuntimeError, TypeError, ValueError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


def time_decode(model: Any, batch: int, context: int, steps: int) -> list[float]:
    """Seconds per decode step of ``batch`` sequences holding ``context`` tokens each."""
    import torch

    vocab, device = model.config.vocab_size, model.device
    times = []
    with torch.inference_mode():
        x = torch.randint(0, vocab, (batch, context), device=device)
        cache = forward(model, x, use_cache=True).past_key_values
        token = torch.randint(0, vocab, (batch, 1), device=device)
        for i in range(steps + 2):  # two warm-up steps
            sync(token)
            start = time.perf_counter()
            cache = forward(model, token, past_key_values=cache, use_cache=True).past_key_values
            sync(token)
            if i >= 2:
                times.append(time.perf_counter() - start)
    del cache
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return times


def time_cached(model: Any, prefix: Any, suffix: Any, repeats: int) -> list[float]:
    """Seconds to prefill ``suffix`` with ``prefix`` already in the KV cache (what a prefix-cache
    hit leaves to compute). The prefix is recomputed, untimed, before each timed pass."""
    import torch

    times = []
    with torch.inference_mode():
        for i in range(repeats + 1):  # the first pass is a warm-up
            cache = None
            if prefix.shape[1]:
                cache = forward(model, prefix, use_cache=True).past_key_values
            sync(suffix)
            start = time.perf_counter()
            forward(model, suffix, past_key_values=cache, use_cache=True)
            sync(suffix)
            if i:
                times.append(time.perf_counter() - start)
            del cache
    return times


def ms(xs: list[float]) -> dict[str, float]:
    return {
        "p50": 1e3 * statistics.median(xs),
        "min": 1e3 * min(xs),
        "max": 1e3 * max(xs),
        "n": len(xs),
    }
