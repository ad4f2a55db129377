"""The scorer interface (``Scorer``, ``Scored``) and score fusion: what every scorer, lexical
or dense, builds on. A module of its own so the BM25 scorer (``lexical``) and the dense and
hybrid ones (``scorers``) import it, not each other."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DENSE_MIN_SPREAD",
    "VIEW_TEMPERATURE",
    "Scored",
    "Scorer",
    "left_out",
    "minmax",
    "reciprocal_rank_fusion",
    "similarities",
    "view_weights",
    "weighted_fusion",
]


@dataclass(frozen=True)
class Scored:
    """One score per text (``scores``), and the unit embeddings of the texts when the scorer
    computed them (``vectors``; near-duplicate removal and MMR reuse them). ``details`` holds
    numbers worth reporting (precomputed embeddings reused, per-scorer scores...).
    ``view_weights``: how much the query and each of its views counted, when views were
    weighed (``view_weights``)."""

    scores: np.ndarray
    vectors: np.ndarray | None = None
    details: dict[str, Any] = field(default_factory=dict)
    view_weights: np.ndarray | None = None


class Scorer(ABC):
    """Scores candidate texts for a query. One required method, ``score``.

    ``embeddings``, when given, has one entry per text: a precomputed vector (a vector store's)
    or None. ``query_embedding``, when given, is the query's vector from the same model (the
    vector search that found the texts embedded the query already). Scorers that do not use
    embeddings ignore both; a scorer written before ``query_embedding`` existed, without that
    keyword, still works: the retrieval stage passes it only to scorers that accept it.
    The same holds for ``views`` (other ways the conversation may be asking the query,
    :mod:`promptslim.query`), which the dense and hybrid scorers take.
    """

    name: ClassVar[str]
    #: True when a text scores above the run's floor only through terms it shares with the
    #: query (BM25): such a run spreads only as far as the query's words are found, so a
    #: narrow spread is a question matching fewer or rarer words, never the model's noise
    lexical: ClassVar[bool] = False

    @abstractmethod
    def score(
        self,
        query: str,
        texts: Sequence[str],
        *,
        embeddings: Sequence[Any] | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> Scored: ...

    def index(self, texts: Sequence[str]) -> int:
        """Compute now, before any request, what scoring ``texts`` will need that no query
        changes, and keep it where requests look (the dense scorers: the texts' embeddings,
        into the shared cache); the number of texts that took. The default computes nothing:
        BM25's term counts cost little per request, and a cross-encoder reads each text with
        the query."""
        return 0

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


# ---------------------------------------------------------------- fusion


#: cosine similarities (the default MiniLM's) that all lie within this of each other say
#: little about which text is relevant: against JSON exports, logs or tables of one layout a
#: question's similarities spread 0.08-0.25 from the worst window to the best, and rank the
#: window that names what it asks anywhere. Min-max scaling would stretch that noise to the
#: full range of the lexical side; scaled as if spread this far, it moves the fusion in
#: proportion. Prose spreads wider for the same model (0.25-0.95 in all but one of the shape
#: suite's 2,800 requests), so it is left alone; a model whose similarities bunch more (e5,
#: bge) wants a lower value
DENSE_MIN_SPREAD = 0.25


def minmax(scores: Sequence[float] | np.ndarray, floor: float = 0.0) -> np.ndarray:
    """Scores mapped onto [0, 1] by the request's best and worst (all equal: all 0); scores
    spread less than ``floor`` are scaled as if spread ``floor`` (onto [0, spread / floor])."""
    import numpy as np

    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    low, high = float(scores.min()), float(scores.max())
    if high - low <= 1e-12:
        return np.zeros_like(scores)
    return (scores - low) / max(high - low, floor)


def weighted_fusion(
    runs: Sequence[np.ndarray], weights: Sequence[float], floors: Sequence[float] | None = None
) -> np.ndarray:
    """Weighted sum of min-max normalised scores (each run's ``floors``: ``minmax``): keeps how
    far apart documents score, which the score-gap cut-off relies on (rank fusion throws that
    away)."""
    import numpy as np

    total = float(sum(weights)) or 1.0
    out = np.zeros(len(runs[0]), dtype=np.float64)
    for run, w, floor in zip(runs, weights, floors or [0.0] * len(runs)):
        out += (w / total) * minmax(run, floor)
    return out


def reciprocal_rank_fusion(
    runs: Sequence[np.ndarray], weights: Sequence[float] | None = None, *, k: int = 60
) -> np.ndarray:
    """RRF (Cormack et al. 2009): ``sum_r w_r / (k + rank_r)``, ranks from 1, ties by position."""
    import numpy as np

    weights = weights or [1.0] * len(runs)
    out = np.zeros(len(runs[0]), dtype=np.float64)
    for run, w in zip(runs, weights):
        order = np.argsort(-np.asarray(run, dtype=np.float64), kind="stable")
        ranks = np.empty(len(order), dtype=np.float64)
        ranks[order] = np.arange(1, len(order) + 1)
        out += w / (k + ranks)
    return out


#: how fast trust falls off, in cosine similarity, for a view of the query that matches its
#: best text less well than the best view does (``view_weights``): a tenth lower weighs
#: exp(-2), about an eighth; an instruction or a "can you check again?" matches the best text
#: several tenths less than the question beside it does, and weighs nothing. Models whose
#: similarities bunch (e5, bge) give flatter weights: more views count, never fewer
VIEW_TEMPERATURE = 0.05


def view_weights(
    best: Sequence[float] | np.ndarray, temperature: float = VIEW_TEMPERATURE
) -> np.ndarray:
    """Weights summing to 1 for views of one query, from each view's similarity to the text it
    matches best (``best``): ``exp((best - max(best)) / temperature)``, normalised. A view
    the documents answer well is trusted; one they answer no better than noise is not."""
    import numpy as np

    best = np.asarray(best, dtype=np.float64)
    if best.size == 0:
        return best
    weights: np.ndarray = np.exp((best - best.max()) / temperature)
    return weights / float(weights.sum())


# ---------------------------------------------------------------- dense scores and shortlists


def similarities(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's inner product with ``query`` (through faiss for large sets)."""
    import numpy as np

    from .index import FAISS_MIN_CANDIDATES, inner_product_top_k

    if len(vectors) < FAISS_MIN_CANDIDATES:
        return np.asarray(vectors @ query, dtype=np.float64)
    top, ids = inner_product_top_k(query, vectors, len(vectors))
    scores = np.empty(len(vectors), dtype=np.float64)
    scores[ids] = top
    return scores


def left_out(
    lexical: np.ndarray,
    texts: Sequence[str],
    skip: set[int],
    shortlist: Sequence[int | None],
    size: int,
    *,
    each: int = 0,
    embeddings: Sequence[Any] | None = None,
) -> set[int]:
    """The ``shortlist`` texts not embedded. ``shortlist`` names each listed text's group (its
    document; None: not listed): of each group BM25's best ``each`` distinct texts are
    embedded, and of the rest BM25's best ``size``; ``skip`` texts are lexical-only anyway. A
    text the model reads anyway (one of the same content outside the shortlist, without a
    given vector) costs nothing and takes no place: the service embeds a text once per call,
    and splitters' overlapping chunks repeat text."""
    given = embeddings or [None] * len(texts)
    free = {
        t
        for i, t in enumerate(texts)
        if shortlist[i] is None and i not in skip and given[i] is None
    }
    listed = [
        i for i, g in enumerate(shortlist) if g is not None and i not in skip and given[i] is None
    ]
    listed.sort(key=lambda i: (-float(lexical[i]), i))
    picked: set[str] = set(free)
    per_group: dict[int | None, int] = {}
    rest: list[int] = []
    for i in listed:  # each group's best first: a long document's best part is always read
        if texts[i] in picked:
            continue
        if per_group.get(shortlist[i], 0) < each:
            per_group[shortlist[i]] = per_group.get(shortlist[i], 0) + 1
            picked.add(texts[i])
        else:
            rest.append(i)
    out: set[int] = set()
    extra = 0
    for i in rest:
        if texts[i] in picked:
            continue
        if extra < size:
            extra += 1
            picked.add(texts[i])
        else:
            out.add(i)
    return out
