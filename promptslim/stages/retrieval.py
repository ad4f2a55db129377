"""The retrieval stage: keep the retrieved documents worth their tokens, in a useful order.

Top-k is usually set once and set too high, and retrieved passages are usually the bulk of a
RAG prompt. This stage re-scores ``Request.documents`` against the query and keeps::

    k = min(max_k,                      a hard cap
            what fits the documents budget (promptslim.budget.allocate),
            the relevance cut-off)      the head before the largest score gap ("gap"), or the
                                        documents within ``cutoff_fraction`` of the best on the
                                        scale from the worst candidate to the best ("fraction")

The default cut-off is ``fraction`` at 0.5: a document stays when its score is closer to the
best candidate's than to the worst's. It asks nothing of the score scale (it is invariant to
shifting and scaling, so it means the same for BM25, cosine and fused scores) and it keeps every
document that is about as good as the best, where the sharper ``gap`` rule bets everything on
one gap being the edge of the relevant set. k is then
never fewer than ``min_k`` (default 1: a request that came with documents keeps at least one;
``min_k=0`` allows none, when none fits the budget). Among the documents that can be kept,
near-duplicates of a better one are removed (embedding cosine, or word-shingle overlap when there are no
embeddings); optionally MMR trades relevance for diversity. Kept documents keep their ids and
metadata, get ``score`` set, and are ordered by score, in their original order, or at the
``edges`` (best first, second best last: models read the ends of a long context best, Liu et
al. 2023, "Lost in the Middle"). Every dropped document is in the report with its score and
the reason; empty documents are dropped and reported, never fatal.

When even the best document alone does not fit the documents budget, the default
(``on_overflow="keep_best"``) keeps it anyway, says so in a warning and in
``details["over_budget"]``, and leaves it to the compress stage to shrink it (the pipeline
raises ``BudgetInfeasible`` at the end if nothing does); ``"drop"`` keeps none and
``"raise"`` raises ``BudgetInfeasible`` at once.

Scoring is lazy and pluggable (``promptslim.backends.scorers.SCORERS``): ``scorer="bm25"``
never imports torch; dense scoring reuses precomputed ``Document.embedding`` vectors and the
shared embedding cache.

Long documents are scored by their parts (``promptslim.stages.windows``): each is cut into
sentence-aligned windows of about ``window_chars`` characters (paragraph breaks preferred, one
sentence shared between neighbours; at most ``max_windows`` per request), every window is
scored by the scorer (BM25 and the dense model each see windows, not whole chunks), and a
document's score is its best window's; the ``fraction`` cut-off then runs on the scale from the
worst window to the best, as if every window were a passage of its own. A document of about
one window is scored exactly as before. Then, coarse to fine (``select_within``), of each kept
long document only the windows that pass the same cut-off stay (its best always), with the
sentence before each and, when it has no title, its first sentence: whole sentences,
byte-exact, protected spans never split. The report lists the sentences kept of each
document (a ``compressed`` change, and ``details["kept_parts"]``: character spans of the
original). This lives here rather than in the compress stage because the window scores
(dense and lexical) are already computed here; the compress stage's extractive compressor
is lexical only and would pay for a second, weaker scoring.

Chinese and other non-Latin text: BM25 uses ``text.analyse`` (jieba words or character
bigrams); with the default English MiniLM, ``dense``/``hybrid`` score such text with BM25 only
and say so in a warning (a multilingual model given as ``model=`` is used as given).
Near-duplicate shingles count each CJK character as a token.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from ..backends.models import check_quantize
from ..backends.scorers import DEFAULT_MAX_SEQ_LENGTH
from ..budget import allocate
from ..errors import BudgetInfeasible, ConfigError
from ..tokens import count_document
from ..types import Budget, Document, Request
from .base import BaseStage, StageLog, run_with_fallback
from .windows import (
    Selection,
    Windowed,
    document_scores,
    document_vectors,
    select_parts,
    split_windows,
    whole_documents,
    window_embeddings,
)

if TYPE_CHECKING:
    import numpy as np

    from ..backends.scorers import Scorer

__all__ = ["RetrievalStage", "relevance_cutoff"]

Cutoff = Literal["gap", "fraction", "none"]
Order = Literal["score", "original", "edges"]
Dedup = Literal["auto", "embedding", "shingle", "none"]
OnOverflow = Literal["keep_best", "drop", "raise"]

_Parts = tuple[Windowed, "np.ndarray"]
#: characters per scoring window of a long document, and the most windows of one request
DEFAULT_WINDOW_CHARS = 600
DEFAULT_MAX_WINDOWS = 64

#: default near-duplicate thresholds: cosine of unit embeddings, Jaccard of word 5-shingles
DEFAULT_COSINE_THRESHOLD = 0.95
DEFAULT_SHINGLE_THRESHOLD = 0.8
_SHINGLE = 5
# a CJK character is a shingle token of its own: Chinese text has no spaces between words
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORDS = re.compile(f"[{_CJK_CHARS}]|[^\\W{_CJK_CHARS}]+")


def _choice(value: object, allowed: Sequence[str], field: str) -> None:
    if value not in allowed:
        raise ConfigError(f"expected one of {', '.join(allowed)}, got {value!r}", field=field)


# ---------------------------------------------------------------- policy (pure functions)


def relevance_cutoff(
    scores: Sequence[float], *, rule: Cutoff, fraction: float, window: int | None = None
) -> int:
    """How many of ``scores`` (sorted best first) pass the relevance cut-off.

    Both rules are invariant to shifting and scaling the scores, so they mean the same for
    BM25, cosine and fused scores. ``gap``: cut at the largest drop between neighbours among
    the first ``window + 1`` scores. ``fraction``: keep scores at least ``fraction`` of the way
    from the worst candidate to the best. ``none``: keep all.
    """
    n = len(scores)
    if n <= 1 or rule == "none":
        return n
    top, low = float(scores[0]), float(min(scores))
    if top - low <= 1e-12:  # nothing tells the candidates apart
        return n
    if rule == "fraction":
        threshold = low + fraction * (top - low)
        return sum(1 for s in scores if s >= threshold - 1e-12)
    m = n if window is None else min(n, window + 1)
    gaps = [float(scores[i]) - float(scores[i + 1]) for i in range(m - 1)]
    if not gaps:
        return min(n, window or n)
    return 1 + max(range(len(gaps)), key=lambda i: (gaps[i], -i))


def _edges(items: list[int]) -> list[int]:
    """Best first, second best last, third second, fourth second to last...: the middle of the
    context gets the least relevant documents."""
    front: list[int] = []
    back: list[int] = []
    for i, item in enumerate(items):
        (front if i % 2 == 0 else back).append(item)
    return front + back[::-1]


@lru_cache(maxsize=8192)  # documents recur across requests
def _shingles(text: str) -> frozenset[str]:
    words = _WORDS.findall(text.lower())
    if len(words) <= _SHINGLE:
        return frozenset([" ".join(words)])
    return frozenset(" ".join(words[i : i + _SHINGLE]) for i in range(len(words) - _SHINGLE + 1))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


# ---------------------------------------------------------------- the stage


class RetrievalStage(BaseStage):
    """Cap the retrieved documents by relevance, budget and a hard cap; dedupe; order.

    ``scorer``: a name in ``SCORERS`` (``hybrid``, ``bm25``, ``dense``, ``cross_encoder``) or a
    :class:`~promptslim.backends.scorers.Scorer` instance. ``model``: the embedding model for
    ``dense``/``hybrid``, or the cross-encoder for ``cross_encoder``. ``max_seq_length``:
    word pieces of each passage the embedder reads (default 64, a quarter of MiniLM's own 256:
    a passage's topic is in its head, and the encoder's cost grows with length).
    ``backend``: ``torch``, ``onnx`` (the model exported once and run by onnxruntime on the
    CPU; extra ``onnx``) or ``auto`` (the default: ONNX when onnxruntime is installed and
    there is no GPU). ``quantize``: embed with the int8 copy of the model (True; CPU only),
    the float one (False), or int8 on a CPU and float on a GPU (None, the default). int8
    vectors are not a vector store's float ones, so a request that brings its own vectors is
    embedded with the float model. These defaults took a cold request (20 fresh passages) on
    two cores from 400-500 ms to about 80 ms at the median, at unchanged recall of the default
    policy; see :class:`~promptslim.backends.scorers.DenseScorer`. ``dense_candidates``: for ``hybrid``,
    embed only BM25's best this many documents (a cascade; None embeds all).
    ``dedup_threshold``: None takes the method's default (cosine 0.95, shingle Jaccard 0.8).
    ``mmr_lambda``: None turns MMR off; 1.0 is pure relevance, 0.0 pure diversity.
    ``window_chars`` (None: whole documents), ``window_overlap`` (sentences),
    ``max_windows``: how long documents are cut for scoring (see the module docstring).
    ``select_within``: keep only the matching parts of kept long documents;
    ``select_fraction`` (None: ``cutoff_fraction``) is their cut-off, ``neighbour_fraction``
    (None: off) a lower one for the neighbours of a kept window, ``context_sentences`` and
    ``context_after`` the sentences kept before and after each kept window.
    A scorer other than BM25 that is missing (extra not installed), fails or runs past
    ``time_limit_ms`` is replaced by BM25 for that request, with a warning; ``strict=True``
    raises instead.
    """

    name = "retrieval"

    def __init__(
        self,
        *,
        scorer: str | Scorer = "hybrid",
        model: str | None = None,
        max_seq_length: int | None = DEFAULT_MAX_SEQ_LENGTH,
        backend: Literal["torch", "onnx", "auto"] = "auto",
        quantize: bool | None = None,
        fusion: Literal["weighted", "rrf"] = "weighted",
        dense_weight: float = 0.5,
        dense_candidates: int | None = None,
        max_k: int | None = 10,
        min_k: int = 1,
        cutoff: Cutoff = "fraction",
        cutoff_fraction: float = 0.5,
        dedup: Dedup = "auto",
        dedup_threshold: float | None = None,
        mmr_lambda: float | None = None,
        order: Order = "edges",
        on_overflow: OnOverflow = "keep_best",
        strict: bool = False,
        time_limit_ms: float | None = None,
        window_chars: int | None = DEFAULT_WINDOW_CHARS,
        window_overlap: int = 1,
        max_windows: int = DEFAULT_MAX_WINDOWS,
        select_within: bool = True,
        select_fraction: float | None = None,
        context_sentences: int = 1,
        context_after: int = 0,
        neighbour_fraction: float | None = None,
    ) -> None:
        from ..backends.scorers import SCORERS, Scorer

        if isinstance(scorer, str):
            SCORERS.get(scorer, field="scorer")  # unknown names fail here, listing known ones
        elif not isinstance(scorer, Scorer):
            raise ConfigError("expected a scorer name or a Scorer", field="scorer")
        if max_k is not None and max_k < 1:
            raise ConfigError("must be at least 1 (None: no cap)", field="max_k")
        if min_k < 0:
            raise ConfigError("must be 0 or more", field="min_k")
        if max_k is not None and min_k > max_k:
            raise ConfigError("must not exceed max_k", field="min_k")
        if max_seq_length is not None and max_seq_length < 1:
            raise ConfigError("must be a positive number of word pieces", field="max_seq_length")
        if dense_candidates is not None and dense_candidates < 1:
            raise ConfigError("must be at least 1 (None: embed all)", field="dense_candidates")
        _choice(backend, ("torch", "onnx", "auto"), "backend")
        check_quantize(quantize)
        _choice(fusion, ("weighted", "rrf"), "fusion")
        _choice(cutoff, ("gap", "fraction", "none"), "cutoff")
        _choice(dedup, ("auto", "embedding", "shingle", "none"), "dedup")
        _choice(order, ("score", "original", "edges"), "order")
        _choice(on_overflow, ("keep_best", "drop", "raise"), "on_overflow")
        if not 0.0 <= dense_weight <= 1.0:
            raise ConfigError("must be between 0 and 1", field="dense_weight")
        if not 0.0 <= cutoff_fraction <= 1.0:
            raise ConfigError("must be between 0 and 1", field="cutoff_fraction")
        if dedup_threshold is not None and not 0.0 < dedup_threshold <= 1.0:
            raise ConfigError("must be in (0, 1]", field="dedup_threshold")
        if mmr_lambda is not None and not 0.0 <= mmr_lambda <= 1.0:
            raise ConfigError("must be between 0 and 1 (None: no MMR)", field="mmr_lambda")
        if time_limit_ms is not None and not (
            isinstance(time_limit_ms, (int, float)) and time_limit_ms > 0
        ):
            raise ConfigError("must be a positive number or None", field="time_limit_ms")
        if window_chars is not None and window_chars < 50:
            raise ConfigError(
                "must be at least 50 characters (None: no windows)", field="window_chars"
            )
        if window_overlap < 0:
            raise ConfigError("must be 0 or more sentences", field="window_overlap")
        if max_windows < 1:
            raise ConfigError("must be at least 1", field="max_windows")
        if select_fraction is not None and not 0.0 <= select_fraction <= 1.0:
            raise ConfigError(
                "must be between 0 and 1 (None: cutoff_fraction)", field="select_fraction"
            )
        if context_sentences < 0:
            raise ConfigError("must be 0 or more", field="context_sentences")
        if neighbour_fraction is not None and not 0.0 <= neighbour_fraction <= 1.0:
            raise ConfigError("must be between 0 and 1 (None: off)", field="neighbour_fraction")
        if context_after < 0:
            raise ConfigError("must be 0 or more", field="context_after")
        if scorer == "cross_encoder" and not model:
            raise ConfigError("scorer='cross_encoder' needs a model path or name", field="model")
        self.scorer = scorer
        self.model = model
        self.max_seq_length = max_seq_length
        self.backend = backend
        self.quantize = quantize
        self.fusion = fusion
        self.dense_weight = dense_weight
        self.dense_candidates = dense_candidates
        self.max_k = max_k
        self.min_k = min_k
        self.cutoff = cutoff
        self.cutoff_fraction = cutoff_fraction
        self.dedup = dedup
        self.dedup_threshold = dedup_threshold
        self.mmr_lambda = mmr_lambda
        self.order = order
        self.on_overflow = on_overflow
        self.strict = strict
        self.time_limit_ms = time_limit_ms
        self.window_chars = window_chars
        self.window_overlap = window_overlap
        self.max_windows = max_windows
        self.select_within = select_within
        self.select_fraction = select_fraction
        self.context_sentences = context_sentences
        self.context_after = context_after
        self.neighbour_fraction = neighbour_fraction
        self._scorer: Scorer | None = None if isinstance(scorer, str) else scorer

    # ---- scorer

    def get_scorer(self) -> Scorer:
        """The scorer instance (built on first use from the registry and this stage's options)."""
        if self._scorer is None:
            from ..backends.scorers import SCORERS

            cls = SCORERS.get(str(self.scorer), field="scorer")
            options: dict[str, Any] = {}
            if self.scorer in ("dense", "hybrid"):
                options = {
                    "model": self.model,
                    "max_seq_length": self.max_seq_length,
                    "backend": self.backend,
                    "quantize": self.quantize,
                }
            if self.scorer == "hybrid":
                options.update(
                    fusion=self.fusion,
                    dense_weight=self.dense_weight,
                    dense_candidates=self.dense_candidates,
                )
            if self.scorer == "cross_encoder":
                options = {"model": self.model}
            self._scorer = cls(**options)
        return self._scorer

    # ---- the stage

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        documents = request.documents
        if not documents:
            return request
        counter = log.counter
        tokens = [count_document(d, counter) for d in documents]
        valid = [i for i, d in enumerate(documents) if d.text.strip()]
        for i in sorted(set(range(len(documents))) - set(valid)):
            self._drop(log, documents[i], tokens[i], None, "empty text")
            log.warning(f"document:{documents[i].id}: empty text, dropped")

        query = request.effective_query
        start = time.perf_counter()
        scores, vectors, parts = self._score(
            query, [documents[i] for i in valid], log, request.query_embedding, request.protect
        )
        log.details["scoring_ms"] = (time.perf_counter() - start) * 1e3
        score_of = {i: float(scores[j]) for j, i in enumerate(valid)}
        # best first; equal scores keep their original order (deterministic)
        ranked = sorted(valid, key=lambda i: (-score_of[i], i))

        # the cut-off is taken on the ranking itself: a near-duplicate scores like its twin, so
        # it moves neither the best-to-worst range nor the largest gap
        k_rel = relevance_cutoff(
            [score_of[i] for i in ranked],
            rule=self.cutoff,
            fraction=self.cutoff_fraction,
            window=self.max_k,
        )
        if parts is not None and self.cutoff == "fraction" and len(parts[1]) > len(valid):
            # long documents: the scale runs from the worst window to the best, as it would
            # were every window a passage of its own (a document's best window is its score)
            low = float(parts[1].min())
            threshold = low + self.cutoff_fraction * (float(parts[1].max()) - low) - 1e-12
            k_rel = sum(1 for i in ranked if score_of[i] >= threshold)
        cap = self.max_k or len(ranked)
        if self.mmr_lambda is None:
            selected = self._walk(
                ranked, k_rel, cap, documents, vectors, valid, score_of, tokens, log
            )
        else:
            pool = self._walk(
                ranked, k_rel, len(ranked), documents, vectors, valid, score_of, tokens, log
            )
            selected = self._mmr(pool, min(cap, len(pool)), vectors, valid, score_of, documents)
            for i in pool:
                if i not in selected:
                    self._drop(log, documents[i], tokens[i], score_of[i], "not selected by MMR")

        tokens_given = sum(tokens)
        trimmed: dict[int, str] = {}
        if parts is not None and self.select_within:
            trimmed = self._select_parts(selected, documents, valid, parts, tokens, log)
        kept = self._fit_budget(request, budget, selected, documents, tokens, score_of, log)
        log.details.update(
            scorer="bm25" if "fallback" in log.details else self.get_scorer().name,
            candidates=len(documents),
            relevance_k=k_rel,
            kept=len(kept),
            tokens_kept=sum(tokens[i] for i in kept),
            tokens_given=tokens_given,
        )
        ordered = self._order(kept)
        if ordered != sorted(ordered):
            log.change("reordered", "documents", reason=f"order={self.order}")
        new_docs = [
            documents[i].model_copy(
                update={"score": score_of[i], "text": trimmed[i]}
                if i in trimmed
                else {"score": score_of[i]}
            )
            for i in ordered
        ]
        return request.replace(documents=new_docs)

    # ---- steps

    def _score(
        self,
        query: str,
        docs: list[Document],
        log: StageLog,
        query_embedding: Sequence[float] | None = None,
        protect: Sequence[str] = (),
    ) -> tuple[np.ndarray, np.ndarray | None, _Parts | None]:
        """Each document's score and unit vector (None without embeddings), and its windows
        with their scores (None when nothing was scored)."""
        import numpy as np

        if not docs:
            return np.zeros(0), None, None
        if not query.strip():
            # nothing to score against: keep the retriever's order (its scores when given)
            log.warning("no query to score documents against; the retriever's order is kept")
            given = [d.score for d in docs]
            if all(s is not None for s in given):
                return np.asarray(given, dtype=np.float64), None, None
            return -np.arange(len(docs), dtype=np.float64), None, None
        windowed = self._windows(docs, protect)
        texts = [w.text for w in windowed.windows]
        embeddings = window_embeddings([d.embedding for d in docs], windowed)
        if len(texts) > len(docs):
            log.details["windows"] = len(texts)
        scorer = self.get_scorer()
        vectors_given: dict[str, Any] = {"embeddings": embeddings}
        if query_embedding is not None and _accepts_query_embedding(type(scorer)):
            vectors_given["query_embedding"] = query_embedding
        if self._english_model_on_foreign_text(query, texts):
            # the default MiniLM is English-only: on Chinese (or other non-Latin) text its
            # similarities are noise that would drown BM25 in the fusion
            from ..backends.lexical import BM25Scorer

            log.warning(
                f"{scorer.name} scorer: the text is not English and the embedding model is the "
                "default English all-MiniLM-L6-v2; scored with BM25 only (give a multilingual "
                "sentence-transformers model by path as model= for dense scores)"
            )
            log.details["language_fallback"] = "bm25"
            scorer = BM25Scorer()
        if scorer.name == "bm25":
            scored = scorer.score(query, texts, **vectors_given)
        else:
            from ..backends.lexical import BM25Scorer

            scored = run_with_fallback(
                lambda: scorer.score(query, texts, **vectors_given),
                lambda: BM25Scorer().score(query, texts),
                backend=f"{scorer.name} scorer",
                fallback_name="bm25",
                extra="retrieval",
                log=log,
                strict=self.strict,
                time_limit_ms=self.time_limit_ms,
            )
        for key, value in scored.details.items():
            log.details[key] = value
        if scored.details.get("embeddings_mismatched"):
            log.warning(
                f"{scored.details['embeddings_mismatched']} precomputed embeddings have another "
                "dimension than the model's; those documents were embedded again"
            )
        if scored.details.get("query_embedding_mismatched"):
            log.warning(
                f"the request's query_embedding has {len(query_embedding or ())} values, not the "
                "model's dimension; the query was embedded again"
            )
        window_scores = np.asarray(scored.scores, dtype=np.float64)
        if len(texts) == len(docs):
            return window_scores, scored.vectors, (windowed, window_scores)
        return (
            document_scores(windowed, window_scores, len(docs)),
            document_vectors(windowed, scored.vectors, len(docs)),
            (windowed, window_scores),
        )

    def _windows(self, docs: Sequence[Document], protect: Sequence[str]) -> Windowed:
        if self.window_chars is None:  # whole documents, one input each
            return whole_documents([d.text for d in docs], [_scoring_text(d) for d in docs])
        return split_windows(
            [d.text for d in docs],
            [d.title for d in docs],
            window_chars=self.window_chars,
            overlap=self.window_overlap,
            max_windows=self.max_windows,
            protect=protect,
        )

    def _select_parts(
        self,
        selected: list[int],
        documents: Sequence[Document],
        valid: list[int],
        parts: _Parts,
        tokens: list[int],
        log: StageLog,
    ) -> dict[int, str]:
        """Coarse to fine (``windows.select_parts``): the matching parts of each selected
        long document. ``tokens`` is updated; the report says which sentences stayed."""
        row = {i: j for j, i in enumerate(valid)}
        fraction = self.cutoff_fraction if self.select_fraction is None else self.select_fraction
        rule = Selection(
            fraction, self.neighbour_fraction, self.context_sentences, self.context_after
        )
        trimmed: dict[int, str] = {}
        for i in selected:
            doc = documents[i]
            found = select_parts(parts[0], parts[1], row[i], doc.text, rule, first=not doc.title)
            if found is None:
                continue
            text, kept_spans, summary = found
            n = count_document(doc.model_copy(update={"text": text}), log.counter)
            reason = f"kept sentences {summary} (the parts that match the query)"
            log.change("compressed", f"document:{doc.id}", tokens=tokens[i] - n, reason=reason)
            log.details.setdefault("kept_parts", []).append({"id": doc.id, "spans": kept_spans})
            tokens[i] = n
            trimmed[i] = text
        return trimmed

    def _english_model_on_foreign_text(self, query: str, texts: Sequence[str]) -> bool:
        """True when this stage would embed with the default English model text whose main
        script is not Latin (query first; the documents when the query is Latin or empty)."""
        if self.scorer not in ("dense", "hybrid"):
            return False  # BM25 needs no model; a cross-encoder or a Scorer is the caller's choice
        if self.model is not None and "all-minilm" not in str(self.model).lower():
            return False  # the caller's model: a multilingual one is used as given
        from ..text import dominant_script

        script = dominant_script(query)
        if script in ("latin", ""):
            script = _documents_script(texts)
        return script not in ("latin", "")

    def _walk(
        self,
        ranked: list[int],
        k_rel: int,
        cap: int,
        documents: Sequence[Document],
        vectors: np.ndarray | None,
        valid: list[int],
        score_of: dict[int, float],
        tokens: list[int],
        log: StageLog,
    ) -> list[int]:
        """Walk the ranking best first: keep up to ``cap`` documents that pass the cut-off (or
        are needed for ``min_k``) and are not near-duplicates of one already kept. Documents
        past the cap or the cut-off are not compared at all."""
        similar = self._similarity(ranked, documents, vectors, valid)
        threshold = self.dedup_threshold or (
            DEFAULT_COSINE_THRESHOLD
            if self._dedup_method(vectors) == "embedding"
            else DEFAULT_SHINGLE_THRESHOLD
        )
        kept: list[int] = []
        for rank, i in enumerate(ranked):
            if len(kept) >= cap or (rank >= k_rel and len(kept) >= self.min_k):
                reason = (
                    f"below the relevance cut-off ({self.cutoff})"
                    if rank >= k_rel
                    else f"beyond the hard cap max_k={self.max_k}"
                )
                self._drop(log, documents[i], tokens[i], score_of[i], reason)
                continue
            best, twin = similar(i, kept) if similar is not None and kept else (0.0, -1)
            if twin >= 0 and best >= threshold:
                method = self._dedup_method(vectors)
                self._drop(
                    log,
                    documents[i],
                    tokens[i],
                    score_of[i],
                    f"near-duplicate of document:{documents[twin].id} ({method} {best:.2f})",
                )
            else:
                kept.append(i)
        return kept

    def _dedup_method(self, vectors: np.ndarray | None) -> str:
        if self.dedup in ("auto", "embedding"):
            # without embeddings from the scorer, compare words instead
            return "embedding" if vectors is not None else "shingle"
        return self.dedup

    def _similarity(
        self,
        ranked: list[int],
        documents: Sequence[Document],
        vectors: np.ndarray | None,
        valid: list[int],
    ) -> Any:
        """``similar(i, kept) -> (best similarity, most similar kept document)``, or None."""
        method = self._dedup_method(vectors)
        if method == "none":
            return None
        if method == "shingle":

            def by_shingles(i: int, kept: list[int]) -> tuple[float, int]:
                mine = _shingles(documents[i].text)
                values = [_jaccard(mine, _shingles(documents[j].text)) for j in kept]
                at = max(range(len(values)), key=values.__getitem__)
                return values[at], kept[at]

            return by_shingles
        assert vectors is not None
        row = {i: j for j, i in enumerate(valid)}

        def by_cosine(i: int, kept: list[int]) -> tuple[float, int]:
            values = (vectors[[row[j] for j in kept]] @ vectors[row[i]]).tolist()
            at = max(range(len(values)), key=values.__getitem__)
            return float(values[at]), kept[at]

        return by_cosine

    def _mmr(
        self,
        pool: list[int],
        k: int,
        vectors: np.ndarray | None,
        valid: list[int],
        score_of: dict[int, float],
        documents: Sequence[Document],
    ) -> list[int]:
        """Maximal marginal relevance (Carbonell & Goldstein 1998) on min-max relevance and
        cosine (or shingle) similarity: pick ``k`` of ``pool``, one at a time."""
        from ..backends.scorers import minmax

        lam = float(self.mmr_lambda)  # type: ignore[arg-type]
        relevance = dict(zip(pool, minmax([score_of[i] for i in pool]).tolist()))
        row = {i: j for j, i in enumerate(valid)}
        shingles = {} if vectors is not None else {i: _shingles(documents[i].text) for i in pool}

        def similarity(a: int, b: int) -> float:
            if vectors is not None:
                return float(vectors[row[a]] @ vectors[row[b]])
            return _jaccard(shingles[a], shingles[b])

        selected: list[int] = []
        remaining = list(pool)
        while remaining and len(selected) < k:
            best_i, best_value = remaining[0], float("-inf")
            for i in remaining:
                redundancy = max((similarity(i, j) for j in selected), default=0.0)
                value = lam * relevance[i] - (1.0 - lam) * redundancy
                if value > best_value:
                    best_i, best_value = i, value
            selected.append(best_i)
            remaining.remove(best_i)
        return selected

    def _fit_budget(
        self,
        request: Request,
        budget: Budget,
        selected: list[int],
        documents: Sequence[Document],
        tokens: list[int],
        score_of: dict[int, float],
        log: StageLog,
    ) -> list[int]:
        """Documents of ``selected``, in order, that fit the documents budget."""
        cap = allocate(request, budget, log.counter).documents
        log.details["documents_budget"] = cap
        if cap is None or not selected:
            return selected
        kept: list[int] = []
        used = 0
        first_drop = len(log.changes)  # where selected[0]'s record goes if it does not fit
        for i in selected:
            if used + tokens[i] <= cap:
                kept.append(i)
                used += tokens[i]
            else:
                self._drop(
                    log,
                    documents[i],
                    tokens[i],
                    score_of[i],
                    f"does not fit the documents budget ({cap} tokens)",
                )
        if kept or (budget.documents == 0) or self.min_k == 0:
            return kept
        best = selected[0]
        if self.on_overflow == "raise":
            over = tokens[best] - cap
            raise BudgetInfeasible(
                f"the best document ({documents[best].id}) alone exceeds the documents budget",
                minimum=budget.total + over if budget.total is not None else tokens[best],
                budget=budget.total if budget.total is not None else cap,
            )
        if self.on_overflow == "drop":
            log.warning(f"no document fits the documents budget of {cap} tokens; none kept")
            return kept
        # keep_best: a document that must be shrunk beats no context at all; say so loudly
        # its own record only: ids need not be unique, and a namesake's drop stays reported
        del log.changes[first_drop]
        log.warning(
            f"document:{documents[best].id} ({tokens[best]} tokens) exceeds the documents budget "
            f"of {cap} tokens; kept for a later stage to compress"
        )
        log.details["over_budget"] = tokens[best] - cap
        return [best]

    def _order(self, kept: list[int]) -> list[int]:
        if self.order == "original":
            return sorted(kept)
        if self.order == "edges":
            return _edges(kept)
        return kept

    @staticmethod
    def _drop(log: StageLog, doc: Document, tokens: int, score: float | None, reason: str) -> None:
        log.change("dropped", f"document:{doc.id}", tokens=tokens, score=score, reason=reason)


@lru_cache(maxsize=8192)  # documents recur across requests
def _script_of_document(text: str) -> str:
    from ..text import dominant_script

    # pure ASCII is Latin letters or none: skip the per-word scan (the cost of a warm request)
    if text.isascii():
        return "latin" if any(c.isalpha() for c in text) else ""
    return dominant_script(text)


def _documents_script(texts: Sequence[str]) -> str:
    """The main script of the documents: each document's own (cached), weighted by its length
    as ``dominant_script`` weighs letters (a CJK character as 3)."""
    weight: dict[str, int] = {}
    for text in texts:
        script = _script_of_document(text)
        if script:
            weight[script] = weight.get(script, 0) + len(text) * (3 if script == "cjk" else 1)
    return max(sorted(weight), key=weight.__getitem__) if weight else ""


@lru_cache(maxsize=64)
def _accepts_query_embedding(scorer_type: type[Scorer]) -> bool:
    """Whether ``scorer_type.score`` takes ``query_embedding`` (scorers written before it
    existed do not, and keep working)."""
    import inspect

    parameters = inspect.signature(scorer_type.score).parameters
    return "query_embedding" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _scoring_text(document: Document) -> str:
    """What the scorers read: the title (when there is one) and the text, as the model sees
    them in the rendered prompt."""
    title = document.title
    return f"{title}\n{document.text}" if title else document.text
