"""Summarisers for the history stage, behind one interface, looked up by name in ``SUMMARISERS``.

- ``extractive`` (default): no model. Picks the most salient sentences (names, numbers,
  identifiers, decisions, open questions) under a token cap. Deterministic and fast.
- ``lm``: a local Hugging Face causal LM through ``load_causal_lm`` (default: the packaged
  SmolLM2-135M-Instruct; any local path or GGUF file). Greedy decoding, so deterministic.
- ``openai``: any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp, OpenAI...),
  called with the standard library and a timeout. Failures raise ``BackendError``; the history
  stage then falls back to ``extractive`` and says so in its report.

A summariser turns a span of messages (plus, for a rolling summary, the previous summary's text)
into text of at most ``max_tokens`` tokens in the request's counter::

    text = SUMMARISERS.get("extractive")().summarise(messages, max_tokens=200, counter=counter)

Summaries are cached by the history stage through ``SummaryCache`` (``get``/``set`` of strings
by key): ``LRUSummaryCache`` in memory by default; ``SqliteSummaryCache`` (``summary_store``)
shares one file between the processes of a host; anything with the same two methods (a Redis
client wrapper, say) can be shared further.

The interface is in ``summariser_base``, the cache in ``summary_cache``, the extractive
summariser in ``extractive`` and the model-based ones in ``lm_summarisers``; all re-exported here.
"""

from __future__ import annotations

from ..registry import Registry
from .extractive import (  # noqa: F401  (re-exported: tests read the extractive internals here)
    _CJK_CHAR,
    _DECISION_STEMS,
    _FILLER,
    _GATED_KINDS,
    _LATIN_NAME,
    _ZH_DECISIONS,
    ExtractiveSummariser,
    _message_lines,
    _salience,
    _score,
)
from .lm_summarisers import LMSummariser, OpenAISummariser
from .summariser_base import INSTRUCTION, Summariser, clip_to_tokens, render_transcript
from .summary_cache import LRUSummaryCache, SummaryCache

__all__ = [
    "INSTRUCTION",
    "SUMMARISERS",
    "ExtractiveSummariser",
    "LMSummariser",
    "LRUSummaryCache",
    "OpenAISummariser",
    "Summariser",
    "SummaryCache",
    "clip_to_tokens",
    "render_transcript",
]

#: Summariser classes by name; ``HistoryStage(summariser="lm")`` looks them up here.
SUMMARISERS: Registry[type[Summariser]] = Registry("summariser")
SUMMARISERS.register("extractive", ExtractiveSummariser)
SUMMARISERS.register("lm", LMSummariser)
SUMMARISERS.register("openai", OpenAISummariser)
