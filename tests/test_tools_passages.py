"""Passages in a plain-text tool result (``backends.tools.passages``): a retriever tool's
documents joined by blank lines go to the retrieval stage, not to the sentence picker, which
lost answers whose sentence does not repeat the question's words."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from promptslim.backends.tools.documents import MAX_ITEMS
from promptslim.backends.tools.passages import find_passages
from promptslim.backends.tools.prose import reads_as_prose
from promptslim.backends.tools.sections import TITLE_CHARS, Heading, section_headings, title
from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.bench.metrics import evidence_retention
from promptslim.stages.tools import ToolsStage
from promptslim.types import Request

BLOCK = (
    "The harbour town grew around a fish market in the twelfth century, and its stone quay was "
    "rebuilt twice after storms. Ferries now leave for the islands every hour in summer."
)


def _text(n: int = 4, sep: str = "\n\n") -> str:
    return sep.join(f"Town {i}. {BLOCK}" for i in range(n))


def _asked(question: str, text: str, arguments: str = "{}") -> Request:
    call = {
        "id": "c0",
        "type": "function",
        "function": {"name": "retrieve", "arguments": arguments},
    }
    return Request.from_openai(
        {
            "messages": [
                {"role": "user", "content": question},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c0", "content": text},
            ]
        }
    )


@pytest.fixture(scope="module")
def nq(eval_data: Path) -> list[BenchItem]:
    return load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}", limit=20).items


def test_blank_line_blocks_of_prose_are_passages_with_exact_spans() -> None:
    text = "\n" + _text(3, "\n \n\n") + "\n"
    found = find_passages(text)
    assert found is not None and len(found.bodies) == 3
    assert all(text[a:b] == body for (a, b), body in zip(found.spans, found.bodies))
    assert found.bodies[1] == f"Town 1. {BLOCK}"


@pytest.mark.parametrize(
    "text",
    [
        "\n".join(f"2026-12-05 10:{i:02d}:00 INFO worker {i} done" for i in range(80)),
        "\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(60)),
        "\n\n".join(
            f"{i}: " + "/usr/lib/python3/site-packages/pkg/module_name.py" * 3 for i in range(9)
        ),
        "short line\n\nanother short one",
    ],
    ids=["log", "code", "paths", "short"],
)
def test_what_is_not_passages(text: str) -> None:
    assert find_passages(text) is None


def test_left_out_blocks_become_one_marker_a_run_and_separators_stay() -> None:
    text = _text(5)
    found = find_passages(text)
    assert found is not None
    body = found.bodies[3]
    cut = body.index("Ferries")
    out = found.render({0: None, 3: [(0, cut)]})
    assert out is not None
    parts = out.text.split("\n\n")
    assert parts[0] == found.bodies[0]
    assert parts[1].startswith("[… 2 passages elided id=ps")
    assert parts[2].startswith(body[:cut].strip()) and "chars elided" in parts[2]
    assert parts[3].startswith("[… 1 passage elided id=ps")
    originals = {e.where: e.original for e in out.elisions}
    a, b = found.spans[1][0], found.spans[2][1]
    assert originals[f"chars {a}-{b}"] == text[a:b]


def test_a_retriever_tools_text_keeps_the_answer_the_sentence_picker_lost(
    nq: list[BenchItem],
) -> None:
    """The first 20 nq20-dev questions, their passages as LangChain's retriever tool sends
    them (texts joined by blank lines)."""
    chosen, picked = ToolsStage(), ToolsStage(documents=False)
    kept = lost = chars_in = chars_out = 0
    for item in nq:
        text = "\n\n".join(f"{d.title}\n{d.text}" for d in item.request.documents)
        request = _asked(item.request.query or "", text)
        out = chosen.run(request).request.messages[-1].text
        chars_in, chars_out = chars_in + len(text), chars_out + len(out)
        kept += evidence_retention(out, item.answers) > 0
        lost += evidence_retention(picked.run(request).request.messages[-1].text, item.answers) == 0
    assert kept >= 19 and chars_out < 0.35 * chars_in
    assert lost >= 1  # the sentence picker, for scale


def test_langchains_retriever_tool_output_is_passages(nq: list[BenchItem]) -> None:
    """What LangChain's own ``create_retriever_tool`` sends (its documents' texts joined by
    blank lines) is read as passages, one a document, and cut by the retrieval stage."""
    from langchain_core.documents import Document as LCDocument
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import create_retriever_tool

    item = nq[2]
    pages = [LCDocument(page_content=f"{d.title}\n{d.text}") for d in item.request.documents]

    class Fixed(BaseRetriever):  # the retriever is ours to fix; the tool is LangChain's
        def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[LCDocument]:
            return pages

    text = create_retriever_tool(Fixed(), "search", "Searches the wiki.").invoke({"query": "q"})
    found = find_passages(text)
    assert found is not None and found.bodies == tuple(p.page_content for p in pages)
    out = ToolsStage().run(_asked(item.request.query or "", text)).request.messages[-1].text
    assert len(out) < 0.5 * len(text) and evidence_retention(out, item.answers) > 0


def test_a_block_that_holds_the_calls_literal_stays(nq: list[BenchItem]) -> None:
    item = nq[0]
    blocks = [f"Ticket HAR-{100 + i}. {d.text}" for i, d in enumerate(item.request.documents)]
    text, question = "\n\n".join(blocks), item.request.query or ""
    plain = ToolsStage().run(_asked(question, text)).request.messages[-1].text
    dropped = next(b for b in blocks if b not in plain)  # off the question: ranked out
    named = _asked(question, text, json.dumps({"ticket": dropped.split(".")[0][7:]}))
    assert dropped in ToolsStage().run(named).request.messages[-1].text


def test_a_heading_goes_with_the_block_after_it() -> None:
    text = f"## Ferries\n\n{_text(2)}\n\n## Markets\n\n{BLOCK}"
    found = find_passages(text)
    assert found is not None and len(found.bodies) == 3
    assert found.bodies[0] == f"## Ferries\n\nTown 0. {BLOCK}"
    assert found.bodies[1] == f"Town 1. {BLOCK}"
    assert found.bodies[2] == f"## Markets\n\n{BLOCK}"


def test_markdown_headings_in_a_row_go_with_the_block_after_them_short_paragraphs_pair() -> None:
    text = f"## Ferries\n\n### Summer\n\n{BLOCK}\n\n## Markets\n\n{BLOCK}"
    found = find_passages(text)
    assert found is not None
    assert found.bodies == (f"## Ferries\n\n### Summer\n\n{BLOCK}", f"## Markets\n\n{BLOCK}")
    # a paragraph shorter than a heading (Chinese prose) goes with the next one, no further
    short = "港口小镇在十二世纪围绕鱼市发展起来，石砌码头在风暴后重建过两次，夏季每小时都有渡轮开往各个岛屿。"
    paragraphs = [f"{k}{short}" for k in range(6)]
    found = find_passages("\n\n".join(paragraphs))
    assert found is not None and len(found.bodies) == 3
    assert found.bodies[0] == f"{paragraphs[0]}\n\n{paragraphs[1]}"


def test_a_block_is_titled_by_the_markdown_headings_it_is_under() -> None:
    bodies = [
        "# Runbook\n\nIntro",
        "## auth-api\n\nText",
        "More text",
        "```sh\n# a shell comment, no heading\nls\n```",
        "### Limits\n\nText",
        "```\nopen fence",
        "# inside the fence still\n```",
        "## billing-api ##\n\nText",
    ]
    titles = [title(h) for h in section_headings(bodies)]
    assert titles == [
        "Runbook",
        "Runbook / auth-api",
        "Runbook / auth-api",
        "Runbook / auth-api",
        "Runbook / auth-api / Limits",
        "Runbook / auth-api / Limits",
        "Runbook / auth-api / Limits",
        "Runbook / billing-api",  # a heading closes those of its level and below
    ]
    assert section_headings(["Plain", "text"]) == ((), ())
    assert title([Heading(0, 0, 1, 1, "x" * 400)]) == "x" * TITLE_CHARS


def _notes(target: int) -> tuple[str, str]:
    """Service notes in Markdown: each service's limit two blocks below its heading, in a
    paragraph that names no service; the text and the target's limit sentence."""
    parts = ["# Service notes"]
    for k in range(10):
        parts += [
            f"### billing-worker-{k}",
            (
                f"Service {k} consumes events from the shared queue and writes its results to the "
                "primary store. It was migrated to the new cluster last quarter and runs well."
            ),
            (
                f"Operators should keep in mind that the upstream rate limit is {300 + 7 * k} "
                "requests per second, and that bursts above it are rejected by the gateway."
            ),
        ]
    return "\n\n".join(parts), f"rate limit is {300 + 7 * target} requests"


def test_a_paragraph_below_a_named_heading_keeps_the_answer_and_its_heading() -> None:
    text, answer = _notes(6)
    found = find_passages(text)
    assert found is not None and found.titles[-1] == "Service notes / billing-worker-9"
    request = _asked("What upstream rate limit applies to billing-worker-6?", text)
    out = ToolsStage().run(request).request.messages[-1].text
    assert answer in out and len(out) < 0.6 * len(text)
    # every kept limit sentence comes with its own service's heading above it
    for k in range(10):
        if f"rate limit is {300 + 7 * k} " in out:
            heading = out.index(f"### billing-worker-{k}\n")
            assert heading < out.index(f"rate limit is {300 + 7 * k} ")


def test_a_kept_block_keeps_the_line_of_its_heading() -> None:
    text, _ = _notes(0)
    found = find_passages(text)
    assert found is not None
    last = len(found.bodies) - 1  # the last limit sentence, its heading two blocks up
    out = found.render({last: None})
    assert out is not None
    assert out.text.startswith("# Service notes\n\n[… ")
    assert "### billing-worker-9\n\n[… " in out.text and out.text.endswith(found.bodies[last])
    assert "### billing-worker-8" not in out.text


def test_more_blocks_than_a_document_list_may_hold_go_to_the_text_compressor() -> None:
    """The ranking's work is bounded by the blocks it reads, as a JSON list's by its items."""
    assert find_passages(_text(MAX_ITEMS)) is not None
    text = _text(MAX_ITEMS + 1)
    assert find_passages(text) is None
    out = ToolsStage().run(_asked("When do the ferries leave?", text))
    assert out.report.stages[0].changes[0].reason.startswith("tools/text")


def _zh_search(seed: int, n: int) -> list[tuple[BenchItem, list[str]]]:
    import random

    from promptslim.bench.gen_rag import rag_zh_item

    rng = random.Random(seed)
    items = [rag_zh_item(rng, i, n_documents=40) for i in range(n)]
    return [(item, [d.text for d in item.request.documents]) for item in items]


def _zh_result(shape: str, docs: list[str]) -> str:
    """A search's Chinese passages as a tool writes them: ``text`` (blocks), ``json`` (one
    array), ``jsonl`` (a JSON object a line) or ``jsonl_ascii`` (the same by ``json.dumps``'
    default: every Chinese character a ``\\u`` escape)."""
    if shape == "text":
        return "\n\n".join(docs)
    records = [{"title": f"r{k}", "content": d} for k, d in enumerate(docs)]
    if shape == "json":
        return json.dumps(records, ensure_ascii=False)
    return "\n".join(json.dumps(r, ensure_ascii=shape == "jsonl_ascii") for r in records)


def _read(text: str) -> str:
    """``text`` with its ``\\u`` escapes decoded, as the model reads it."""
    return re.sub(r"\\u([0-9a-f]{4})", lambda m: chr(int(m.group(1), 16)), text)


@pytest.mark.parametrize("shape", ["text", "json", "jsonl", "jsonl_ascii"])
def test_chinese_search_results_are_passages_and_keep_the_answer(shape: str) -> None:
    # a CJK character says what a word does: counted by characters a Chinese passage's lines
    # look short, and its search results go to the text compressor or the JSON crusher, which
    # keep the answer in 0.43 (text) and 0.10 (JSON) of such requests; as JSON Lines, its
    # marks take the lines' share of letters under prose's, and the log compressor keeps it
    # in a third
    from promptslim.tokens import get_counter

    counter = get_counter()
    kept = sent = given = 0
    for item, docs in _zh_search(seed=11, n=20):
        assert reads_as_prose(docs)
        result = _zh_result(shape, docs)
        query = item.request.query or ""
        out = ToolsStage().run(_asked(query, result, json.dumps({"query": query})))
        text = out.messages[-1].text
        kept += evidence_retention(_read(text), item.answers) == 1.0
        sent += counter.count(text)
        given += counter.count(result)
    assert kept >= 19
    assert sent < 0.2 * given


@pytest.mark.parametrize(
    "text",
    [
        "\n".join(f"第{i}行 错误" for i in range(60)),  # short Chinese lines: a log, a list
        "\n\n".join(["标题"] * 30),
        "\n".join("2024-05-01 12:00:0" + str(i % 10) + " 服务 启动 完成" for i in range(80)),
        # a JSON Lines log of Chinese messages, with and without escapes: its fields' marks
        # and numbers outweigh them
        *(
            "\n".join(
                json.dumps(
                    {"ts": f"2024-05-01T12:00:{i:02d}", "level": "info", "msg": "服务启动完成"},
                    ensure_ascii=ascii_only,
                )
                for i in range(60)
            )
            for ascii_only in (False, True)
        ),
    ],
)
def test_short_chinese_lines_are_not_prose(text: str) -> None:
    assert not reads_as_prose(text.split("\n\n"))
