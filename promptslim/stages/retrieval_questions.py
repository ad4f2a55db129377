"""An ask that holds several questions (``promptslim.query.Ask.questions``): the documents are
scored against the whole ask and against each question alone, and each window keeps the best
of its places on those scales.

Scored as one text, the question whose words the documents match best sets the top of the
scale, and the documents that answer the other fall under the cut-off. Each run's window scores
are put on ``[0, 1]`` by that run's worst and best window, and a window's score is its highest:
a window then passes the cut-off when it is near the best for the whole ask or for one of its
questions, so what is kept is about the union of what each would keep alone. A question
whose run spreads less than ``cutoff_fraction`` of the whole ask's is left out: on the whole
ask's scale none of its windows would rise from the bottom to the bar, and its scores barely
tell the windows apart (its words in none of them, the model's similarities noise), so
stretched over the whole scale they would carry noise past the cut-off. Under a lexical
scorer (``Scorer.lexical``: BM25) every question counts: its scores come only from the
question's words found in a window, so a question that matches fewer or rarer words than the
whole ask spreads less without being noise, and one whose words are nowhere scores all
windows alike, which adds nothing. The whole ask's run stays in the union: it weighs the
questions together, as the ask was written (a question that leans on the one before it is
asked with it: ``promptslim.query.questions_in``).

The windows are cut by the documents alone, so every run scores the same windows, and a
window's embedding is computed once (the shared embedding cache). A question adds its BM25
pass, its own query's embedding and, in a request with more windows than the model reads
(``max_windows``), the windows its own BM25 shortlists: at most ``MAX_QUESTIONS`` runs more,
each bounded as the whole ask's is. Under ``time_limit_ms`` the questions' runs share what the
whole ask's run left of it, and a question it leaves no time for is not scored on its own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..backends.scorer_base import Scorer, minmax
from ..query import Ask
from ..types import Document
from .base import StageLog
from .retrieval_options import RetrievalOptions
from .retrieval_scoring import Parts, score_documents
from .windows import document_scores

if TYPE_CHECKING:
    import numpy as np

__all__ = ["score_asked"]


def score_asked(
    options: RetrievalOptions,
    scorer: Scorer,
    ask: Ask,
    docs: list[Document],
    log: StageLog,
    query_embedding: Sequence[float] | None = None,
    protect: Sequence[str] = (),
) -> tuple[np.ndarray, np.ndarray | None, Parts | None]:
    """``score_documents`` for ``ask``: its text (with its views and the request's query
    vector), and with ``each_question`` each of its questions too, fused as the module says.
    The questions' runs report nothing of their own but new warnings."""
    start = time.perf_counter()
    whole = score_documents(
        options, scorer, ask.text, docs, log, query_embedding, protect, ask.views
    )
    _, vectors, parts = whole
    if not options.each_question or len(ask.questions) < 2 or parts is None:
        return whole
    runs = [parts[1]]
    for question in ask.questions:
        limited = _within_limit(options, start)
        if limited is None:
            log.warning(
                f"time_limit_ms ({options.time_limit_ms:g}) spent: {len(runs) - 1} of the ask's "
                f"{len(ask.questions)} questions were scored on their own"
            )
            break
        quiet = StageLog(log.counter)
        asked = score_documents(limited, scorer, question, docs, quiet, None, protect)[2]
        log.warnings += [w for w in quiet.warnings if w not in log.warnings]
        if asked is not None:
            runs.append(asked[1])
    log.details["questions"] = len(runs) - 1
    # a lexical run's narrow spread is a question matching fewer words, not noise
    lexical = scorer.lexical or log.details.get("language_fallback") == "bm25"
    fused = _best_of(runs, 0.0 if lexical else options.cutoff_fraction)
    windowed = parts[0]
    if len(windowed.windows) == len(docs):
        return fused, vectors, (windowed, fused)
    return document_scores(windowed, fused, len(docs)), vectors, (windowed, fused)


def _within_limit(options: RetrievalOptions, start: float) -> RetrievalOptions | None:
    """``options`` with ``time_limit_ms`` cut to what is left of it since ``start`` (as given
    without a limit), or None when nothing is left."""
    if options.time_limit_ms is None:
        return options
    left = options.time_limit_ms - (time.perf_counter() - start) * 1e3
    return options.model_copy(update={"time_limit_ms": left}) if left > 0 else None


def _best_of(runs: Sequence[np.ndarray], share: float = 0.0) -> np.ndarray:
    """Each window's highest place among ``runs``, each on ``[0, 1]`` by its own worst and
    best window; a run after the first (a question's) that spreads less than ``share`` of the
    first's (the whole ask's) spread is left out: its scores barely tell the windows apart (its
    words in none of them, the model's similarities noise), and stretched over the whole scale
    they would carry noise past the cut-off."""
    import numpy as np

    spread = float(np.ptp(runs[0])) if len(runs[0]) else 0.0
    kept = [runs[0], *(r for r in runs[1:] if len(r) and float(np.ptp(r)) >= share * spread)]
    return np.asarray(np.maximum.reduce([minmax(run) for run in kept]), dtype=np.float64)
