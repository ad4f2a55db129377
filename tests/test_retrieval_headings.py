"""A heading does not set the relevance cut-off (``promptslim.stages.retrieval_cutoff``): a
splitter cutting small leaves a page's title as a piece of its own, which matches the question
more densely than the piece that answers it; as the top of the fraction rule's scale it left
that piece under the bar."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_text_splitters import RecursiveCharacterTextSplitter

from promptslim.errors import ConfigError
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.retrieval_cutoff import headings, relevance_k
from promptslim.stages.retrieval_options import RetrievalOptions
from promptslim.types import Document, Request

QUESTION = "How long is Hadrian's Wall?"
ANSWER = "73 miles long"
ARTICLE = (
    "Hadrian's Wall\n\n"
    "The wall ran from the banks of the River Tyne near the North Sea to the Solway Firth on the "
    "Irish Sea, and was the northern limit of the Roman Empire in Britain for most of three "
    "centuries. Soldiers of the auxiliary cohorts manned its forts, milecastles and turrets, and a "
    "road behind it carried supplies between the garrisons.\n\n"
    f"From coast to coast the work was {ANSWER}, about 117 kilometres, and most of it was "
    "finished within six years by legionaries from the three legions of Britain. Stone was "
    "quarried nearby; in the west the first stretch was turf, later rebuilt in stone."
)
OTHERS = [
    (
        "Antonine Wall\n\nThe Antonine Wall was a turf fortification on stone foundations across the "
        "central belt of Scotland, built by the Romans after the reign of Hadrian and abandoned "
        "after eight years."
    ),
    (
        "The Great Wall of China is a series of fortifications built across the historical northern "
        "borders of ancient Chinese states, begun in the 7th century BC."
    ),
    (
        "Hadrian was Roman emperor from 117 to 138. He was born in Italica, near Seville, into a "
        "family of Italian origin that had settled in Spain."
    ),
    "A milecastle was a small fortlet built at intervals of about one Roman mile along a frontier.",
    (
        "The River Tyne is a river in North East England, formed by the confluence of the North Tyne "
        "and the South Tyne."
    ),
    (
        "Berlin Wall\n\nThe Berlin Wall was a guarded concrete barrier that divided Berlin from 1961 "
        "to 1989."
    ),
]


def request() -> Request:
    # the real splitter at a small size: the title no longer fits with the paragraph after it
    pieces = RecursiveCharacterTextSplitter(chunk_size=340, chunk_overlap=0).split_text(ARTICLE)
    assert pieces[0] == "Hadrian's Wall" and ANSWER in pieces[2]
    docs = [Document(id=f"wall-{i}", text=t) for i, t in enumerate(pieces)]
    docs += [Document(id=f"other-{i}", text=t) for i, t in enumerate(OTHERS)]
    return Request(messages=[{"role": "user", "content": QUESTION}], documents=docs)


def test_the_piece_that_answers_is_kept_when_a_heading_scores_best() -> None:
    before = RetrievalStage(heading_share=0.0).run(request())
    ids = [d.id for d in before.request.documents]
    assert ids[0] == "wall-0" and "wall-2" not in ids  # the heading set the bar above it
    after = RetrievalStage().run(request())
    ids = [d.id for d in after.request.documents]
    assert ids[0] == "wall-0" and "wall-2" in ids  # the heading is still kept, first
    assert ANSWER in "\n".join(d.text for d in after.request.documents)


def test_headings_are_short_beside_the_others_and_end_no_sentence() -> None:
    texts = [
        "Hadrian's Wall",  # a title
        "It was long.",  # short, but a sentence: it may be the answer itself
        "长城",  # a CJK title
        "长城很长。",  # a CJK sentence: no space after its end
        "Notes: see St. Louis",  # an abbreviation's dot reads as a sentence end: kept out
        *["A paragraph of some length that states a fact or two about its subject. " * 3] * 5,
    ]
    tokens = [4, 4, 2, 5, 6, *[45] * 5]
    assert headings(texts, tokens, 0.5) == {0, 2}
    assert headings(texts, tokens, 0.0) == frozenset()  # off
    assert headings(texts[:1], tokens[:1], 0.5) == frozenset()  # nothing to be short beside
    assert headings(texts, [45] * len(texts), 0.5) == frozenset()  # as long as the others


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=12),
    st.sets(st.integers(0, 11)),
    st.sampled_from([0.0, 0.3, 0.5, 1.0]),
)
def test_headings_only_ever_lower_the_bar(
    scores: list[float], heads: set[int], fraction: float
) -> None:
    options = RetrievalOptions(cutoff_fraction=fraction)
    score_of = dict(enumerate(scores))
    ranked = sorted(score_of, key=lambda i: (-score_of[i], i))
    plain = relevance_k(options, ranked, score_of, None)
    lowered = relevance_k(options, ranked, score_of, None, heads)
    assert 1 <= plain <= lowered <= len(scores)  # the best always passes, and no fewer
    if ranked[0] not in heads:
        assert lowered == plain  # only a heading at the top moves the bar


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.5", True])
def test_heading_share_is_a_share(bad: object) -> None:
    with pytest.raises(ConfigError, match="heading_share"):
        RetrievalStage(heading_share=bad)  # type: ignore[arg-type]
