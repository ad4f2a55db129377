"""BM25's fuzzy terms: a query term no candidate holds counts as the candidates' terms an edit
from it (a misspelt question), and nothing else changes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.backends.lexical import (
    FUZZY_MIN_CHARS,
    FUZZY_TWO_EDITS_CHARS,
    BM25Scorer,
    bm25_scores,
    close_terms,
)
from promptslim.errors import ConfigError
from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval import RetrievalStage
from promptslim.types import Document, Message, Request

TEXTS = [
    "The Battle of Gettysburg was fought in July 1863 in and around the town of Gettysburg.",
    "The Battle of Antietam was fought in September 1862 near Sharpsburg, Maryland.",
    "Pennsylvania's capital is Harrisburg; its largest city is Philadelphia.",
    "Host db-4471 answers on port 5432; host db-4472 is its replica.",
]


def test_a_term_one_edit_off_reads_as_the_term_the_texts_hold() -> None:
    vocabulary = ["battle", "gettysburg", "philadelphia", "sharpsburg"]
    assert close_terms("gettsyburg", vocabulary) == ["gettysburg"]  # two letters swapped
    assert close_terms("batle", vocabulary) == ["battle"]  # one left out
    assert close_terms("philadlephai", vocabulary) == ["philadelphia"]  # two edits, long word
    assert close_terms("battel", ["battle", "batten"]) == ["batten", "battle"]  # a tie: both
    assert close_terms("gettysburg", vocabulary) == ["gettysburg"]  # held: itself


def test_short_words_numbers_and_identifiers_are_never_fuzzed() -> None:
    assert FUZZY_MIN_CHARS == 5 and FUZZY_TWO_EDITS_CHARS == 9
    assert close_terms("sang", ["song", "sand"]) == []  # one edit makes most short words others
    assert close_terms("db4473", ["db4471", "db4472"]) == []  # another record, not a typo
    assert close_terms("15432", ["5432"]) == []
    assert close_terms("battle", ["cattle", "bottle"]) == ["bottle", "cattle"]  # five letters on
    assert close_terms("gettysbxyz", ["gettysburg"]) == []  # three edits: too far


def test_a_misspelt_question_still_finds_the_text_that_answers_it() -> None:
    asked = "when was the battle of gettsyburg"
    fuzzy, exact = bm25_scores(asked, TEXTS), bm25_scores(asked, TEXTS, fuzzy=False)
    assert exact[0] == exact[1]  # "battle" alone: the misspelt name counts for nothing
    assert fuzzy[0] > fuzzy[1] and fuzzy.argmax() == 0
    assert BM25Scorer(fuzzy=False).score(asked, TEXTS).scores.tolist() == exact.tolist()


_WORDS = sorted({w.strip(".,;'").lower() for t in TEXTS for w in t.split() if w.isalpha()})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8))
def test_a_question_of_words_the_texts_hold_scores_as_without_fuzzy_terms(
    words: list[str],
) -> None:
    asked = " ".join(words)
    assert bm25_scores(asked, TEXTS).tolist() == bm25_scores(asked, TEXTS, fuzzy=False).tolist()


def test_the_stage_takes_fuzzy_and_names_a_bad_value() -> None:
    with pytest.raises(ConfigError) as info:
        RetrievalStage(fuzzy="yes")  # type: ignore[arg-type]
    assert info.value.field == "fuzzy"
    with pytest.raises(ConfigError) as info:
        BM25Scorer(fuzzy=1)  # type: ignore[arg-type]
    assert info.value.field == "fuzzy"
    docs = [Document(id=f"d{i}", text=t) for i, t in enumerate(TEXTS)]
    request = Request(
        messages=[Message(role="user", content="When was the battle of Gettsyburg fought?")],
        documents=docs,
    )
    for scorer in ("bm25", "hybrid"):
        assert RetrievalStage(scorer=scorer).get_scorer().fuzzy is True  # type: ignore[attr-defined]
        off = RetrievalStage(scorer=scorer, fuzzy=False).get_scorer()
        assert off.fuzzy is False  # type: ignore[attr-defined]
    stage = RetrievalStage(scorer="bm25", max_k=1, cutoff="none")
    assert [d.id for d in Pipeline([stage]).run(request).request.documents] == ["d0"]


def test_the_lookups_of_one_query_are_bounded() -> None:
    from promptslim.backends import lexical

    counts = [{"quarterly": 1, "report": 1}, {"annual": 1, "report": 1}]
    misspelt = [f"quartrely{chr(97 + i)}" for i in range(lexical.FUZZY_MAX_TERMS)]
    terms = lexical._query_terms(" ".join(["report", *misspelt, "anual"]), counts, True)
    # a term the texts hold takes no lookup; the misspelt ones do, up to the bound
    assert terms[0] == ("report", 1.0)
    assert terms[1 : 1 + len(misspelt)] == [("quarterly", 1.0)] * len(misspelt)
    assert terms[-1] == ("anual", 1.0)  # past the bound: left as it is
    assert lexical._query_terms("anual", counts, True) == [("annual", 1.0)]
