"""How the retrieval stage scores documents against the query: long documents cut into
windows and scored by their parts, the scorer run (BM25 standing in when another fails, runs
past its time limit, or would read non-English text with the English default model), and a
document's score and vector taken from its windows'."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..backends.scorer_base import Scored, Scorer
from ..escapes import unescaped
from ..languages import languages_differ, main_script
from ..scripts import dominant_script
from ..types import Document
from .base import StageLog, run_with_fallback
from .retrieval_options import WINDOWS_PER_MODEL_INPUT, RetrievalOptions
from .windows import (
    Windowed,
    document_scores,
    document_vectors,
    later_windows,
    split_windows,
    unembedded_windows,
    whole_documents,
    window_embeddings,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Parts",
    "across_languages",
    "build_scorer",
    "english_model_on_foreign_text",
    "index_texts",
    "score_documents",
    "scoring_text",
]

#: the windows of a request's documents and each window's score
Parts = tuple[Windowed, "np.ndarray"]


def build_scorer(options: RetrievalOptions) -> Scorer:
    """The scorer ``options`` name, built from the registry with the options it takes (or the
    ``Scorer`` instance they hold)."""
    if not isinstance(options.scorer, str):
        return options.scorer
    from ..backends.scorers import SCORERS

    cls = SCORERS.get(options.scorer, field="scorer")
    taken: dict[str, Any] = {"fuzzy": options.fuzzy} if options.scorer == "bm25" else {}
    if options.scorer in ("dense", "hybrid"):
        taken = {
            "model": options.model,
            "max_seq_length": options.max_seq_length,
            "backend": options.backend,
            "quantize": options.quantize,
            "store_float": options.store_float,
        }
    if options.scorer == "hybrid":
        taken.update(
            fusion=options.fusion,
            dense_weight=options.dense_weight,
            dense_min_spread=options.dense_min_spread,
            dense_candidates=options.dense_candidates,
            fuzzy=options.fuzzy,
        )
    if options.scorer == "cross_encoder":
        taken = {"model": options.model}
    return cls(**taken)


def across_languages(
    options: RetrievalOptions, query: str, documents: Sequence[Document], log: StageLog
) -> bool:
    """Whether the question is written in another language than its documents
    (``languages.languages_differ``) while the scorer reads one language: BM25 by shared
    terms, ``dense`` or ``hybrid`` with the default English model. Nothing then ranks the
    documents by the question (a cross-lingual English-only model reads a German question as
    noise, BM25 matches its names alone), so they are kept whole, in their order, with a
    warning. ``keep_across_languages=False``, a model given by name or path, a cross-encoder
    or a ``Scorer`` instance: ranked as usual."""
    if not options.keep_across_languages or not query.strip():
        return False
    if options.scorer != "bm25" and not (
        options.scorer in ("dense", "hybrid") and _english_model(options)
    ):
        return False
    pair = languages_differ(query, [unescaped(d.text) for d in documents])
    if pair is None:
        return False
    log.warning(
        f"the question is in {pair.query!r} and the documents in {pair.documents!r}, and the "
        f"{options.scorer} scorer reads one language: nothing ranks them, so all are kept, in "
        "their order (give a multilingual sentence-transformers model by path as model= to "
        "rank them; keep_across_languages=False ranks them anyway)"
    )
    log.details["languages"] = {"query": pair.query, "documents": pair.documents}
    return True


def score_documents(
    options: RetrievalOptions,
    scorer: Scorer,
    query: str,
    docs: list[Document],
    log: StageLog,
    query_embedding: Sequence[float] | None = None,
    protect: Sequence[str] = (),
    views: Sequence[str] = (),
) -> tuple[np.ndarray, np.ndarray | None, Parts | None]:
    """Each document's score and unit vector (None without embeddings), and its windows
    with their scores (None when nothing was scored). ``views``: other ways the query may be
    asked (``promptslim.query``), for scorers that take them."""
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
    windowed = _windows(options, docs, protect, _window_cap(options, scorer))
    texts = [w.text for w in windowed.windows]
    stored: list[Any] = [d.embedding for d in docs]
    embeddings = window_embeddings(stored, windowed)
    if len(texts) > len(docs):
        log.details["windows"] = len(texts)
    extra: dict[str, Any] = {"embeddings": embeddings}
    if query_embedding is not None and _accepts(type(scorer), "query_embedding"):
        extra["query_embedding"] = query_embedding
    if views and _accepts(type(scorer), "views"):
        extra["views"] = views
    unembedded = None
    if embeddings is not None and options.store_windows != "embed":
        unembedded = unembedded_windows(stored, windowed)
    key = _unembedded_key(options)
    if unembedded is not None and _accepts(type(scorer), key):
        extra[key] = unembedded  # a scorer that cannot embeds those windows instead
    read = _model_shortlist(options, windowed, embeddings, unembedded)
    if read is not None and _accepts(type(scorer), "shortlist"):
        # the dense work bounded by construction: BM25 picks which later windows are embedded
        extra["shortlist"], extra["shortlist_size"], extra["shortlist_each"] = read
    scored = _run_scorer(
        options, scorer, (query, [d.text for d in docs]), texts, extra, query_embedding, log
    )
    window_scores = np.asarray(scored.scores, dtype=np.float64)
    if len(texts) == len(docs):
        return window_scores, scored.vectors, (windowed, window_scores)
    return (
        document_scores(windowed, window_scores, len(docs)),
        document_vectors(windowed, scored.vectors, len(docs)),
        (windowed, window_scores),
    )


def _run_scorer(
    options: RetrievalOptions,
    scorer: Scorer,
    asked: tuple[str, list[str]],
    texts: list[str],
    vectors_given: dict[str, Any],
    query_embedding: Sequence[float] | None,
    log: StageLog,
) -> Scored:
    """The scorer on the windows' texts, with ``vectors_given`` (its keyword arguments: the
    embeddings, the query's, the windows not to embed); BM25 in its place on non-English text
    under the English default model (read from ``asked``: the query, then the documents' own
    texts, whose scripts the window cut has already found, not each window's again), or when
    it fails or runs past ``time_limit_ms`` (not ``strict``)."""
    from ..backends.lexical import BM25Scorer

    query, documents = asked
    if english_model_on_foreign_text(options, query, documents):
        # the default MiniLM is English-only: on Chinese (or other non-Latin) text its
        # similarities are noise that would drown BM25 in the fusion
        log.warning(
            f"{scorer.name} scorer: the text is not English and the embedding model is the "
            "default English all-MiniLM-L6-v2; scored with BM25 only (give a multilingual "
            "sentence-transformers model by path as model= for dense scores)"
        )
        log.details["language_fallback"] = "bm25"
        scorer = BM25Scorer(fuzzy=options.fuzzy)
    if scorer.name == "bm25":
        for key in vectors_given.keys() - {"embeddings", "query_embedding"}:
            vectors_given.pop(key)  # every text is lexical there
        scored = scorer.score(query, texts, **vectors_given)
    else:
        scored = run_with_fallback(
            lambda: scorer.score(query, texts, **vectors_given),
            lambda: BM25Scorer(fuzzy=options.fuzzy).score(query, texts),
            backend=f"{scorer.name} scorer",
            fallback_name="bm25",
            extra="retrieval",
            log=log,
            strict=options.strict,
            time_limit_ms=options.time_limit_ms,
        )
    _report_scored(scored, query_embedding, log)
    return scored


def _report_scored(scored: Scored, query_embedding: Sequence[float] | None, log: StageLog) -> None:
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


def index_texts(options: RetrievalOptions, scorer: Scorer, docs: Sequence[Document]) -> list[str]:
    """The texts a request would have the model read of ``docs``: their windows, each
    document cut as a request cuts it when its windows are within the cap (alone, at
    ``window_chars``), less a first window whose vector a store gave, the windows
    ``store_windows`` leaves unembedded (``lexical`` or ``static``), and documents the English
    default model would not read (``english_model_on_foreign_text``)."""
    cap = _window_cap(options, scorer)
    texts: list[str] = []
    for doc in docs:
        if english_model_on_foreign_text(options, "", [doc.text]):
            continue
        windowed = _windows(options, [doc], (), cap)
        stored = window_embeddings([doc.embedding], windowed) or [None] * len(windowed.windows)
        unembedded = None
        if options.store_windows != "embed" and _accepts(type(scorer), _unembedded_key(options)):
            unembedded = unembedded_windows([doc.embedding], windowed)
        skip = unembedded or [False] * len(windowed.windows)
        texts += [w.text for w, e, s in zip(windowed.windows, stored, skip) if e is None and not s]
    return texts


def _unembedded_key(options: RetrievalOptions) -> str:
    """The scorer's keyword for the windows ``store_windows`` leaves unembedded."""
    return "static_only" if options.store_windows == "static" else "lexical_only"


def _window_cap(options: RetrievalOptions, scorer: Scorer) -> int:
    """The windows a request may be cut into. A scorer that lets BM25 choose what the model
    reads (``shortlist``), or reads by BM25 alone, gets ``WINDOWS_PER_MODEL_INPUT`` windows per
    model input: a large request keeps windows of ``window_chars``, whose parts the model reads
    whole and selection keeps alone, rather than windows grown past what the model reads.
    Any other scorer embeds every window, so ``max_windows`` is all it gets."""
    if scorer.name == "bm25" or _accepts(type(scorer), "shortlist"):
        return options.max_windows * WINDOWS_PER_MODEL_INPUT
    return options.max_windows


def _model_shortlist(
    options: RetrievalOptions,
    windowed: Windowed,
    embeddings: Sequence[Any] | None,
    lexical: Sequence[bool] | None,
) -> tuple[list[int | None], int, int] | None:
    """Which windows the model may read, as ``(shortlist, size, each)``: the later windows of
    ``dense_windows`` when it is set; otherwise, when the request holds more texts to embed
    than ``max_windows``, each document's best window by BM25 (so every document has a dense
    score of its own, from the part most likely to hold its answer) and BM25's best others,
    ``max_windows`` texts in all. With more documents than that (a top-100 of passages), BM25's
    best ``max_windows`` windows, as a cascade reranks a first stage's best: the model's work
    stays bounded whatever the number of candidates. A window whose vector a store gave takes
    no place. None: the model reads every window."""
    if options.dense_windows is not None:
        later = later_windows(windowed)
        if later is None:
            return None
        return later, options.dense_windows, options.dense_windows_each
    n = len(windowed.windows)
    given = embeddings or [None] * n
    skip = lexical or [False] * n
    to_embed = [
        (w.doc, w.text) for w, e, s in zip(windowed.windows, given, skip) if e is None and not s
    ]
    if len({text for _, text in to_embed}) <= options.max_windows:
        return None
    documents = len({doc for doc, _ in to_embed})
    if documents > options.max_windows:
        return [w.doc for w in windowed.windows], options.max_windows, 0
    return [w.doc for w in windowed.windows], options.max_windows - documents, 1


def _windows(
    options: RetrievalOptions, docs: Sequence[Document], protect: Sequence[str], cap: int
) -> Windowed:
    if options.window_chars is None:  # whole documents, one input each
        return whole_documents([d.text for d in docs], [scoring_text(d) for d in docs])
    return split_windows(
        [d.text for d in docs],
        [d.title for d in docs],
        window_chars=options.window_chars,
        overlap=options.window_overlap,
        max_windows=cap,
        protect=protect,
        # a store's document under store_windows="lexical" is read past its head by BM25
        # alone, which finds a chunk's matching part more often in the shorter windows (its
        # static vectors read whole paragraphs as the model does)
        whole_paragraphs=[options.store_windows != "lexical" or d.embedding is None for d in docs],
    )


def english_model_on_foreign_text(
    options: RetrievalOptions, query: str, texts: Sequence[str]
) -> bool:
    """True when this stage would embed with the default English model text whose main
    script is not Latin (query first; the documents when the query is Latin or empty)."""
    if options.scorer not in ("dense", "hybrid"):
        return False  # BM25 needs no model; a cross-encoder or a Scorer is the caller's choice
    if not _english_model(options):
        return False  # the caller's model: a multilingual one is used as given
    script = dominant_script(query)
    if script in ("latin", ""):
        script = _documents_script(texts)
    return script not in ("latin", "")


def _english_model(options: RetrievalOptions) -> bool:
    """Whether the dense side's model is the default English MiniLM (or another copy of it)."""
    return options.model is None or "all-minilm" in str(options.model).lower()


def _documents_script(texts: Sequence[str]) -> str:
    """The main script of the documents (``languages.main_script``: each document's own,
    cached, weighed by its length, a CJK character as ``CJK_CHAR_WEIGHT`` letters)."""
    return main_script([unescaped(t) for t in texts])[0]


@lru_cache(maxsize=64)
def _accepts(scorer_type: type[Scorer], keyword: str) -> bool:
    """Whether ``scorer_type.score`` takes ``keyword`` (``query_embedding``, ``static_only``:
    scorers written before those existed do not, and keep working)."""
    import inspect

    parameters = inspect.signature(scorer_type.score).parameters
    return keyword in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def scoring_text(document: Document) -> str:
    """What the scorers read: the title (when there is one) and the text, as the model sees
    them in the rendered prompt (JSON's ``\\u`` escapes and HTML's
    character references read as their characters)."""
    title, text = document.title, unescaped(document.text)
    return f"{title}\n{text}" if title else text
