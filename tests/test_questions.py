"""An ask that holds several questions (``promptslim.query.questions_in``): each is scored on
its own as well as the whole ask (``promptslim.stages.retrieval_questions``), so the documents
that answer the less well-matched question are not cut. On real nq20 rows with the real
MiniLM: two questions asked at once keep an answer to each."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptslim.bench.datasets import load_dataset
from promptslim.bench.metrics import evidence_retention
from promptslim.pipeline import Pipeline
from promptslim.query import MAX_QUESTIONS, VIEW_CHARS, ask_of, questions_in
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.retrieval_questions import _best_of
from promptslim.types import Document, Message, Request

TWO = "Who wrote The Outsiders? And when did the Battle of Gettysburg start?"


def test_two_questions_are_found_in_their_order() -> None:
    assert questions_in(TWO) == (
        "Who wrote The Outsiders?",
        "And when did the Battle of Gettysburg start?",
    )


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (
            "Who wrote The Outsiders and when did the Battle of Gettysburg start?",
            ("Who wrote The Outsiders", "when did the Battle of Gettysburg start?"),
        ),
        (
            "Who sang Hallelujah, and what year was Purple Rain released?",
            ("Who sang Hallelujah", "what year was Purple Rain released?"),
        ),
    ],
)
def test_and_before_a_question_word_joins_two_questions(text: str, found: tuple[str, ...]) -> None:
    assert questions_in(text) == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Who wrote The Outsiders? When was it published?", ()),  # one question, then
        ("Who sang it, and what year was it released?", ()),  # both lean on what came before
        ("I'm reading about Gettysburg. When did it start? Who won it?", ()),
        (
            "I'm reading about Gettysburg. When did it start? Who wrote Dune?",
            ("I'm reading about Gettysburg. When did it start?", "Who wrote Dune?"),
        ),
        (
            "Who wrote The Outsiders? Who else was involved in it? When is Deadpool 3 out?",
            ("Who wrote The Outsiders? Who else was involved in it?", "When is Deadpool 3 out?"),
        ),
        ("What is loihi and where does it originate from?", ()),  # "it" is loihi
        (
            "谁写了局外人？它是什么时候出版的？谁写了霍比特人？",
            ("谁写了局外人？它是什么时候出版的？", "谁写了霍比特人？"),
        ),
    ],
)
def test_a_question_that_leans_on_the_one_before_is_asked_with_it(
    text: str, found: tuple[str, ...]
) -> None:
    assert questions_in(text) == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (
            "1. who wrote the outsiders\n2. when did the battle of gettysburg start",
            ("who wrote the outsiders", "when did the battle of gettysburg start"),
        ),
        (
            "Answer these:\n- Who wrote The Outsiders\n- when is Deadpool 3 out",
            ("Who wrote The Outsiders", "when is Deadpool 3 out"),
        ),
        (
            "(a) who wrote dune\n(b) when did gettysburg start?",  # one mark, one without
            ("who wrote dune", "when did gettysburg start?"),
        ),
        (
            "who wrote dune\nwhen did gettysburg start",
            ("who wrote dune", "when did gettysburg start"),
        ),
        ("a) who wrote dune\nb) when was it published", ()),  # the second leans on the first
        ("who wrote dune\nThe book is long. When did gettysburg start", ()),  # mid-line
    ],
)
def test_lines_that_open_with_a_question_word_ask_without_a_mark(
    text: str, found: tuple[str, ...]
) -> None:
    assert questions_in(text) == found


@pytest.mark.parametrize(
    "text",
    [
        "who wrote antigone and what are the dates of his birth",  # no mark: a search-box query
        "What is the difference between who and whom?",  # "whom" alone names nothing
        "How and why did Rome fall?",
    ],
)
def test_and_before_a_question_word_inside_one_question_is_one(text: str) -> None:
    assert questions_in(text) == ()


@pytest.mark.parametrize(
    "text",
    [
        "who wrote the outsiders",  # one question, no mark
        "Who wrote The Outsiders?",  # one question
        "Who wrote The Outsiders? Why?",  # the second names nothing
        "Who wrote The Outsiders? Who wrote The Outsiders?",  # the same one twice
        "Tell me about The Outsiders. Then summarise Gettysburg.",  # no question mark
    ],
)
def test_fewer_than_two_questions_with_a_topic_are_none(text: str) -> None:
    assert questions_in(text) == ()


def test_more_questions_than_the_bound_are_scored_as_one() -> None:
    asked = [f"Who founded company number {i} in Ohio?" for i in range(MAX_QUESTIONS + 1)]
    assert questions_in(" ".join(asked[:MAX_QUESTIONS])) == tuple(asked[:MAX_QUESTIONS])
    assert questions_in(" ".join(asked)) == ()


def test_a_long_message_is_a_pasted_text_not_questions() -> None:
    pasted = "The report says revenue rose. " * (VIEW_CHARS // 30 + 1)
    assert questions_in(f"{pasted}\n{TWO}") == ()


def test_full_width_question_marks_count() -> None:
    assert len(questions_in("谁写了霍比特人？沙丘是哪一年出版的？")) == 2


def test_the_ask_carries_the_questions_of_a_given_query_or_the_last_message() -> None:
    given_query = Request(messages=[Message(role="user", content="hi")], query=TWO)
    assert ask_of(given_query).questions == questions_in(TWO)
    derived = Request(
        messages=[
            Message(role="user", content="Is Paris in France? Where is Lyon?"),
            Message(role="assistant", content="Both are in France."),
            Message(role="user", content=TWO),
        ]
    )
    assert ask_of(derived).questions == questions_in(TWO)  # the last user message's alone


@given(st.text(max_size=300))
def test_questions_are_the_texts_own_words(text: str) -> None:
    found = questions_in(text)
    assert found == () or 2 <= len(found) <= MAX_QUESTIONS
    assert len(set(found)) == len(found)
    assert found == () or "?" in text or "\uff1f" in text or "\n" in text  # marks or lines
    for question in found:
        assert question in text and question == question.strip()


@given(
    st.lists(
        st.lists(st.floats(-5, 5, allow_nan=False), min_size=4, max_size=4),
        min_size=1,
        max_size=4,
    )
)
def test_a_window_keeps_its_best_place_on_any_runs_scale(runs: list[list[float]]) -> None:
    arrays = [np.asarray(r) for r in runs]
    fused = _best_of(arrays)
    assert fused.min() >= 0.0 and fused.max() <= 1.0
    for run in arrays:  # each run's best window is at the top of the fused scale
        if run.max() - run.min() > 1e-12:
            assert fused[int(run.argmax())] == pytest.approx(1.0)


def _two_asked(
    items: list, i: int, asked: str = "{}? And {}?"
) -> tuple[Request, tuple[str, ...], tuple[str, ...]]:
    first, second = items[2 * i], items[2 * i + 1]
    docs = [*first.request.documents, *second.request.documents]
    random.Random(i).shuffle(docs)
    chunks = [
        Document(id=f"chunk-{c}", text="\n\n".join(f"{d.title}\n{d.text}" for d in docs[c : c + 4]))
        for c in range(0, len(docs), 4)
    ]
    query = asked.format(first.request.query, second.request.query)
    return first.request.replace(documents=chunks, query=query), first.answers, second.answers


@pytest.mark.parametrize(
    ("asked", "split", "gain"),
    [("{}? And {}?", 30, 3), ("1. {}\n2. {}", 20, 2)],  # a list: some open with no question word
    ids=["marks", "list"],
)
def test_two_questions_asked_at_once_keep_an_answer_to_each(
    eval_data: Path, asked: str, split: int, gain: int
) -> None:
    items = load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}", limit=60).items
    each = Pipeline([RetrievalStage()]).run
    one = Pipeline([RetrievalStage(each_question=False)]).run
    both = {"each": 0, "one": 0}
    scored = 0
    for i in range(len(items) // 2):
        request, answers, also = _two_asked(items, i, asked)
        for name, run in (("each", each), ("one", one)):
            result = run(request)
            text = "\n".join(d.text for d in result.request.documents)
            both[name] += evidence_retention(text, answers) * evidence_retention(text, also) > 0
            if name == "each":
                scored += result.report.stages[0].details.get("questions", 0) >= 2
    assert scored >= split
    # scored as one text, the less well-matched question lost its answer in several pairs
    assert both["each"] >= 28, both
    assert both["each"] >= both["one"] + gain, both


def _chunks_about(topics: list[str]) -> list[Document]:
    return [
        Document(id=f"d{i}", text=f"{topic.title()} facts. " + f"The {topic} was studied. " * 8)
        for i, topic in enumerate(topics)
    ]


def test_the_scoring_passes_stay_bounded() -> None:
    topics = ["glacier", "volcano", "harbour", "orchard", "lighthouse", "canyon"]
    stage = RetrievalStage(scorer="bm25")
    asked = " ".join(f"Where is the {t}?" for t in topics[: MAX_QUESTIONS + 1])
    request = Request(
        messages=[Message(role="user", content=asked)], documents=_chunks_about(topics)
    )
    details = Pipeline([stage]).run(request).report.stages[0].details
    assert "questions" not in details  # more than the bound: scored as one ask
    asked = " ".join(f"Where is the {t}?" for t in topics[:MAX_QUESTIONS])
    request = request.replace(messages=[Message(role="user", content=asked)])
    assert Pipeline([stage]).run(request).report.stages[0].details["questions"] == MAX_QUESTIONS


@pytest.mark.parametrize("query", ["Where is the glacier?", "where is the glacier and volcano"])
def test_an_ask_of_one_question_is_scored_as_before(query: str) -> None:
    docs = _chunks_about(["glacier", "volcano", "harbour", "orchard"])
    request = Request(messages=[Message(role="user", content=query)], documents=docs)
    runs = [
        Pipeline([RetrievalStage(scorer="bm25", each_question=on)]).run(request)
        for on in (True, False)
    ]
    assert runs[0].request == runs[1].request
    assert "questions" not in runs[0].report.stages[0].details


def test_the_questions_share_the_time_limit_the_whole_ask_left() -> None:
    topics = ["glacier", "volcano", "harbour", "orchard"]
    asked = "Where is the glacier? Where is the volcano?"
    request = Request(
        messages=[Message(role="user", content=asked)], documents=_chunks_about(topics)
    )
    spent = Pipeline([RetrievalStage(scorer="bm25", time_limit_ms=1e-6)]).run(request)
    stage = spent.report.stages[0]
    assert stage.details["questions"] == 0
    assert any("0 of the ask's 2 questions" in w for w in stage.warnings)
    ample = Pipeline([RetrievalStage(scorer="bm25", time_limit_ms=60_000.0)]).run(request)
    assert ample.report.stages[0].details["questions"] == 2
    assert not ample.report.stages[0].warnings


def test_a_question_that_barely_separates_the_windows_is_left_out() -> None:
    whole = np.asarray([0.0, 0.2, 0.6, 0.4])
    noise = np.asarray([0.10, 0.0, 0.05, 0.12])  # spreads a fifth of the whole ask's
    assert _best_of([whole, noise], 0.5).tolist() == pytest.approx((whole / 0.6).tolist())
    assert _best_of([whole, noise], 0.0)[3] == pytest.approx(1.0)  # kept, it tops window 3


def test_a_noise_question_keeps_its_one_file_alone() -> None:
    # the second question's word ("cap") is in no window and the model's similarities among
    # these look-alike modules are noise: it must not carry every file past the cut-off
    from tests.test_retrieval_structured import modules

    asked = "How is the retry delay computed? What is the cap?"
    request = Request(
        messages=[Message(role="user", content=asked)], documents=modules(with_retry=2)
    )
    assert len(questions_in(asked)) == 2
    assert [d.id for d in RetrievalStage(window_chars=700).run(request).documents] == ["c2"]


_GLACIER_DOCS = {
    "en": [
        (
            "The glacier expedition surveyed the glacier ice sheet. Glacier ice sheet survey "
            "expedition records the glacier ice thickness each winter."
        ),
        (
            "Basalt quarry workers cut stone for the harbour wall. The volcano near the town "
            "last erupted in 1821, burying two farms."
        ),
        "The orchard grows apples and pears. Its trees were planted in rows beside the old mill.",
        "The lighthouse keeper lit the lamp each evening. Ships passed the rocks safely at night.",
        "The canyon trail runs along the river for twelve miles below red cliffs.",
    ],
    "zh": [
        "冰川考察队测量了冰川冰盖。冰川冰盖考察记录每年冬天冰川冰层的厚度。",
        "采石工人为港口的墙切割石头。镇附近的火山最后一次喷发是在1821年，掩埋了两个农场。",
        "果园种植苹果和梨。果树种在老磨坊旁边，一排一排。",
        "灯塔看守人每天晚上点灯。船只在夜间安全地经过礁石。",
        "峡谷小径沿着河流延伸十二英里，位于红色悬崖之下。",
    ],
}
_GLACIER_ASKS = {
    "en": (
        "Which expedition surveyed the glacier ice sheet thickness in winter? "
        "When did the volcano erupt?"
    ),
    "zh": "哪个考察队在冬天测量了冰川冰盖的厚度？火山什么时候喷发的？",
}


@pytest.mark.parametrize(
    ("language", "scorer"), [("en", "bm25"), ("zh", "hybrid")], ids=["bm25", "zh-fallback"]
)
def test_a_lexical_run_that_matches_fewer_words_still_counts(language: str, scorer: str) -> None:
    # the volcano question matches two words once; the glacier one, many words many times.
    # BM25 spreads the second far less without any noise in it (the Chinese text is scored
    # by BM25 alone under the English default model), so the spread rule must not drop it
    docs = [Document(id=f"d{i}", text=t) for i, t in enumerate(_GLACIER_DOCS[language])]
    request = Request(
        messages=[Message(role="user", content=_GLACIER_ASKS[language])], documents=docs
    )
    runs = [
        Pipeline([RetrievalStage(scorer=scorer, each_question=on)]).run(request)
        for on in (True, False)
    ]
    assert [d.id for d in runs[1].request.documents] == ["d0"]  # as one text: no volcano
    assert [d.id for d in runs[0].request.documents] == ["d0", "d1"]
    assert runs[0].report.stages[0].details["questions"] == 2
