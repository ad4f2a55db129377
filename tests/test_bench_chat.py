"""The chat benchmark (benchmarks/bench_chat.py) measures what it claims: its ``export`` form
is a document list of untitled messages, which the retrieval stage ranks item by item and
reads as one text, its ``log`` form plain lines; both hold every passage's words in order."""

from __future__ import annotations

import json
from pathlib import Path

import bench_chat
import pytest

from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.stages.retrieval_lists import expand_lists

SAMPLE = Path(__file__).parent / "data" / "nq20-dev.jsonl.gz"


@pytest.fixture(scope="module")
def nq() -> list[BenchItem]:
    return load_dataset(f"nq:{SAMPLE}", limit=2).items


def test_the_export_is_an_untitled_document_list_in_order(nq: list[BenchItem]) -> None:
    item = bench_chat.chat_item(nq[0], "export", seed=0)
    assert len(item.request.documents) == 5
    listed = expand_lists(item.request.documents)
    assert listed is not None and len(listed.lists) == 5  # every channel is ranked by message
    assert all(not any(found.titles) for found in listed.lists.values())
    follows = listed.sequences()
    assert len(follows) == len(listed.documents) - 5  # each message but a channel's last
    first = json.loads(item.request.documents[0].text)
    passage = nq[0].request.documents[0]
    assert first[0]["text"].startswith(passage.title or "")
    assert " ".join(m["text"] for m in first).count(passage.text.split(".")[0]) == 1


def test_the_log_holds_the_same_messages_as_lines(nq: list[BenchItem]) -> None:
    export = bench_chat.chat_item(nq[1], "export", seed=3)
    log = bench_chat.chat_item(nq[1], "log", seed=3)
    for as_json, as_lines in zip(export.request.documents, log.request.documents):
        messages = json.loads(as_json.text)
        lines = as_lines.text.splitlines()
        assert len(lines) == len(messages)
        assert all(
            line.endswith(m["text"]) and m["user"] in line for line, m in zip(lines, messages)
        )
    assert expand_lists(log.request.documents) is None


def test_messages_end_at_sentences_not_at_initials() -> None:
    """No one ends a chat message at "J.P." or "St.": the answer stays in one message."""
    text = "Scott Hudson enters J.P. Zenger High. It is named after St. Ignatius. Daniel A. Dailey won."
    assert bench_chat._sentences(text) == [
        "Scott Hudson enters J.P. Zenger High.",
        "It is named after St. Ignatius.",
        "Daniel A. Dailey won.",
    ]
    assert bench_chat._sentences("It costs approx. three euros. Pay here.") == [
        "It costs approx. three euros.",
        "Pay here.",
    ]


def test_the_export_is_written_as_sent_not_escaped(nq: list[BenchItem]) -> None:
    """The JSON holds each character as itself, as the other benchmarks' JSON does, so the
    answer, a no-break space or a dash in it, is found in what is sent."""
    item = bench_chat.chat_item(nq[0], "export", seed=0)
    text = "".join(d.text for d in item.request.documents)
    assert "\\u" not in text


def test_the_tool_form_is_one_read_channel_result_a_channel(nq: list[BenchItem]) -> None:
    """No documents: each channel's messages, as in the export, in a tool message."""
    export = bench_chat.chat_item(nq[0], "export", seed=5)
    tool = bench_chat.chat_item(nq[0], "tool", seed=5)
    assert not tool.request.documents and tool.metadata["question"] == nq[0].request.query
    results = [m for m in tool.request.messages if m.role == "tool"]
    assert len(results) == len(export.request.documents) == 5
    for result, channel in zip(results, export.request.documents):
        assert json.loads(result.text)["messages"] == json.loads(channel.text)


def test_short_messages_cut_a_sentence_after_its_commas_and_keep_every_word() -> None:
    """Pieces of 25 characters or more: a shorter one goes with the next, a short last one
    with the one before."""
    sentence = (
        "Born in 1950 in a small town, she moved to Paris, then Rome; she died there in 2001."
    )
    pieces = bench_chat._short(sentence)
    assert pieces == [
        "Born in 1950 in a small town,",
        "she moved to Paris, then Rome; she died there in 2001.",
    ]
    assert " ".join(pieces) == sentence
    longer = "Born in 1950 in a small town, she moved to Paris; she died there in the spring."
    assert bench_chat._short(longer) == [
        "Born in 1950 in a small town,",
        "she moved to Paris; she died there in the spring.",
    ]
    assert bench_chat._short("Short, and done.") == ["Short, and done."]
    dated = "He was born in a small town on December 21, 1984, and races cars for a living."
    assert bench_chat._short(dated) == [
        "He was born in a small town on December 21, 1984,",
        "and races cars for a living.",
    ]


def test_the_short_forms_hold_the_same_words_in_more_messages(nq: list[BenchItem]) -> None:
    export = bench_chat.chat_item(nq[0], "export", seed=2)
    short = bench_chat.chat_item(nq[0], "export_short", seed=2)
    for whole, cut in zip(export.request.documents, short.request.documents):
        long_texts = [m["text"] for m in json.loads(whole.text)]
        short_texts = [m["text"] for m in json.loads(cut.text)]
        assert len(short_texts) > len(long_texts)
        assert " ".join(short_texts) == " ".join(long_texts)
    tool = bench_chat.chat_item(nq[0], "tool_short", seed=2)
    results = [json.loads(m.text)["messages"] for m in tool.request.messages if m.role == "tool"]
    assert results == [json.loads(d.text) for d in short.request.documents]
