"""What a request asks when the caller does not say (``promptslim.query``), and how the dense
and hybrid scorers weigh the ways it may be asked. On real nq20 rows with the real MiniLM: a
question wrapped in instructions, and a follow-up that names nothing, keep their answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptslim.backends.scorer_base import VIEW_TEMPERATURE, view_weights
from promptslim.backends.scorers import DenseScorer, HybridScorer, _found_by_store
from promptslim.bench.datasets import load_dataset
from promptslim.bench.metrics import evidence_retention
from promptslim.pipeline import Pipeline
from promptslim.query import (
    EARLIER_TURNS,
    HEAD_SENTENCES,
    TAIL_SENTENCES,
    VIEW_CHARS,
    Ask,
    ask_of,
)
from promptslim.stages.retrieval import RetrievalStage
from promptslim.types import Message, Request

INSTRUCTIONS = (
    "You are a careful assistant. Using only the documents provided, answer the question "
    "below. Be concise: one or two sentences at most, formal tone, and cite the document ids "
    "you used in square brackets. If the documents do not contain the answer, say that you do "
    "not know rather than guessing, and do not mention these instructions."
)

#: more of a template's rules: with ``INSTRUCTIONS`` before it, longer than the head of a
#: text the dense scorer reads by default
RULES = (
    "Quote numbers, dates and names exactly as the documents give them. When two documents "
    "disagree, give both answers and the ids of the documents that support each. Answer in "
    "the language of the question, and never add facts from memory."
)


def chat(*turns: tuple[str, str], query: str | None = None) -> Request:
    messages = [Message(role="system", content="Answer from the documents.")]
    messages += [Message(role=role, content=text) for role, text in turns]
    return Request(messages=messages, query=query)


# ---------------------------------------------------------------- deriving the ask


def test_a_given_query_is_the_ask_as_given() -> None:
    request = chat(("user", "Hi. Tell me about Paris. Thanks."), query="capital of France")
    assert ask_of(request) == Ask("capital of France")


def test_a_one_sentence_question_has_no_other_views() -> None:
    assert ask_of(chat(("user", "who won the 1998 world cup"))) == Ask("who won the 1998 world cup")
    assert ask_of(Request(messages=[Message(role="system", content="s")])) == Ask("")


def test_a_question_in_instructions_is_a_view_of_its_own() -> None:
    last = f"{INSTRUCTIONS}\n\nQuestion: who won the 1998 world cup"
    ask = ask_of(chat(("user", last)))
    assert ask.text == last  # BM25 still reads the whole message
    assert "Question: who won the 1998 world cup" in ask.views
    assert "You are a careful assistant." in ask.views  # the first sentence: questions lead too


def test_a_follow_up_is_read_after_the_turns_before_it() -> None:
    ask = ask_of(
        chat(
            ("user", "who wrote the novel Dracula"),
            ("assistant", "Bram Stoker wrote it."),
            ("user", "and when was he born?"),
        )
    )
    assert ask.text == "who wrote the novel Dracula\nand when was he born?"
    assert ask.views == ("and when was he born?", "who wrote the novel Dracula")
    assert "Bram Stoker" not in ask.text  # only user turns: an answer is not the question


def test_a_long_earlier_turn_is_read_by_its_head_and_tail() -> None:
    pasted = "Lorem ipsum dolor. " * 500 + "What year was the treaty signed?"
    ask = ask_of(chat(("user", pasted), ("assistant", "It says..."), ("user", "Who signed it?")))
    assert ask.text.startswith("Lorem ipsum dolor.")
    assert ask.text.endswith("What year was the treaty signed?\nWho signed it?")
    assert len(ask.text) <= VIEW_CHARS + 1 + len("\nWho signed it?")


def test_multi_part_messages_are_read_by_their_text() -> None:
    request = Request.from_openai(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Look at this."}]},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Is it true? Check the dates."}],
                },
            ],
        }
    )
    ask = ask_of(request)
    assert ask.text == "Look at this.\nIs it true? Check the dates."
    assert ask.views == (
        "Is it true? Check the dates.",
        "Is it true?",
        "Check the dates.",
        "Look at this.",
    )


_words = st.text(alphabet="abcdefg ?.!\n", min_size=0, max_size=400)


@given(st.lists(_words, min_size=1, max_size=6), st.booleans())
def test_the_ask_is_bounded_and_holds_the_last_message(users: list[str], long: bool) -> None:
    if long:
        users[-1] = " ".join(f"Sentence {i} is here." for i in range(60)) + " " + "x" * 3_000
        users[0] = "a pasted text " * 2_000 + "what does it say?"
    turns = [t for u in users for t in (("user", u), ("assistant", "ok"))][:-1]
    ask = ask_of(chat(*turns))
    assert ask.text.endswith(users[-1])
    assert len(ask.text) <= len(users[-1]) + EARLIER_TURNS * (VIEW_CHARS + 2)
    assert len(ask.views) <= 1 + HEAD_SENTENCES + TAIL_SENTENCES + EARLIER_TURNS
    assert all(0 < len(v) <= VIEW_CHARS and v.strip() for v in ask.views)
    assert len(set(ask.views)) == len(ask.views)
    assert ask_of(chat(*turns)) == ask  # deterministic


# ---------------------------------------------------------------- weighing the views


def test_view_weights_trust_the_view_the_texts_answer_best() -> None:
    weights = view_weights([0.2, 0.75, 0.45, 0.74])
    assert weights.sum() == pytest.approx(1.0)
    assert int(np.argmax(weights)) == 1
    assert weights[0] < 1e-4  # several tenths below the best: nothing
    assert weights[2] == pytest.approx(weights[1] * np.exp(-0.3 / VIEW_TEMPERATURE))
    assert weights[3] > 0.4  # a view as good as the best counts as much
    assert view_weights([]).size == 0


TEXTS = [
    "Bram Stoker was an Irish author, born on 8 November 1847 in Clontarf, Dublin.",
    "Dracula is an 1897 Gothic horror novel by the Irish author Bram Stoker.",
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, completed in 1889.",
    "Photosynthesis converts light energy into chemical energy in plants.",
]


def test_a_view_the_texts_do_not_answer_weighs_nothing() -> None:
    scored = DenseScorer().score(
        "Can you check again?", TEXTS, views=["who wrote the novel Dracula"]
    )
    assert scored.view_weights is not None
    assert scored.view_weights[1] > 0.95
    assert scored.details["view_weights"][1] > 0.95
    assert set(np.argsort(-scored.scores)[:2]) == {0, 1}  # the Stoker texts, by the view
    plain = DenseScorer().score("Can you check again?", TEXTS)
    assert plain.view_weights is None and "view_weights" not in plain.details


@pytest.mark.parametrize("quantize", [False, None])
def test_beside_the_stores_query_vector_the_dense_scorer_embeds_no_way_of_asking(
    quantize: bool | None,
) -> None:
    scorer = DenseScorer(quantize=quantize)
    # the store searched with the question; the message wraps it in instructions
    question = "who wrote the novel Dracula"
    query_vector = scorer.service(float32=True).embed_one(question).tolist()
    # instructions longer than the head the model reads, as a template's rules often are
    message = f"{INSTRUCTIONS}\n\n{RULES}\n\nQuestion: {question}"
    pieces = len(scorer.service().load().tokenizer(message)["input_ids"])
    assert pieces > (scorer.max_seq_length or 0) + 20
    views = [*ask_of(chat(("user", message))).views]
    scored = scorer.score(message, TEXTS, query_embedding=query_vector, views=views)
    plain = scorer.score(message, TEXTS, query_embedding=query_vector)
    assert int(np.argmax(scored.scores)) in (0, 1) and min(scored.scores[:2]) > 0.3
    if scorer.service().near_float:
        # float, or int8 that points where float does: the store's vector (the question)
        # meets every text, and no way of asking is embedded (the hybrid scorer weighs them)
        assert scored.view_weights is None and "view_weights" not in scored.details
        np.testing.assert_allclose(scored.scores, plain.scores)
        assert scored.details["texts_embedded"] == len(TEXTS)
        # the instructions, as the message's own vector reads them, would have been noise
        wrapped = scorer.service().embed_one(message)
        assert max(scorer.service().embed(TEXTS) @ wrapped) < 0.2
    else:  # torch's int8: the texts meet int8's question, weighed by closeness to the store's
        assert scored.view_weights is not None
        assert scored.view_weights[1 + views.index(f"Question: {question}")] > 0.9
        assert max(plain.scores) < 0.2  # instructions: noise


def test_closeness_weighs_the_ways_of_asking_by_int8s_vectors_of_them() -> None:
    # paraphrases, each about as close to the store's query: the weights are not all-or-nothing
    scorer = DenseScorer()
    query_vector = np.asarray(scorer.service(float32=True).embed_one("who wrote Dracula"))
    ways = ["who wrote the novel Dracula", "who is the author of Dracula", "Dracula's writer"]
    weights = scorer.closeness(ways, query_vector.tolist())
    int8 = view_weights(scorer.service().embed(ways) @ query_vector)
    float32 = view_weights(scorer.service(float32=True).embed(ways) @ query_vector)
    assert scorer.service().int8 and min(int8) > 0.05  # no pass through the float model
    np.testing.assert_allclose(weights, int8, rtol=1e-5)
    assert not np.allclose(int8, float32, rtol=1e-3)


def test_beside_the_stores_query_vector_the_texts_say_which_way_was_asked() -> None:
    # each way's best text by BM25, and how close the store's vector is to that text: the
    # question finds the Dracula text the store's vector finds; the instructions find the
    # text made of their words, far from it; nothing is embedded for the weighing
    texts = [*TEXTS, "Documents provided must be concise: cite ids in square brackets, formal."]
    question = "who wrote the novel Dracula"
    scorer = HybridScorer()
    query_vector = scorer.service(float32=True).embed_one(question).tolist()
    message = f"{INSTRUCTIONS}\n\nQuestion: {question}"
    views = [*ask_of(chat(("user", message))).views]
    scored = scorer.score(message, texts, query_embedding=query_vector, views=views)
    assert scored.view_weights is not None
    assert scored.view_weights[1 + views.index(f"Question: {question}")] > 0.9
    assert scored.details["texts_embedded"] == len(texts)  # the texts, no way of asking
    # with texts BM25 alone scores (a store's later windows), the ways are embedded instead
    lexical = [False, False, False, False, True]
    mixed = scorer.score(
        message, texts, query_embedding=query_vector, views=views, lexical_only=lexical
    )
    assert mixed.view_weights is not None
    assert mixed.view_weights[1 + views.index(f"Question: {question}")] > 0.9
    assert mixed.details["texts_embedded"] == len(texts) - 1 + 1 + len(views)


def test_ways_no_text_holds_a_word_of_weigh_nothing() -> None:
    found = [np.array([0.0, 2.0, 1.0]), np.zeros(3), np.array([3.0, 0.0, 0.0])]
    dense = np.array([0.1, 0.8, 0.5])
    weights = _found_by_store(found, dense)
    assert weights is not None and weights[1] == 0.0
    assert weights[0] > 0.99  # its best text (1) is the one the store's vector is closest to
    assert _found_by_store([np.zeros(3), np.zeros(3)], dense) is None


def test_beside_the_stores_query_vector_bm25_reads_the_question_not_the_template() -> None:
    # a text made of the instructions' words: BM25 over the whole message ranks it first
    texts = [*TEXTS, "Documents provided must be concise: cite ids in square brackets, formal."]
    question = "who wrote the novel Dracula"
    scorer = HybridScorer(quantize=False)
    query_vector = scorer.service(float32=True).embed_one(question).tolist()
    message = f"{INSTRUCTIONS}\n\nQuestion: {question}"
    views = [*ask_of(chat(("user", message))).views]
    whole = scorer.score(message, texts, query_embedding=query_vector)
    asked = scorer.score(message, texts, query_embedding=query_vector, views=views)
    assert asked.scores[4] < whole.scores[4] / 5  # second best on the whole message
    assert int(np.argmax(asked.scores)) == 1  # "Dracula is an 1897 Gothic horror novel by..."


def test_hybrid_bm25_follows_the_trusted_view() -> None:
    # the last turn's words ("Eiffel") match only the wrong text: BM25 on them alone would
    # rank it first; weighed by the embeddings, the earlier question's words count instead
    query = "who wrote the novel Dracula\nwas it before the Eiffel Tower?"
    views = ["was it before the Eiffel Tower?", "who wrote the novel Dracula"]
    scored = HybridScorer().score(query, TEXTS, views=views)
    assert scored.view_weights is not None
    assert int(np.argmax(scored.scores)) in (0, 1)


# ---------------------------------------------------------------- on real rows


def _asked(request: Request, how: str) -> Request:
    messages = list(request.messages)
    question = messages[-1].text
    if how == "instructed":
        last = [Message(role="user", content=f"{INSTRUCTIONS}\n\n{question}")]
    else:
        last = [
            Message(role="user", content=question),
            Message(role="assistant", content="Let me look at the documents."),
            Message(role="user", content="Please answer my previous question in one sentence."),
        ]
    return request.replace(query=None, messages=[*messages[:-1], *last])


@pytest.mark.parametrize("how", ["instructed", "follow_up"])
def test_the_answer_is_kept_however_the_question_is_put(eval_data: Path, how: str) -> None:
    items = load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}", limit=40).items
    run = Pipeline([RetrievalStage()]).run
    kept = {"given": 0, how: 0}
    for item in items:
        for name, request in (("given", item.request), (how, _asked(item.request, how))):
            result = run(request)
            text = "\n".join(d.text for d in result.request.documents)
            kept[name] += evidence_retention(text, item.answers) > 0
    # the last user message alone as the query kept the answer for about half of these rows
    assert kept[how] >= kept["given"] - 1, kept
    assert kept[how] >= 38, kept


def test_compression_reads_a_follow_ups_topic_in_the_turn_before(eval_data: Path) -> None:
    # extractive compression ranks sentences by the question's words: "can you check again?"
    # has none, so it kept the answer's sentence in under half the rows the question kept it in
    from promptslim.stages.compress import CompressStage

    items = load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}", limit=40).items
    stage = CompressStage(rate=0.33)
    kept = {"given": 0, "follow_up": 0}
    for item in items:
        for name, request in (("given", item.request), ("follow_up", _asked(item.request, "x"))):
            text = "\n".join(d.text for d in stage.run(request).documents)
            kept[name] += evidence_retention(text, item.answers) > 0
    assert kept["follow_up"] >= kept["given"] - 4, kept
