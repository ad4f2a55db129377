"""A batch-size-1 cost model from one client's requests: fixed overhead, per-token prefill and
per-token decode cost, fitted from measurements taken one request at a time.

With prompts of a single size, client TTFT alone cannot split a fixed overhead from a per-token
cost (one point fixes only their sum). Servers built on llama.cpp log their own timings per
request (``llama_perf_context_print: prompt eval time = ... ms / N tokens``); with those the
split is measured: the per-token cost is the server's prompt-eval time per token, the overhead
is what the client waited beyond it (template, tokenisation, HTTP). Without them the whole TTFT
is charged per token (``a = 0``), the proportional model.

Medians throughout: on a shared machine a few requests are slowed by other jobs, and a mean
would move the whole fit with them.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..errors import ConfigError
from .costmodel import CostModel

__all__ = ["ServerTiming", "SingleStreamFit", "fit_single_stream", "parse_llama_perf"]

_PROMPT = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
# "eval time" also ends "prompt eval time": the negative look-behind keeps them apart
_EVAL = re.compile(r"(?<!prompt )eval time =\s*([\d.]+) ms /\s*(\d+) runs")


@dataclass(frozen=True)
class ServerTiming:
    """What the server says one request cost: prompt evaluation and generation (seconds)."""

    prefill_s: float
    prefill_tokens: int
    decode_s: float = 0.0
    decode_tokens: int = 0


def parse_llama_perf(text: str) -> list[ServerTiming]:
    """Per-request timings from a llama.cpp (or llama-cpp-python ``verbose``) server log, in
    the order the server finished them. A request whose prompt was entirely reused from the
    previous one logs no prompt eval and is skipped, as is a block cut off mid-write."""
    out: list[ServerTiming] = []
    prompt: tuple[float, int] | None = None
    for line in text.split("\n"):  # not splitlines(): U+2028/U+0085 in a log line are not ends
        m = _PROMPT.search(line)
        if m:
            prompt = (float(m.group(1)) / 1000, int(m.group(2)))
            continue
        m = _EVAL.search(line)
        if m and prompt is not None:
            out.append(
                ServerTiming(prompt[0], prompt[1], float(m.group(1)) / 1000, int(m.group(2)))
            )
            prompt = None
    return out


@dataclass(frozen=True)
class SingleStreamFit:
    """The fitted model and what it was fitted from."""

    cost: CostModel
    #: tokens the server counted beyond the client's count (chat template), median
    template_tokens: int
    source: str  # "server timings" | "client TTFT only"
    requests: int

    def as_dict(self) -> dict[str, object]:
        return {
            "cost_model": self.cost.as_dict(),
            "template_tokens": self.template_tokens,
            "source": self.source,
            "requests": self.requests,
        }


def fit_single_stream(
    prompt_tokens: Sequence[int],
    ttft_s: Sequence[float],
    tpot_s: Sequence[float | None],
    server: Sequence[ServerTiming] | None = None,
) -> SingleStreamFit:
    """Fit ``a`` (fixed overhead), ``b`` (prefill per token) and the decode cost
    (``decode_step_s`` + ``decode_per_seq_s`` for one sequence, split as ``_with_decode``
    says) from requests sent one at a time (nothing queued: TTFT is service time).

    ``prompt_tokens``/``ttft_s``/``tpot_s`` are per request on the client's side (``tpot_s``
    None where fewer than two tokens came back); ``server``, when given, holds the same requests'
    server timings in the same order. The decode cost is the client's TPOT, not the server's
    eval time: between tokens the server also streams, and that keeps the next request waiting
    just the same.
    """
    n = len(prompt_tokens)
    if n == 0 or len(ttft_s) != n or len(tpot_s) != n:
        raise ConfigError("expected the same non-empty number of each measurement", field="fit")
    if server is not None and len(server) != n:
        raise ConfigError(
            f"{len(server)} server timings for {n} requests: cannot pair them", field="fit"
        )
    tpots = [t for t in tpot_s if t is not None]
    decode = statistics.median(tpots) if tpots else 0.0
    if server:
        per_token = statistics.median(s.prefill_s / s.prefill_tokens for s in server)
        template = round(
            statistics.median(
                s.prefill_tokens - p for s, p in zip(server, prompt_tokens, strict=True)
            )
        )
        # overhead: the client's wait beyond the server's own prompt evaluation
        overhead = statistics.median(t - s.prefill_s for t, s in zip(ttft_s, server, strict=True))
        cost = _with_decode(CostModel(a=max(0.0, overhead), b=per_token), decode)
        return SingleStreamFit(cost, template, "server timings", n)
    per_token = statistics.median(
        t / p for t, p in zip(ttft_s, prompt_tokens, strict=True) if p > 0
    )
    return SingleStreamFit(_with_decode(CostModel(b=per_token), decode), 0, "client TTFT only", n)


def _with_decode(prefill: CostModel, decode_s: float) -> CostModel:
    """``prefill`` with the decode cost of one sequence split into the step's own part and a
    part per sequence. A step that decodes ``m`` sequences is one forward pass over ``m``
    tokens: each sequence beyond the first adds what one more token of a pass costs, the
    per-token prefill cost ``b``; the rest of a one-sequence step (reading the weights, the
    pass's fixed work, streaming the token) is paid once per step. One sequence still costs
    ``decode_s`` in all, so a batch-1 server is simulated as before."""
    per_seq = min(prefill.b, decode_s)
    return replace(prefill, decode_step_s=decode_s - per_seq, decode_per_seq_s=per_seq)
