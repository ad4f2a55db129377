"""A native LLMLingua-style compressor: prune the words a small causal LM finds predictable.

LLMLingua keeps the tokens with high self-information ``-log p(x_t | x_<t)`` under a small
LM; LongLLMLingua adds a question-aware coarse step (rank documents, keep the best) and a
dynamic ratio (better-ranked documents keep more). This is that scheme, written for current
transformers and for CPUs, where every token the LM reads costs about as much as prefilling
it in the serving model — so the design is about reading as little as possible:

- **Coarse**: documents ranked by BM25 + upstream retrieval score (``coarse="lexical"``,
  free), with MiniLM similarity added (``"hybrid"``, the retrieval extra, milliseconds), or
  by the LM's likelihood of the question after a short window of each document
  (``"lm"``, LongLLMLingua's ranking: one batched pass over ``window_tokens`` per document).
  Documents are kept in rank order up to ``coarse_keep`` times the budget (1.1 by default,
  about LongLLMLingua's own "budget + 100 tokens" on a 1,000-token budget), so the LM only
  reads what may survive.
- **Dynamic ratio**: each kept document's share of the budget follows its rank, capped at
  its own size (the surplus flows to the others). A document whose share covers it is kept
  whole and never read by the LM.
- **Fine**: the documents left are scored in batches of short rows (one document per row,
  rows of similar length together, so little padding and short attention), one forward pass
  per batch under ``torch.inference_mode``, the question's KV cache computed once and
  shared by every row. Self-information needs the full-vocabulary softmax, but only where a
  token is really scored: the LM head (a fifth of the model's FLOPs here) runs on the hidden
  states of real, unprotected document tokens only — not on padding, the question, or the
  words a protected span forces. Scores are averaged per word and whole words are pruned,
  vectorised (no per-token Python loop).
- Words overlapping a protected span are always kept (byte-exact, never split).

Budgets are in the caller's token counter; the LM's tokens are converted per document by the
ratio of the two counts (the stage re-checks the real count and retries on overshoot).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import BackendError, BackendUnavailable, ConfigError
from ...tokens import TokenCounter
from ..hf_compat import cache_keyword, kv_layers, make_dynamic_cache, output_cache
from ..models import check_quantize
from . import Compressor, Item
from .extractive import ExtractiveCompressor

__all__ = ["LMCompressor"]

_WORD = re.compile(r"\s*\S+")
_COARSE = ("lexical", "hybrid", "lm")
# rows of the LM head computed at once: bounds the (rows x vocabulary) logits buffer
_HEAD_ROWS = 1024
# a row joins a batch only if it fills this share of the batch's width (the rest is padding)
_MIN_FILL = 0.8
# documents whose scores are remembered (see LMCompressor._scores)
_MEMO_SIZE = 256


@dataclass
class _Doc:
    index: int
    words: list[tuple[int, int]]  # char spans, each with its leading whitespace
    ids: list[int]
    token_word: list[int]  # word index of each LM token
    forced: list[bool]  # word overlaps a protected span
    cost_per_token: float  # counter tokens per LM token


class LMCompressor(Compressor):
    """Word pruning by self-information under a causal LM (see the module docstring).

    ``model``: None for the packaged SmolLM2-135M-Instruct, or a local HF causal LM path.
    ``device``: ``cpu``/``cuda``; None picks CUDA when available.
    ``coarse``: ``lexical``, ``hybrid`` (needs the retrieval extra) or ``lm`` document ranking.
    ``coarse_keep``: the coarse step keeps documents up to this multiple of the budget (>= 1;
    the fine step prunes the excess). ``dynamic_ratio``: how much more the best-ranked document
    keeps than the average (0: same ratio everywhere). ``batch_tokens``: LM tokens per forward
    pass (rows x width). ``window_tokens``: document tokens read per row by ``coarse="lm"``.
    """

    name = "lm"

    def __init__(
        self,
        *,
        model: str | None = None,
        device: str | None = None,
        coarse: str = "lexical",
        coarse_keep: float = 1.1,
        dynamic_ratio: float = 0.3,
        batch_tokens: int = 2048,
        window_tokens: int = 64,
        quantize: bool | None = None,
    ) -> None:
        if coarse not in _COARSE:
            raise ConfigError(f"must be one of {', '.join(_COARSE)}, got {coarse!r}", field="coarse")
        if not 1.0 <= coarse_keep <= 10.0:
            raise ConfigError(f"must be between 1 and 10, got {coarse_keep}", field="coarse_keep")
        if not 0.0 <= dynamic_ratio < 1.0:
            raise ConfigError(f"must be in [0, 1), got {dynamic_ratio}", field="dynamic_ratio")
        if batch_tokens < 64:
            raise ConfigError(f"must be at least 64, got {batch_tokens}", field="batch_tokens")
        if window_tokens < 8:
            raise ConfigError(f"must be at least 8, got {window_tokens}", field="window_tokens")
        check_quantize(quantize)
        if quantize and device not in (None, "cpu"):
            raise ConfigError("int8 quantisation runs on CPU only", field="quantize")
        self.model = model
        self.device = device
        self.coarse = coarse
        self.coarse_keep = coarse_keep
        self.dynamic_ratio = dynamic_ratio
        self.batch_tokens = batch_tokens
        self.window_tokens = window_tokens
        self.quantize = quantize
        self._memo: dict[tuple[str, str], Any] = {}

    # ---- the interface

    def compress(
        self, items: Sequence[Item], *, query: str, budget: int, counter: TokenCounter
    ) -> list[str]:
        if not items:
            return []
        lm = self._lm()
        costs = [it.overhead + counter.count(it.text) for it in items]
        kept = self._coarse(items, costs, query, budget, lm)
        if not kept:
            return [""] * len(items)
        shares = self._shares(kept, items, costs, budget)
        out = [""] * len(items)
        pruned: list[tuple[_Doc, float]] = []
        for i, share in zip(kept, shares):
            if share >= costs[i] - items[i].overhead:
                out[i] = items[i].text  # its share covers it: kept whole, the LM never reads it
            else:
                pruned.append((self._prepare(i, items[i], lm, counter), share))
        scores = self._scores([d for d, _ in pruned], items, query, lm)
        for (doc, share), doc_scores in zip(pruned, scores):
            out[doc.index] = _prune(items[doc.index].text, doc, doc_scores, share)
        return out

    # ---- steps

    def _lm(self) -> Any:
        from ..models import default_device, load_causal_lm

        if self.quantize is False:
            return load_causal_lm(self.model, device=self.device)
        # quantize=True without a device: the CPU even where CUDA is there (int8 is CPU-only)
        device = "cpu" if self.quantize else self.device
        if device is None:
            try:
                device = default_device()
            except ImportError:  # no torch: load_causal_lm says what to install
                return load_causal_lm(self.model)
        if device != "cpu":
            return load_causal_lm(self.model, device=device)
        try:
            return load_causal_lm(self.model, device="cpu", quantize=True)
        except BackendUnavailable:
            if self.quantize:
                raise
            return load_causal_lm(self.model, device="cpu")  # a torch without int8 kernels

    def _coarse(
        self, items: Sequence[Item], costs: Sequence[int], query: str, budget: int, lm: Any
    ) -> list[int]:
        """Documents kept by the coarse step, best first: up to ``coarse_keep`` x budget,
        skipping one that alone does not fit what the kept documents' headers leave."""
        if self.coarse == "lm" and query:
            relevance = self._question_likelihood(items, query, lm)
        else:
            ranker = ExtractiveCompressor(embeddings=self.coarse == "hybrid")
            relevance = ranker.document_relevance(items, query)
        order = sorted(range(len(items)), key=lambda i: (-relevance[i], i))
        kept: list[int] = []
        total = overhead = 0
        for i in order:
            if total >= self.coarse_keep * budget or costs[i] > budget - overhead:
                continue
            kept.append(i)
            total += costs[i]
            overhead += items[i].overhead
        return kept

    def _shares(
        self, kept: Sequence[int], items: Sequence[Item], costs: Sequence[int], budget: int
    ) -> list[float]:
        """Each kept document's text budget in counter tokens, summing to the free budget:
        rank-weighted (LongLLMLingua's dynamic ratio), capped at the document's own size with
        the surplus spread over the others in proportion to their weights."""
        sizes = [float(costs[i] - items[i].overhead) for i in kept]
        free = max(0.0, budget - sum(items[i].overhead for i in kept))
        n = len(kept)
        weights = [
            s * (1.0 + self.dynamic_ratio * (1.0 - 2.0 * k / max(1, n - 1))) for k, s in enumerate(sizes)
        ]
        shares = [0.0] * n
        open_ = set(range(n))
        while open_:
            scale = free / (sum(weights[k] for k in open_) or 1.0)
            full = {k for k in open_ if weights[k] * scale >= sizes[k]}
            if not full:
                for k in open_:
                    shares[k] = weights[k] * scale
                break
            for k in full:
                shares[k] = sizes[k]
                free -= sizes[k]
            open_ -= full
        return shares

    def _prepare(self, index: int, item: Item, lm: Any, counter: TokenCounter) -> _Doc:
        import bisect

        text = item.text
        words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
        ends = [e for _, e in words]
        enc = lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids: list[int] = enc["input_ids"]
        # words are contiguous (each carries its leading whitespace), so a token belongs to
        # the word whose span holds its first character; trailing whitespace to the last word
        last = max(0, len(words) - 1)
        token_word = [min(last, bisect.bisect_right(ends, a)) for a, _ in enc["offset_mapping"]]
        forced = [any(p.start < e and p.end > s for p in item.protected) for s, e in words]
        per_token = counter.count(text) / max(1, len(ids))
        return _Doc(index, words, ids, token_word, forced, per_token)

    def _scores(self, docs: Sequence[_Doc], items: Sequence[Item], query: str, lm: Any) -> list[Any]:
        """Self-information per document, remembered by (question, text): a document's scores
        do not depend on the budget, so the stage's retry after a tokenisation overshoot (a
        smaller budget, same documents) costs no second LM pass."""
        keys = [(query, items[d.index].text) for d in docs]
        known = {key: self._memo.get(key) for key in keys}  # a local view: threads share the memo
        missing = [k for k, key in enumerate(keys) if known[key] is None]
        if missing:
            fresh = dict(zip((keys[k] for k in missing), self._self_information([docs[k] for k in missing], query, lm)))
            known.update(fresh)
            if len(self._memo) + len(fresh) > _MEMO_SIZE:
                self._memo.clear()  # one request's documents at a time is all it is for
            self._memo.update(fresh)
        return [known[key] for key in keys]

    # ---- the model passes

    def _self_information(self, docs: Sequence[_Doc], query: str, lm: Any) -> list[Any]:
        """``-log p(token | question, preceding tokens)`` for every scored token of every
        document (0 for tokens of forced words, which are kept anyway), as 1-D tensors."""
        import torch

        tok, model = lm.tokenizer, lm.model
        prefix = tok(f"Question: {query}\nContext:", add_special_tokens=False)["input_ids"] if query else []
        prefix = prefix or [tok.eos_token_id]  # something to condition the first token on
        base, head = model.get_decoder(), model.get_output_embeddings()
        cache_kw = cache_keyword(base)
        out: list[Any] = [None] * len(docs)
        try:
            with torch.inference_mode():
                first = base(input_ids=torch.tensor([prefix], device=lm.device), use_cache=True)
                prefix_cache = kv_layers(output_cache(first))
                prefix_last = first.last_hidden_state[:, -1:, :]  # predicts each row's first token
                for batch in _batches(docs, self.batch_tokens):
                    rows = [docs[b] for b in batch]
                    width = max(len(d.ids) for d in rows)
                    ids = torch.full((len(rows), width), tok.pad_token_id, device=lm.device)
                    real = torch.zeros(len(rows), width, dtype=torch.bool, device=lm.device)
                    scored = torch.zeros_like(real)
                    for r, d in enumerate(rows):
                        ids[r, : len(d.ids)] = torch.tensor(d.ids, device=lm.device)
                        real[r, : len(d.ids)] = True
                        forced = torch.tensor(d.forced, device=lm.device)[torch.tensor(d.token_word, device=lm.device)]
                        scored[r, : len(d.ids)] = ~forced
                    mask = torch.cat(
                        [torch.ones(len(rows), len(prefix), dtype=torch.long, device=lm.device), real.long()], dim=1
                    )
                    hidden = base(
                        input_ids=ids,
                        attention_mask=mask,
                        **{cache_kw: _repeat(prefix_cache, len(rows))},
                        use_cache=True,
                    ).last_hidden_state
                    # the hidden state at t predicts token t+1: shift by one, the question's last first
                    before = torch.cat([prefix_last.expand(len(rows), 1, -1), hidden[:, :-1]], dim=1)
                    info = torch.zeros(len(rows), width, device=lm.device)
                    info[scored] = _surprisal(head, model.config, before[scored], ids[scored])
                    for r, b in enumerate(batch):
                        out[b] = info[r, : len(docs[b].ids)].float().cpu()
        except RuntimeError as exc:
            raise BackendError(str(exc), backend="lm") from exc
        return out

    def _question_likelihood(self, items: Sequence[Item], query: str, lm: Any) -> list[float]:
        """LongLLMLingua's coarse ranking: mean ``log p(question | document window)``, the
        window being each document's first ``window_tokens`` tokens; batched, left-padded, and
        the LM head run only where a question token is predicted."""
        import torch

        tok, model = lm.tokenizer, lm.model
        base, head = model.get_decoder(), model.get_output_embeddings()
        q = tok(f"\nQuestion: {query}", add_special_tokens=False)["input_ids"]
        windows = [tok(it.text, add_special_tokens=False)["input_ids"][: self.window_tokens] for it in items]
        width = max(len(w) for w in windows) + len(q)
        per_batch = max(1, self.batch_tokens // width)
        pad = tok.pad_token_id
        scores: list[float] = []
        try:
            with torch.inference_mode():
                for start in range(0, len(windows), per_batch):
                    chunk = windows[start : start + per_batch]
                    # right-padded: a pad position then attends to the real tokens before it
                    # and its hidden state stays in range. A left pad attends to nothing; on
                    # transformers 5.x its junk activations widened the int8 layers' per-batch
                    # scale and changed every row's scores.
                    ids = torch.tensor([w + q + [pad] * (width - len(w) - len(q)) for w in chunk], device=lm.device)
                    att = torch.tensor(
                        [[1] * (len(w) + len(q)) + [0] * (width - len(w) - len(q)) for w in chunk], device=lm.device
                    )
                    hidden = base(input_ids=ids, attention_mask=att).last_hidden_state
                    # each row's question columns, and the positions that predict them
                    cols = torch.tensor([len(w) for w in chunk], device=lm.device)[:, None]
                    cols = cols + torch.arange(len(q), device=lm.device)[None, :]
                    row = torch.arange(len(chunk), device=lm.device)[:, None]
                    before = hidden[row, cols - 1]
                    info = _surprisal(head, model.config, before.reshape(-1, before.shape[-1]), ids[row, cols].reshape(-1))
                    scores.extend((-info.view(len(chunk), len(q)).mean(-1)).tolist())
        except RuntimeError as exc:
            raise BackendError(str(exc), backend="lm") from exc
        return scores


# ---------------------------------------------------------------- helpers


def _prune(text: str, doc: _Doc, token_scores: Any, share: float) -> str:
    """Keep forced words, then the highest-scoring words (mean self-information of their
    tokens) while they fit ``share``; written back in order."""
    import torch

    n_words = len(doc.words)
    if not n_words:
        return ""
    index = torch.tensor(doc.token_word)
    counts = torch.zeros(n_words).index_add_(0, index, torch.ones(len(doc.token_word)))
    sums = torch.zeros(n_words).index_add_(0, index, token_scores)
    score = sums / counts.clamp(min=1)
    cost = counts.clamp(min=1) * doc.cost_per_token
    forced = torch.tensor(doc.forced)
    room = share - float(cost[forced].sum())
    # best first, ties to the earlier word (stable sort): deterministic
    order = torch.sort(-score, stable=True).indices
    order = order[~forced[order]]
    fits = torch.cumsum(cost[order], 0) <= room
    keep = forced.clone()
    keep[order[fits]] = True
    return "".join(text[s:e] for (s, e), k in zip(doc.words, keep.tolist()) if k).strip()


def _batches(docs: Sequence[_Doc], batch_tokens: int) -> list[list[int]]:
    """Rows grouped longest first, each batch at most ``batch_tokens`` (rows x width) and
    padded by at most a fifth of a row: one long document must not make every short one in
    its batch pay its width (padding is computed like real tokens)."""
    order = sorted(range(len(docs)), key=lambda i: (-len(docs[i].ids), i))
    batches: list[list[int]] = []
    for i in order:
        if batches:
            width = len(docs[batches[-1][0]].ids)
            fits = (len(batches[-1]) + 1) * width <= batch_tokens
            if fits and len(docs[i].ids) >= _MIN_FILL * width:
                batches[-1].append(i)
                continue
        batches.append([i])
    return batches


def _surprisal(head: Any, config: Any, hidden: Any, targets: Any) -> Any:
    """``-log softmax(head(hidden))[target]`` per row, the head applied in slices so the
    (rows x vocabulary) logits never all exist at once."""
    import torch

    cap = getattr(config, "final_logit_softcapping", None)
    parts = []
    for start in range(0, hidden.shape[0], _HEAD_ROWS):
        logits = head(hidden[start : start + _HEAD_ROWS]).float()
        if cap:  # models whose head soft-caps its logits (Gemma 2): score what they predict
            logits = torch.tanh(logits / cap) * cap
        target = logits.gather(-1, targets[start : start + _HEAD_ROWS, None])[:, 0]
        parts.append(torch.logsumexp(logits, dim=-1) - target)
    return torch.cat(parts) if parts else hidden.new_zeros(0)


def _repeat(cache: Any, batch: int) -> Any:
    """A fresh cache holding the question's keys and values for ``batch`` rows (the forward
    pass appends to it, so every batch gets its own)."""
    layers = [tuple(t.expand(batch, *t.shape[1:]).contiguous() for t in layer) for layer in cache]
    return make_dynamic_cache([(k, v) for k, v in layers])
