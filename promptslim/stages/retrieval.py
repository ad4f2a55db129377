"""The retrieval stage: keep the retrieved documents worth their tokens, in a useful order.

Top-k is usually set once and set too high, and retrieved passages are usually the bulk of a
RAG prompt. This stage re-scores ``Request.documents`` against the query (``Request.query``,
or what the conversation asks: ``promptslim.query``, whose views of the question the dense
scorer weighs by how well the documents answer each) and keeps::

    k = min(max_k,                      a hard cap
            what fits the documents budget (promptslim.budget.allocate),
            the relevance cut-off)      the head before the largest score gap ("gap"), or the
                                        documents within ``cutoff_fraction`` of the best on the
                                        scale from the worst candidate to the best ("fraction")

The default cut-off is ``fraction`` at 0.5: a document stays when its score is closer to the
best candidate's than to the worst's. It asks nothing of the score scale (it is invariant to
shifting and scaling, so it means the same for BM25, cosine and fused scores) and it keeps every
document that is about as good as the best, where the sharper ``gap`` rule bets everything on
one gap being the edge of the relevant set. A heading that tops the ranking (a candidate short
beside the others, under ``heading_share`` of the median one's tokens, that ends no sentence:
a title a splitter cut off on its own) does not set the best of that scale; the best other
candidate does, and the heading, scoring above it, stays. k is then never fewer than
``min_k`` (default 1; ``min_k=0`` allows none, when none fits the budget). Near-duplicates of
a better document are removed (embedding cosine, or word-shingle overlap without
embeddings); optionally MMR trades relevance for diversity. Kept documents keep their ids and
metadata, get ``score`` set, and are ordered by score, in their original order, or at the
``edges`` (best first, second best last: models read the ends of a long context best, Liu et
al. 2023, "Lost in the Middle"). Every dropped document is in the report with its score and
the reason; empty documents are dropped and reported, never fatal. A report entry names its
document ``document:{id}``, or ``document:{id}#{i}`` (its index) when it shares its id.

The stage's modules, one idea each: ``retrieval_options`` (the one pydantic model of its
options), ``retrieval_scoring``, ``retrieval_questions`` (an ask of several questions),
``retrieval_cutoff``, ``retrieval_select`` (choosing and ordering), ``retrieval_pieces`` (the
piece after the best one in its source), ``retrieval_lists`` (a document that is a JSON list of
passages), ``retrieval_inline`` (context written into a message) and the stage itself, here.

Under a documents budget a long document that does not fit whole is cut to its best parts
first, rather than dropped (``fit_parts``; ``retrieval_fit``). When even the best document
alone does not fit the documents budget, the default
(``on_overflow="keep_best"``) keeps it anyway, says so in a warning and in
``details["over_budget"]``, and leaves it to the compress stage to shrink it; ``"drop"``
keeps none and ``"raise"`` raises ``BudgetInfeasible`` at once. Scoring is lazy and pluggable
(``promptslim.backends.scorers.SCORERS``): ``scorer="bm25"`` never imports torch; dense
scoring reuses precomputed ``Document.embedding`` vectors and the shared embedding cache.

Long documents are scored by their parts (``promptslim.stages.windows``): each is cut into
sentence-aligned windows of about ``window_chars`` characters (paragraph breaks preferred, a
paragraph of about one window not cut, one sentence shared between neighbours; at most
``max_windows`` per request read by the model), every window is scored by the scorer (BM25 and the
dense model each see windows, not whole chunks: in a request with more windows than
``max_windows``, the model reads each document's best by BM25 and BM25's best others, or with more
documents than that BM25's best windows, the rest score by their terms alone), and a document's
score is its best window's; the ``fraction`` cut-off then runs on the scale from the worst window
to the best, as if every window were a passage of its own. A document of about one window is scored
exactly as before. Then, coarse to fine (``select_within``), of each kept long document only the
windows that pass the same cut-off stay (its best always), with the sentence before each, the
sentence after it when that goes on the same line (in prose the answer often follows the sentence
that names its subject; a table's or a log's next line is another record) and, when it has no
title, the first sentence of its paragraph (that context stays inside the window's paragraph: in a
chunk of several passages, the line before a paragraph belongs to another passage): whole
sentences, byte-exact, protected spans never split. A document that brings a vector store's
``embedding`` is not embedded again for its first window (the head a store's embedder reads); its
later windows are embedded (``store_windows="embed"``), or, under the hybrid scorer, scored without
the model: by BM25 alone (``"lexical"``: paraphrase there goes unseen), or by BM25 and static
vectors distilled from the model (``"static"``: ``backends/static_vectors.py``). A store's ingest
can embed every window ahead of the requests instead (``RetrievalStage.index``, into the shared
cache and its Redis tier): a request then embeds its query alone (nothing when it brings the
store's query vector), and its output is the same as without the index. The report lists the
sentences kept of each document (a ``compressed`` change, and ``details["kept_parts"]``: character
spans of the original). It lives here, beside the window scores, not in compress.

Chinese and other non-Latin text: BM25 uses ``text.analyse``; with the default English
MiniLM, ``dense``/``hybrid`` score such text with BM25 only, with a warning (a multilingual
model given as ``model=`` is used as given). A question in another language or script than
its documents keeps them all, unranked (``keep_across_languages``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from ..backends.scorer_base import DENSE_MIN_SPREAD
from ..backends.scorers import DEFAULT_MAX_SEQ_LENGTH
from ..query import ask_of, asks_for_whole
from ..tokens import count_document
from ..types import Budget, Document, Request
from .base import BaseStage, StageLog
from .retrieval_cutoff import headings, relevance_cutoff, relevance_k, unranked
from .retrieval_fit import sent_parts
from .retrieval_inline import inline_for
from .retrieval_lists import expand_lists, follows_of, lists_of, pulled, report_lists, sent
from .retrieval_options import (  # noqa: F401  (re-exported: the old import path)
    DEFAULT_COSINE_THRESHOLD,
    DEFAULT_MAX_WINDOWS,
    DEFAULT_SHINGLE_THRESHOLD,
    DEFAULT_WINDOW_CHARS,
    Cutoff,
    Dedup,
    OnOverflow,
    Order,
    RetrievalOptions,
    StoreWindows,
)
from .retrieval_questions import score_asked
from .retrieval_scoring import across_languages, build_scorer, index_texts, scoring_text
from .retrieval_select import (  # noqa: F401  (_edges, _shingles re-exported for old imports)
    Documents,
    _edges,
    _shingles,
    choose,
    document_target,
    drop,
    keep_whole,
    mmr,
    order_kept,
    walk,
)
from .retrieval_targets import drop_empty

if TYPE_CHECKING:
    from ..backends.scorers import Scorer

__all__ = ["RetrievalOptions", "RetrievalStage", "relevance_cutoff", "scoring_text"]


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
    vectors are not a vector store's float ones: a request that brings its own vectors and the
    query's has its other texts embedded by int8 and met by the store's query vector where
    int8's vectors point where float's do (ONNX's; torch's int8 embeds the query too and each
    text meets its own model's query) (``store_float=False``, the default; 1.8-2.6x faster a
    cold request on the shape suite, same evidence), or by the float model
    (``store_float=True``, and always without the query's vector). These defaults make a cold
    request several times faster at unchanged recall (``backends.scorers.DenseScorer``).
    ``dense_candidates``: for ``hybrid``,
    embed only BM25's best this many documents (a cascade; None embeds all). ``fuzzy`` (on):
    for BM25 and the hybrid, a query term no candidate holds counts as their terms an edit
    from it (a misspelt word of the question; ``promptslim.backends.lexical``).
    ``dense_min_spread``: for ``hybrid``'s weighted fusion, dense similarities spread less than
    this are scaled as if spread this far, so near-equal ones (look-alike code, records,
    tables) count in proportion rather than as much as BM25's whole range (``DENSE_MIN_SPREAD``).
    ``heading_share`` (0.5; 0 turns it off): a candidate with fewer tokens than this share of
    the median candidate's and no sentence end is a heading, and does not set the best of the
    ``fraction`` cut-off's scale (the module docstring).
    ``dedup_threshold``: None takes the method's default (cosine 0.95, shingle Jaccard 0.8); a
    near-duplicate by embedding must also share half its 5-word shingles with the one kept.
    ``mmr_lambda``: None turns MMR off; 1.0 is pure relevance, 0.0 pure diversity.
    ``window_chars`` (None: whole documents) and ``window_overlap`` (sentences): how long
    documents are cut for scoring (see the module docstring). ``max_windows`` bounds the windows
    the model reads in one request: past it, the hybrid scorer keeps the windows at
    ``window_chars`` (up to ``WINDOWS_PER_MODEL_INPUT`` times as many) and embeds each
    document's best window by BM25 and BM25's best others, up to ``max_windows`` (with more
    documents than that, BM25's best ``max_windows`` windows); other scorers get windows grown
    to fit ``max_windows``. ``select_within``: keep only the matching parts of kept long
    documents; ``select_fraction`` (None: ``cutoff_fraction``) is their cut-off,
    ``neighbour_fraction`` (None: off) a lower one for the neighbours of a kept window,
    ``context_sentences`` and ``context_after`` (1 each) the sentences kept before and after
    each kept window, inside its paragraph; a sentence after only where it goes on the same line
    (in prose the sentence after the one naming a question's subject often states the answer;
    the next row of a table or a log is another record). ``fit_parts`` (on): when the chosen
    documents' parts do not fit the documents budget, each gets its best window first, best
    document first, then more of its windows as the room allows, rather than the last ones being
    dropped whole (``retrieval_fit``). ``record_rest`` (on): a kept window that ends inside an
    indented record (a service in a compose file, a Kubernetes manifest, a function) keeps the
    record's rest, up to ``window_chars`` more (``window_select``).
    ``store_windows``: how the later windows of a document that brings a vector store's
    ``embedding`` are scored (its first window takes the store's vector): ``embed`` (the
    default) embeds them; ``lexical`` scores them by BM25 alone under ``hybrid``, so such a
    request costs one query embedding at most, at the price of the dense score of those parts;
    ``static`` gives them a dense score from static vectors (each word piece's vector, distilled
    once from the model and cached on disk: the mean of a window's, against the query's
    vector, on the scale of the windows the model embedded), at the same model cost as
    ``lexical`` (the table holds the vocabulary times the model's dimension in memory: 47 MB
    for MiniLM, several hundred for a multilingual model's 250,000 word pieces;
    ``benchmarks/bench_shapes.py`` measures the three).
    ``dense_windows`` (None, the default: every window embedded): bound the dense work of a
    request by construction under ``hybrid``: every window is scored by BM25, each document's
    first window is embedded (or takes a store's vector), and of the later windows only BM25's
    best ``dense_windows_each`` of each document and ``dense_windows`` more; the others take
    the lowest dense score (their BM25 share alone). A text already read (the same content
    elsewhere in the request) takes no place. It cuts the windows embedded in proportion, but
    BM25 must then find the part the model would, and on the shape suite's chunk and splitter
    shapes it often does not (evidence under 0.97 with one later window too), so it is off.
    ``next_pieces`` (1) and ``piece_keys`` (``("source", "start_index")``): where the
    documents' metadata places them in the source a splitter cut them from (LangChain's keys
    under ``add_start_index=True``; the LlamaIndex integration fills them from each node; else
    the document after a heading cut off alone), the piece that goes on from each of the
    ``next_pieces`` best kept documents is kept too, its opening up to ``window_chars``, though
    the cut-off or ``max_k`` dropped it (``retrieval_pieces``; at ``max_k``, the last other
    kept document's place): the piece after the one naming a subject often holds the answer.
    ``document_lists`` (on): a document that is a JSON list of passages competes by its
    passages, and the JSON sent holds those kept (``retrieval_lists``); an untitled list (a
    chat) is one text: the items before a best one (100 characters) and after (window_chars).
    So are documents whose metadata's ``previous_id`` names the earlier one each goes on from.
    ``item_pull`` (0.5; 0: off): such an item scores this share of the way from its own score
    to its better neighbour's, when higher: a message read with those beside it.
    ``whole_asks`` (on): a request that asks for its documents as a whole (a summary, a
    translation, every one of something in them: ``query.asks_for_whole``) keeps them all, in
    their order, as many as fit the documents budget (``details["whole_ask"]``).
    ``each_question`` (on): an ask that holds several questions (``query.Ask.questions``) is
    scored against each as well as the whole, and a window keeps its best place
    (``retrieval_questions``; ``details["questions"]``: the questions scored on their own).
    ``keep_across_languages`` (on): a question in another language or script than its
    documents (``languages_differ``), under a scorer that reads one (BM25; the default English
    model), keeps them all the same way, with a warning and ``details["languages"]``.
    ``inline_context`` (off: invariant 1 keeps the last user message as written unless the
    caller opts in): context a template marks in it, with no documents, is ranked as
    documents (``retrieval_inline``). A scorer other than BM25 that is missing (extra not
    installed), fails or runs past ``time_limit_ms`` is replaced by BM25 for that request, with
    a warning (the runs of an ask's questions share what the whole ask's run left of the
    limit); ``strict=True`` raises instead.
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
        dense_min_spread: float = DENSE_MIN_SPREAD,
        dense_candidates: int | None = None,
        fuzzy: bool = True,
        max_k: int | None = 10,
        min_k: int = 1,
        cutoff: Cutoff = "fraction",
        cutoff_fraction: float = 0.5,
        heading_share: float = 0.5,
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
        context_after: int = 1,
        neighbour_fraction: float | None = None,
        fit_parts: bool = True,
        record_rest: bool = True,
        store_windows: StoreWindows = "embed",
        dense_windows: int | None = None,
        dense_windows_each: int = 1,
        store_float: bool = False,
        next_pieces: int = 1,
        item_pull: float = 0.5,
        piece_keys: tuple[str, str] = ("source", "start_index"),
        document_lists: bool = True,
        whole_asks: bool = True,
        each_question: bool = True,
        keep_across_languages: bool = True,
        inline_context: bool = False,
    ) -> None:
        # the keyword arguments, exactly as given (nothing else is bound yet), validated once
        options = RetrievalOptions.parse(**{k: v for k, v in locals().items() if k != "self"})
        self._options = options
        for name, value in options:  # every setting under its own name: get_params reads them
            setattr(self, name, value)
        self._scorer: Scorer | None = None if isinstance(options.scorer, str) else options.scorer

    # ---- scorer

    def get_scorer(self) -> Scorer:
        """The scorer instance (built on first use from the registry and this stage's options)."""
        if self._scorer is None:
            self._scorer = build_scorer(self._options)
        return self._scorer

    # ---- ahead of requests

    def warm_up(self) -> None:
        """Load what a request would load on first use and ``Pipeline.warm_up``'s sample does
        not reach: the static vectors under ``store_windows="static"`` (the sample's documents
        bring no store vectors)."""
        scorer = self.get_scorer()
        static = getattr(scorer, "static_vectors", None)
        if self._options.store_windows == "static" and callable(static):
            static()

    def index(self, documents: Iterable[Document | dict[str, Any]]) -> int:
        """What a vector store's ingest can do once per document, so that requests carrying
        it cost less: cut each document into the windows a request cuts it into and have the
        scorer compute what it can without a query (the dense and hybrid scorers: the
        windows' embeddings, into the shared cache, and into the Redis tier that
        ``PROMPTSLIM_EMBEDDING_CACHE`` names, where every host's requests find them). Returns
        the number of texts indexed (0 for BM25 and cross-encoders: nothing to compute ahead).

        A request then embeds the query alone (nothing with the store's query vector, the
        views of a question it wraps in a template or follow-up included), unless it cuts a
        document elsewhere (its own ``protect`` literals inside it, or more windows than the
        cap) or the cache no longer holds a vector (the process's own cache keeps the most recent
        ``cache_size``; Redis keeps them for its TTL): what is missing is embedded then, as
        without an index. Bad input raises ``InvalidRequest`` naming ``documents[i]`` and its
        field."""
        from pydantic import ValidationError

        from ..validation import invalid_from_validation

        docs: list[Document] = []
        for i, doc in enumerate(documents):
            try:
                docs.append(doc if isinstance(doc, Document) else Document.model_validate(doc))
            except ValidationError as exc:
                raise invalid_from_validation(exc, root=f"documents[{i}]") from exc
        if self._options.document_lists and (listed := expand_lists(docs)) is not None:
            docs = listed.documents  # a request ranks a document list's passages
        scorer = self.get_scorer()
        return scorer.index(index_texts(self._options, scorer, docs))

    # ---- the stage

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        inline = inline_for([self], request)  # in a pipeline, the pipeline has done this
        if inline is None:
            return self._ranked(request, budget, log) if request.documents else request
        log.details["inline_context"] = inline.details()
        return inline.put_back(self._ranked(inline.request, budget, log))

    def _ranked(self, request: Request, budget: Budget, log: StageLog) -> Request:
        options, ask = self._options, ask_of(request)
        whole = options.whole_asks and asks_for_whole(request)
        across = not whole and across_languages(options, ask.text, request.documents, log)
        lists = options.document_lists and not (whole or across)  # a list stays whole too
        listed = lists_of(request, budget, log.counter) if lists else None
        documents = Documents(request.documents if listed is None else listed.documents)
        tokens = [count_document(d, log.counter) for d in documents]
        valid = drop_empty(log, documents, tokens)
        if whole or across:
            return keep_whole(options, request, budget, documents, valid, tokens, log, whole)

        start = time.perf_counter()
        scores, vectors, parts = score_asked(
            options,
            self.get_scorer(),
            ask,
            [documents[i] for i in valid],
            log,
            request.query_embedding,
            request.protect,
        )
        log.details["scoring_ms"] = (time.perf_counter() - start) * 1e3
        follows = follows_of(listed, documents)
        score_of = pulled({i: float(scores[j]) for j, i in enumerate(valid)}, follows, options)
        options = unranked(options, score_of, log)
        # best first; equal scores keep their original order (deterministic)
        ranked = sorted(valid, key=lambda i: (-score_of[i], i))
        heads = headings([d.text for d in documents], tokens, options.heading_share, valid)
        k_rel = relevance_k(options, ranked, score_of, parts, heads)
        selected = choose(options, ranked, k_rel, documents, vectors, valid, score_of, tokens, log)
        tokens_given = sum(tokens)
        kept, trimmed = sent_parts(
            options,
            request,
            budget,
            selected,
            documents,
            valid,
            parts,
            tokens,
            score_of,
            log,
            heads,
            follows,
        )
        log.details.update(
            scorer="bm25" if "fallback" in log.details else self.get_scorer().name,
            candidates=len(documents),
            relevance_k=k_rel,
            kept=len(kept),
            tokens_kept=sum(tokens[i] for i in kept),
            tokens_given=tokens_given,
        )
        ordered = order_kept(options.order, kept)
        if ordered != sorted(ordered):
            log.change("reordered", "documents", reason=f"order={options.order}")
        new_docs = sent(documents, ordered, trimmed, score_of, listed)
        report_lists(log, listed, new_docs, request.documents)
        return request.replace(documents=new_docs)
