"""A native LLMLingua-style compressor: prune the words a small causal LM finds predictable.

LLMLingua keeps the tokens with high self-information ``-log p(x_t | x_<t)`` under a small
LM; LongLLMLingua adds a question-aware coarse step (rank documents, keep the best) and a
dynamic ratio (better-ranked documents keep more). This is that scheme, written for current
transformers and for CPUs:

- **Coarse**: documents ranked by lexical/retrieval relevance (``coarse="lexical"``, free) or
  by the LM's likelihood of the question given the document (``coarse="lm"``, LongLLMLingua's
  ranking: one batched pass). Documents are kept in rank order up to ``coarse_keep`` times
  the budget, so the LM only reads what may survive — its cost stays below the prefill saved.
- **Fine**: one batched forward pass per chunk over ``question + document`` rows, under
  ``torch.inference_mode``. The question's KV cache is computed once and shared by every row;
  a document longer than ``chunk_tokens`` is read in chunks that carry the cache forward.
  Self-information is averaged over each word's tokens and whole words are pruned, so no
  word is cut in half. Each document's share follows its rank (``dynamic_ratio``).
- Words overlapping a protected span are always kept (byte-exact, never split).

Budgets are in the caller's token counter; the LM's tokens are converted per document by the
ratio of the two counts (the stage re-checks the real count and retries on overshoot).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import BackendError, ConfigError
from ...tokens import TokenCounter
from . import Compressor, Item
from .extractive import ExtractiveCompressor

__all__ = ["LMCompressor"]

_WORD = re.compile(r"\s*\S+")
_COARSE = ("lexical", "lm")


@dataclass
class _Doc:
    index: int
    words: list[tuple[int, int]]  # char spans, each with its leading whitespace
    ids: list[int]
    token_word: list[int]  # word index of each LM token
    forced: list[bool]  # word overlaps a protected span
    cost_per_token: float  # counter tokens per LM token


class LMCompressor(Compressor):
    """Token (word) pruning by self-information under a causal LM (see the module docstring).

    ``model``: None for the packaged SmolLM2-135M-Instruct, or a local HF causal LM path.
    ``device``: ``cpu``/``cuda``; None picks CUDA when available.
    ``coarse``: ``lexical`` or ``lm`` document ranking. ``coarse_keep``: the coarse step keeps
    documents up to this multiple of the budget (>= 1). ``dynamic_ratio``: how much more the
    best-ranked document keeps than the average (0: same ratio everywhere).
    ``chunk_tokens``: longest stretch of a row read in one forward pass.
    """

    name = "lm"

    def __init__(
        self,
        *,
        model: str | None = None,
        device: str | None = None,
        coarse: str = "lexical",
        coarse_keep: float = 1.3,
        dynamic_ratio: float = 0.3,
        chunk_tokens: int = 512,
    ) -> None:
        if coarse not in _COARSE:
            raise ConfigError(f"must be one of {', '.join(_COARSE)}, got {coarse!r}", field="coarse")
        if not 1.0 <= coarse_keep <= 10.0:
            raise ConfigError(f"must be between 1 and 10, got {coarse_keep}", field="coarse_keep")
        if not 0.0 <= dynamic_ratio < 1.0:
            raise ConfigError(f"must be in [0, 1), got {dynamic_ratio}", field="dynamic_ratio")
        if chunk_tokens < 16:
            raise ConfigError(f"must be at least 16, got {chunk_tokens}", field="chunk_tokens")
        self.model = model
        self.device = device
        self.coarse = coarse
        self.coarse_keep = coarse_keep
        self.dynamic_ratio = dynamic_ratio
        self.chunk_tokens = chunk_tokens

    # ---- the interface

    def compress(
        self, items: Sequence[Item], *, query: str, budget: int, counter: TokenCounter
    ) -> list[str]:
        if not items:
            return []
        lm = self._lm()
        costs = [it.overhead + counter.count(it.text) for it in items]
        order = self._rank(items, query, lm)
        kept: list[int] = []
        total = 0
        for i in order:  # coarse: best documents first, up to coarse_keep x budget
            if total >= self.coarse_keep * budget or costs[i] > budget - sum(items[k].overhead for k in kept):
                continue
            kept.append(i)
            total += costs[i]
        if not kept:
            return [""] * len(items)
        docs = [self._prepare(i, items[i], lm, counter) for i in kept]
        scores = self._self_information(docs, query, lm)
        shares = self._shares(docs, items, budget, counter)
        out = [""] * len(items)
        for doc, doc_scores, share in zip(docs, scores, shares):
            out[doc.index] = self._prune(items[doc.index].text, doc, doc_scores, share)
        return out

    # ---- steps

    def _lm(self) -> Any:
        from ..models import load_causal_lm

        return load_causal_lm(self.model, device=self.device)

    def _rank(self, items: Sequence[Item], query: str, lm: Any) -> list[int]:
        if self.coarse == "lm" and query:
            relevance = self._question_likelihood(items, query, lm)
        else:
            relevance = ExtractiveCompressor().document_relevance(items, query)
        return sorted(range(len(items)), key=lambda i: (-relevance[i], i))

    def _prepare(self, index: int, item: Item, lm: Any, counter: TokenCounter) -> _Doc:
        text = item.text
        words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
        enc = lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids: list[int] = enc["input_ids"]
        starts = [m.end() - len(m.group().lstrip()) for m in _WORD.finditer(text)]
        token_word: list[int] = []
        w = 0
        for a, b in enc["offset_mapping"]:
            # a token belongs to the word in which its first non-space character lies
            pos = a + (len(text[a:b]) - len(text[a:b].lstrip()))
            while w + 1 < len(words) and pos >= starts[w + 1]:
                w += 1
            token_word.append(w)
        forced = [any(p.start < e and p.end > s for p in item.protected) for s, e in words]
        per_token = counter.count(text) / max(1, len(ids))
        return _Doc(index, words, ids, token_word, forced, per_token)

    def _shares(
        self, docs: Sequence[_Doc], items: Sequence[Item], budget: int, counter: TokenCounter
    ) -> list[float]:
        """Each kept document's budget in counter tokens: rank-weighted (better-ranked
        documents keep more, LongLLMLingua's dynamic ratio), summing to the budget."""
        free = budget - sum(items[d.index].overhead for d in docs)
        n = len(docs)
        weights = [
            len(d.ids) * d.cost_per_token * (1.0 + self.dynamic_ratio * (1.0 - 2.0 * k / max(1, n - 1)))
            for k, d in enumerate(docs)
        ]
        scale = max(0.0, free) / (sum(weights) or 1.0)
        return [w * scale for w in weights]

    def _prune(self, text: str, doc: _Doc, token_scores: Sequence[float], share: float) -> str:
        n_words = len(doc.words)
        sums = [0.0] * n_words
        counts = [0] * n_words
        for w, s in zip(doc.token_word, token_scores):
            sums[w] += s
            counts[w] += 1
        score = [sums[w] / counts[w] if counts[w] else 0.0 for w in range(n_words)]
        cost = [max(1, counts[w]) * doc.cost_per_token for w in range(n_words)]
        keep = list(doc.forced)
        spent = sum(c for c, k in zip(cost, keep) if k)
        for w in sorted(range(n_words), key=lambda w: (-score[w], w)):
            if keep[w] or spent + cost[w] > share:
                continue
            keep[w] = True
            spent += cost[w]
        return "".join(text[s:e] for (s, e), k in zip(doc.words, keep) if k).strip()

    # ---- the model passes

    def _self_information(self, docs: Sequence[_Doc], query: str, lm: Any) -> list[list[float]]:
        """``-log p(token | question, preceding tokens)`` for every token of every document:
        rows batched, the question's KV cache computed once and shared."""
        import torch

        tok, model = lm.tokenizer, lm.model
        prefix = tok(f"Question: {query}\nContext:", add_special_tokens=False)["input_ids"] if query else []
        if not prefix:
            prefix = [tok.eos_token_id]  # something to condition the first token on
        rows = [d.ids for d in docs]
        width = max(len(r) for r in rows)
        pad = tok.pad_token_id
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=lm.device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=lm.device)
        batch = len(rows)
        try:
            with torch.inference_mode():
                p = torch.tensor([prefix], device=lm.device)
                out = model(input_ids=p, past_key_values=_new_cache(), use_cache=True)
                cache = _repeat_cache(out.past_key_values, batch)
                last_logits = out.logits[:, -1:, :].expand(batch, 1, -1)
                info = torch.zeros(batch, width, device=lm.device)
                done = 0
                while done < width:
                    end = min(width, done + self.chunk_tokens)
                    full_mask = torch.cat(
                        [torch.ones(batch, len(prefix), dtype=mask.dtype, device=lm.device), mask[:, :end]], dim=1
                    )
                    out = model(
                        input_ids=ids[:, done:end],
                        attention_mask=full_mask,
                        past_key_values=cache,
                        use_cache=True,
                    )
                    cache = out.past_key_values
                    # logits at t predict t+1: prepend the logit that predicts this chunk's first token
                    logits = torch.cat([last_logits, out.logits[:, :-1, :]], dim=1)
                    logp = torch.log_softmax(logits.float(), dim=-1)
                    info[:, done:end] = -logp.gather(-1, ids[:, done:end, None])[..., 0]
                    last_logits = out.logits[:, -1:, :]
                    done = end
        except RuntimeError as exc:
            raise BackendError(str(exc), backend="lm") from exc
        values = info.cpu().tolist()
        return [v[: len(r)] for v, r in zip(values, rows)]

    def _question_likelihood(self, items: Sequence[Item], query: str, lm: Any) -> list[float]:
        """LongLLMLingua's coarse ranking: mean ``log p(question | document)``, batched."""
        import torch

        tok, model = lm.tokenizer, lm.model
        q = tok(f"\nQuestion: {query}", add_special_tokens=False)["input_ids"]
        docs = [tok(it.text, add_special_tokens=False)["input_ids"][-self.chunk_tokens :] for it in items]
        width = max(len(d) for d in docs) + len(q)
        pad = tok.pad_token_id
        # left-pad so the question sits at the same columns in every row
        rows = [[pad] * (width - len(d) - len(q)) + d + q for d in docs]
        mask = [[0] * (width - len(d) - len(q)) + [1] * (len(d) + len(q)) for d in docs]
        scores: list[float] = []
        with torch.inference_mode():
            for start in range(0, len(rows), 8):
                ids = torch.tensor(rows[start : start + 8], device=lm.device)
                att = torch.tensor(mask[start : start + 8], device=lm.device)
                pos = (att.cumsum(-1) - 1).clamp(min=0)
                logits = model(input_ids=ids, attention_mask=att, position_ids=pos).logits
                logp = torch.log_softmax(logits[:, -len(q) - 1 : -1, :].float(), dim=-1)
                target = ids[:, -len(q) :, None]
                scores.extend(logp.gather(-1, target)[..., 0].mean(-1).tolist())
        return scores


def _new_cache() -> Any:
    """An empty Cache object (current transformers deprecate the legacy tuples)."""
    try:
        from transformers import DynamicCache
    except ImportError:  # very old transformers: legacy tuples it is
        return None
    return DynamicCache()


def _repeat_cache(cache: Any, batch: int) -> Any:
    """The question's KV cache repeated for every row (a Cache object or legacy tuples)."""
    if batch == 1:
        return cache
    if hasattr(cache, "batch_repeat_interleave"):
        cache.batch_repeat_interleave(batch)
        return cache
    return tuple(tuple(t.expand(batch, *t.shape[1:]).contiguous() for t in layer) for layer in cache)
