"""Retrieved context written into the last user message (``promptslim.context_blocks``,
``stages.retrieval_inline``): a client that sends its context inside a question template, with
no ``Request.documents``, had every token of it sent; the block is now ranked as documents and
what is kept goes back in its place."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.bench.metrics import evidence_retention
from promptslim.context_blocks import MIN_CHARS, find_context_block
from promptslim.pipeline import Pipeline
from promptslim.stages.compress import CompressStage
from promptslim.stages.history import HistoryStage
from promptslim.stages.prefix import PrefixStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.retrieval_inline import inline_context
from promptslim.tokens import count_request, get_counter
from promptslim.types import Budget, Message, Request

SENTENCE = (
    "The harbour town grew around a fish market in the twelfth century, and its stone quay was "
    "rebuilt twice after storms. "
)
CONTEXT = "\n\n".join(SENTENCE * 3 + f"Ferries leave pier {i} every hour." for i in range(5))

#: templates as clients write them: each puts CONTEXT (``{c}``) before or around a question
TEMPLATES = {
    "llamaindex": (
        "Context information is below.\n---------------------\n{c}\n---------------------\n"
        "Given the context information and not prior knowledge, answer the query.\n"
        "Query: {q}\nAnswer: "
    ),
    "context_heading": "Context:\n{c}\n\nQuestion: {q}",
    "same_line": "Use the context to answer.\nQuestion: {q} \nContext: {c} \nAnswer:",
    "lead_in": "Answer the question based on the following documents.\n\n{c}\n\n{q}",
    "below": "Answer using only the context below.\n\n{c}\n\nQuestion: {q}",
    "markdown": "## Sources\n\n{c}\n\n## Question\n{q}",
    "brackets": "[CONTEXT]\n{c}\n[/CONTEXT]\n\n{q}",
    "triple_quotes": 'Use the below articles.\n\nArticle section:\n"""\n{c}\n"""\n\nQuestion: {q}',
    "tags": "<context>\n{c}\n</context>\n\n{q}",
    "colon_lead_in": "Answer based only on these sources:\n\n{c}\n\n---\n\nQ: {q}\nA:",
    "here_s": "Here's some background information that might help:\n\n{c}\n\nNow, {q}",
    "lead_out": "{c}\n\nUsing the information above, answer: {q}",
    "lead_out_intro": "Read this:\n\n{c}\n\nBased on the above, {q}",
}


def _user(text: str, **extra: Any) -> Request:
    return Request(messages=[Message(role="user", content=text)], **extra)


@pytest.fixture(scope="module")
def nq(eval_data: Path) -> list[BenchItem]:
    return load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}", limit=20).items


def _chunks(item: BenchItem) -> str:
    return "\n\n".join(f"{d.title}\n{d.text}" for d in item.request.documents)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_each_template_s_block_is_the_context(name: str) -> None:
    text = TEMPLATES[name].format(c=CONTEXT, q="Which pier has the ferry?")
    block = find_context_block(text)
    assert block is not None
    assert text[block.start : block.end].strip() == CONTEXT


@pytest.mark.parametrize(
    "text",
    [
        "Context:\n" + SENTENCE * 3,  # under MIN_CHARS
        SENTENCE * 20 + "\n\nWhat happened to the quay?",  # no mark
        "def run(\n    context: Any | None = None,\n) -> None:\n" + "    pass\n" * 300,
        "Here is my essay.\n\n" + SENTENCE * 20 + "\n\nIs it good?",
    ],
)
def test_text_with_no_marked_block_has_none(text: str) -> None:
    assert find_context_block(text) is None or inline_context(_user(text)) is None


def test_code_or_a_log_under_a_heading_is_not_ranked() -> None:
    log = "\n".join(f"2024-05-0{i % 9 + 1} 12:00:0{i % 10} INFO worker={i} ok" for i in range(80))
    request = _user(f"Context:\n{log}\n\nQuestion: which worker failed?")
    assert find_context_block(request.messages[0].text) is not None  # marked...
    assert inline_context(request) is None  # ...but not prose: left whole
    out = RetrievalStage(scorer="bm25", inline_context=True).run(request)
    assert out.messages[0].text == request.messages[0].text


@pytest.mark.parametrize("name", ["llamaindex", "context_heading", "lead_in", "tags"])
def test_the_answer_stays_and_the_block_shrinks(nq: list[BenchItem], name: str) -> None:
    counter = get_counter()
    kept = 0
    given_tokens = sent_tokens = 0
    for item in nq:
        template = TEMPLATES[name]
        request = _user(template.format(c=_chunks(item), q=item.request.query))
        out, report = RetrievalStage(inline_context=True).run_report(request)
        text = out.messages[0].text
        kept += evidence_retention(text, item.answers) == 1.0
        given_tokens += count_request(request, counter)
        sent_tokens += count_request(out, counter)
        assert not out.documents
        assert report.details["inline_context"]["message"] == 0
        # the template around the block goes on as it came
        head, tail = re.split(r"\{c\}", template)
        assert text.startswith(head.format(q=item.request.query).rstrip())
        assert text.rstrip().endswith(tail.format(q=item.request.query).strip())
    assert kept >= 19
    assert sent_tokens < 0.35 * given_tokens


def _elements(item: BenchItem) -> str:
    return (
        "<documents>\n"
        + "\n".join(
            f'<document index="{k}">\n<source>{d.title}</source>\n<document_content>\n{d.text}\n'
            "</document_content>\n</document>"
            for k, d in enumerate(item.request.documents)
        )
        + "\n</documents>"
    )


def test_elements_are_documents_and_keep_their_tags(nq: list[BenchItem]) -> None:
    kept = 0
    for item in nq:
        question = item.request.query or ""
        request = _user(f"{_elements(item)}\n\n{question}")
        out, report = RetrievalStage(inline_context=True).run_report(request)
        text = out.messages[0].text
        assert report.details["inline_context"]["documents"] == len(item.request.documents)
        assert text.startswith("<documents>\n<document index=")
        assert text.endswith(f"</documents>\n\n{question}")
        for tag in ("document", "source", "document_content"):
            assert len(re.findall(rf"<{tag}[ >]", text)) == text.count(f"</{tag}>") >= 1
        indexes = [int(i) for i in re.findall(r'<document index="(\d+)">', text)]
        assert indexes == sorted(indexes) and len(indexes) < len(item.request.documents)
        for i in indexes:  # each element kept has its own source with it
            assert f"<source>{item.request.documents[i].title}</source>" in text
        kept += evidence_retention(text, item.answers) == 1.0
    assert kept >= 19


def test_a_whole_ask_sends_the_message_byte_for_byte(nq: list[BenchItem]) -> None:
    request = _user(TEMPLATES["below"].format(c=_chunks(nq[0]), q="Summarize the context."))
    out, report = RetrievalStage(inline_context=True).run_report(request)
    assert out.messages[0].content == request.messages[0].content
    assert report.details["whole_ask"]


def test_left_alone_off_in_a_system_message_or_beside_documents(nq: list[BenchItem]) -> None:
    item = nq[0]
    text = TEMPLATES["context_heading"].format(c=_chunks(item), q=item.request.query)
    off = _user(text)  # off by default: the last user message goes as written (invariant 1)
    assert RetrievalStage().run(off).messages[0].text == text
    assert Pipeline.default().run(off).request.messages[0].text == text
    system = Request(
        messages=[
            Message(role="system", content=text),
            Message(role="user", content=item.request.query or ""),
        ]
    )
    assert inline_context(system) is None
    stages = [PrefixStage(), HistoryStage()]
    out = Pipeline([*stages, RetrievalStage(inline_context=True)]).run(system).request
    assert out.messages == Pipeline(stages).run(system).request.messages  # the prefix's work
    with_docs = item.request.replace(messages=[Message(role="user", content=text)])
    assert inline_context(with_docs) is None


def test_a_budget_counts_the_block_as_documents(nq: list[BenchItem]) -> None:
    # the block goes through the pipeline as documents: the budget shares it out and the
    # compress stage shrinks it, where the last user message alone would be over the total
    item = nq[1]
    text = TEMPLATES["llamaindex"].format(c=_chunks(item), q=item.request.query)
    earlier = [Message(role="user", content=SENTENCE), Message(role="assistant", content="Yes.")]
    request = Request(messages=[*earlier * 5, Message(role="user", content=text)])
    pipeline = Pipeline(
        [HistoryStage(), RetrievalStage(scorer="bm25", inline_context=True), CompressStage()],
        budget=Budget(total=150),
    )
    result = pipeline.run(request)
    out = result.request
    assert result.report.tokens_out <= 150
    assert result.report.tokens_out == count_request(out, get_counter())
    assert result.report.tokens_in == count_request(request, get_counter())
    assert not out.documents
    assert out.messages[-1].text.startswith("Context information is below.\n---")
    assert out.messages[-1].text.rstrip().endswith(f"Query: {item.request.query}\nAnswer:")
    assert len(out.messages) < len(request.messages)  # turns dropped before the one put back
    details = result.report.stages[1].details
    assert details["inline_context"]["kind"] == "heading"


_WORDS = st.sampled_from(["harbour", "ferry", "quay", "storm", "market", "pier", "island"])
_BODY = st.lists(_WORDS, min_size=70, max_size=120).map(lambda w: " ".join(w).capitalize() + ".")


@settings(max_examples=40, deadline=None)
@given(bodies=st.lists(_BODY, min_size=3, max_size=8), keep=st.data())
def test_put_back_keeps_the_template_and_the_kept_elements_in_order(
    bodies: list[str], keep: st.DataObject
) -> None:
    block = "\n".join(f"<doc id='{i}'>\n{b}\n</doc>" for i, b in enumerate(bodies))
    assert len(block) >= MIN_CHARS
    text = f"Use these sources.\n\n<context>\n{block}\n</context>\n\nWhich pier?"
    found = inline_context(_user(text))
    assert found is not None
    docs = found.request.documents
    chosen = keep.draw(st.sets(st.sampled_from([d.id for d in docs])))
    ranked = found.request.replace(documents=[d for d in docs if d.id in chosen])
    out = found.put_back(ranked).messages[0].text
    assert out.startswith("Use these sources.\n\n<context>\n")
    assert out.endswith("\n</context>\n\nWhich pier?")
    kept_bodies = [d.text for d in docs if d.id in chosen]
    assert re.findall(r"<doc id='\d+'>\n(.*?)\n</doc>", out, re.DOTALL) == kept_bodies
    every = found.put_back(found.request).messages[0].text
    assert every == text  # every element kept: byte for byte


def test_each_kind_is_reported(nq: list[BenchItem]) -> None:
    kinds: dict[str, Callable[[str, str], str]] = {
        "tags": lambda c, q: f"<documents>\n{c}\n</documents>\n\n{q}",
        "heading": lambda c, q: f"Context:\n{c}\n\nQuestion: {q}",
        "lead_in": lambda c, q: f"Use the following passages.\n\n{c}\n\n{q}",
        "lead_out": lambda c, q: f"{c}\n\nGiven the documents above: {q}",
    }
    for kind, make in kinds.items():
        text = make(_chunks(nq[2]), nq[2].request.query or "")
        _, report = RetrievalStage(scorer="bm25", inline_context=True).run_report(_user(text))
        assert report.details["inline_context"]["kind"] == kind


def test_many_open_tags_read_the_text_once_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # each open tag looked for its close in the rest of the text: quadratic in the tags
    import promptslim.context_blocks as blocks

    searches: list[str] = []  # every pattern built or searched with by name, not compiled
    real_compile, real_finditer = blocks.re.compile, blocks.re.finditer

    def compiling(pattern: str, flags: int = 0) -> re.Pattern[str]:
        searches.append(pattern)
        return real_compile(pattern, flags)

    def finding(pattern: str, text: str, flags: int = 0) -> Any:
        searches.append(pattern)
        return real_finditer(pattern, text, flags)

    monkeypatch.setattr(blocks.re, "compile", compiling)
    monkeypatch.setattr(blocks.re, "finditer", finding)
    blocks.element_patterns.cache_clear()
    text = "<doc> word <context> word " * 5_000
    assert blocks.find_context_block(text) is None
    assert len(searches) <= 2 * 2  # an open and a close pattern for each of the two names


_PIECES = st.sampled_from(
    [
        SENTENCE * 4,
        "Context:\n",
        "Question: which pier?\n",
        "<documents>\n",
        "</documents>\n",
        "<doc id='1'>",
        "</doc>\n",
        "<source>Harbour</source>",
        "---------------------\n",
        "Use the following passages.\n\n",
        "\n\n",
        "Using the information above, answer.",
        "[CONTEXT]\n",
        "[/CONTEXT]\n",
        '"""\n',
    ]
)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_PIECES, min_size=1, max_size=40))
@example(pieces=["<doc id='1'>", "\n\n", "</doc>\n", "<doc id='1'>", SENTENCE * 12, "</doc>\n"])
def test_any_block_found_goes_back_byte_for_byte_when_all_is_kept(pieces: list[str]) -> None:
    text = "".join(pieces)
    found = inline_context(_user(text))
    if found is None:
        return
    block = found.block
    assert 0 <= block.start < block.end <= len(text)
    assert found.request.messages[0].text == text[: block.start] + text[block.end :]
    assert found.put_back(found.request).messages[0].text == text


ZH_SENTENCE = "港口小镇在十二世纪围绕鱼市发展起来，石砌码头在风暴后重建过两次。"
ZH_CONTEXT = "\n\n".join(ZH_SENTENCE * 3 + f"渡轮每小时从{i}号码头出发。" for i in range(5))
ZH_TEMPLATES = {
    "heading": "参考资料：\n{c}\n\n问题：{q}",
    "lead_in": "请根据以下资料回答问题。\n\n{c}\n\n{q}",
    "lead_in_some": "下面是一些相关文档，请据此回答。\n\n{c}\n\n问题：{q}",
    "lead_out": "{c}\n\n根据以上内容，回答：{q}",
}


@pytest.mark.parametrize("name", sorted(ZH_TEMPLATES))
def test_a_chinese_template_s_block_is_the_context(name: str) -> None:
    # shorter than MIN_CHARS by characters: a CJK character weighs three, as in the windows
    assert len(ZH_CONTEXT) < MIN_CHARS
    text = ZH_TEMPLATES[name].format(c=ZH_CONTEXT, q="渡轮从哪个码头出发？")
    block = find_context_block(text)
    assert block is not None
    assert text[block.start : block.end].strip() == ZH_CONTEXT


def test_chinese_search_passages_in_a_template_keep_the_answer() -> None:
    import random

    from promptslim.bench.gen_rag import rag_zh_item

    rng = random.Random(2)
    counter = get_counter()
    kept = given_tokens = sent_tokens = 0
    for i in range(20):
        item = rag_zh_item(rng, i, n_documents=16)
        context = "\n\n".join(d.text for d in item.request.documents)
        question = item.request.query or ""
        request = _user(ZH_TEMPLATES["heading"].format(c=context, q=question))
        out, report = RetrievalStage(inline_context=True).run_report(request)
        assert report.details["inline_context"]["kind"] == "heading"
        text = out.messages[0].text
        assert text.endswith(f"问题：{question}")
        kept += evidence_retention(text.replace(question, ""), item.answers) == 1.0
        given_tokens += count_request(request, counter)
        sent_tokens += count_request(out, counter)
    assert kept >= 19
    assert sent_tokens < 0.3 * given_tokens
