"""Document lists in tool results (``backends.tools.documents``, ``stages.tools_documents``): a
search tool's JSON answer goes to a retrieval stage, not to the record crusher, which kept each
passage's head and the items repeating the query's words and lost most answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.backends.tools.documents import (
    MAX_ITEMS,
    MIN_MESSAGES,
    find_documents,
    parse_json,
    render_documents,
)
from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.bench.metrics import evidence_retention
from promptslim.errors import ConfigError
from promptslim.stages.tools import ToolsStage
from promptslim.stages.tools_documents import _WARM_UP
from promptslim.types import Request

PASSAGE = (
    "The harbour town grew around a fish market in the twelfth century, and its stone quay was "
    "rebuilt twice after storms. Ferries now leave for the islands every hour in summer."
)


def _hits(n: int = 5, *, key: str = "snippet") -> list[dict[str, Any]]:
    return [
        {"name": f"Town {i}", "url": f"https://example.org/town-{i}", key: f"Town {i}. {PASSAGE}"}
        for i in range(n)
    ]


def _found(value: Any, **dumps: Any) -> Any:
    text = json.dumps(value, **dumps)
    return find_documents(parse_json(text), text)


def _search(item: BenchItem, **dumps: Any) -> Request:
    """``item``'s question, a search call with it and the passages as the tool's JSON."""
    question = item.request.query or ""
    hits = [{"title": d.title, "snippet": d.text} for d in item.request.documents]
    call = {"id": "c0", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    body = {
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "content": json.dumps(hits, **dumps)},
        ]
    }
    return Request.from_openai(body)


@pytest.fixture(scope="module")
def nq(eval_data: Path) -> list[BenchItem]:
    return load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}", limit=20).items


# ---------------------------------------------------------------- what counts as a document list


def test_a_list_of_passages_is_found_with_its_bodies_and_titles() -> None:
    found = _found(_hits())
    assert found is not None
    assert (found.where, found.body_key) == ("$", "snippet")
    assert found.titles == tuple(f"Town {i}" for i in range(5))
    assert found.bodies[2].startswith("Town 2. The harbour")


def test_a_wrapped_list_and_a_list_of_strings_are_found() -> None:
    wrapped = _found({"query": "ferries", "results": _hits(key="content"), "took_ms": 12})
    assert wrapped is not None and (wrapped.where, wrapped.body_key) == ("$.results", "content")
    strings = _found([f"Town {i}. {PASSAGE}" for i in range(4)])
    assert strings is not None and strings.body_key is None and strings.titles == (None,) * 4


def test_a_vector_stores_matches_keep_their_text_in_metadata() -> None:
    """Pinecone's shape: the passage and its title in each match's ``metadata``."""
    matches = [
        {"id": f"t{i}", "score": 0.9, "metadata": {"title": f"Town {i}", "text": f"{PASSAGE} {i}"}}
        for i in range(4)
    ]
    text = json.dumps({"matches": matches, "namespace": "towns"})
    found = find_documents(parse_json(text), text)
    assert found is not None
    assert (found.where, found.body_key) == ("$.matches", "metadata.text")
    assert found.titles == tuple(f"Town {i}" for i in range(4))
    cut = PASSAGE.index("Ferries")
    out = render_documents(found, {2: [(cut, len(found.bodies[2]))]})
    assert out is not None
    data = json.loads(out.text)
    assert data["namespace"] == "towns" and data["matches"][1]["id"] == "t2"
    assert data["matches"][1]["metadata"]["title"] == "Town 2"
    assert data["matches"][1]["metadata"]["text"].endswith(f"{PASSAGE[cut:]} 2")
    cut_where = [e.where for e in out.elisions if e.kind == "chars"]
    assert len(cut_where) == 1 and cut_where[0].startswith("$.matches[2].metadata.text[0:")


def test_beside_a_sibling_array_as_long_each_item_keeps_its_place() -> None:
    """Chroma's shape: ``ids``, ``documents`` and ``distances`` are read by index together."""
    docs = [f"Town {i}. {PASSAGE}" for i in range(4)]
    value = {"ids": ["a", "b", "c", "d"], "documents": docs, "distances": [0.1, 0.2, 0.3, 0.4]}
    found = _found(value)
    assert found is not None and found.aligned and found.where == "$.documents"
    out = render_documents(found, {1: None})
    assert out is not None
    data = json.loads(out.text)
    assert len(data["documents"]) == 4 and data["documents"][1] == docs[1]
    assert all(data["documents"][i].startswith("[… 1 item elided") for i in (0, 2, 3))
    assert data["ids"] == value["ids"]
    assert not _found({"query": "towns", "documents": docs}).aligned  # type: ignore[union-attr]


def test_chromas_query_result_one_list_per_query_keeps_each_items_place() -> None:
    """Chroma's ``query`` result as its client returns it: each field a list per query."""
    docs = [f"Town {i}. {PASSAGE}" for i in range(4)]
    value = {
        "ids": [["a", "b", "c", "d"]],
        "documents": [docs],
        "metadatas": [[{"source": f"town-{i}"} for i in range(4)]],
        "distances": [[0.1, 0.2, 0.3, 0.4]],
    }
    found = _found(value)
    assert found is not None and found.aligned and found.where == "$.documents[0]"
    out = render_documents(found, {2: [(0, 7)]})
    assert out is not None
    data = json.loads(out.text)
    assert data["ids"] == value["ids"] and data["distances"] == value["distances"]
    assert len(data["documents"][0]) == 4 and data["documents"][0][2].startswith("Town 2. [… ")
    assert sum(d.startswith("[… 1 item elided") for d in data["documents"][0]) == 3


def test_a_fetched_page_is_a_list_of_one_that_is_never_left_out() -> None:
    page = {
        "url": "https://example.org/towns",
        "title": "Towns",
        "content": "\n\n".join(f"Town {i}. {PASSAGE}" for i in range(6)),
    }
    found = _found({"status": 200, "page": page})
    assert found is not None and found.single
    assert (found.where, found.body_key, found.titles) == ("$.page", "content", ("Towns",))
    out = render_documents(found, {})  # the ranking kept nothing: the page stays whole
    assert out is None
    body = found.bodies[0]
    cut = body.index("Town 3")
    trimmed = render_documents(found, {0: [(cut, len(body))]})
    assert trimmed is not None
    data = json.loads(trimmed.text)
    assert data["status"] == 200 and data["page"]["url"] == page["url"]
    assert data["page"]["content"].startswith("[… ") and body[cut:] in data["page"]["content"]
    assert trimmed.elisions[0].where == f"$.page.content[0:{len(body[:cut].rstrip())}]"


def test_search_engine_snippets_are_found_beside_their_links() -> None:
    """Serper's shape: 100-160-character snippets, each beside a title and a link as long;
    what a reader reads is the title and the snippet, so links do not count against them."""
    hits = [
        {
            "title": f"Town {i}",
            "link": f"https://example.org/towns/{i}/harbour-history",
            "snippet": PASSAGE[:120],
        }
        for i in range(8)
    ]
    found = _found({"searchParameters": {"q": "ferries"}, "organic": hits})
    assert found is not None and found.where == "$.organic" and found.body_key == "snippet"
    short = [{**h, "snippet": PASSAGE[:70]} for h in hits]  # a title's length: not passages
    assert _found({"organic": short}) is None


def test_passages_in_chinese_are_found() -> None:
    text = "这座港口小镇在十二世纪围绕一个鱼市发展起来，它的石码头在风暴之后重建过两次。" * 5
    found = _found([{"title": f"小镇{i}", "content": text} for i in range(3)], ensure_ascii=False)
    assert found is not None and found.body_key == "content"


@pytest.mark.parametrize(
    "value",
    [
        [{"id": i, "state": "open", "title": f"Issue {i}", "body": "short"} for i in range(9)],
        # a diff is code in short lines, not a passage
        [{"filename": "a.py", "patch": "@@ -1,3 +1,3 @@\n-x = 1\n+x = 2\n y = 3\n" * 6}] * 4,
        # keys and encoded blobs are letters without spaces
        [{"title": f"key {i}", "key": "ssh-rsa " + "AAAAB3NzaC1yc2E" * 20} for i in range(4)],
        # passages that are a small part of a record listing
        [{**h, **{f"field_{k}": f"value {k} " * 8 for k in range(30)}} for h in _hits()],
    ],
    ids=["records", "diffs", "keys", "minor-part"],
)
def test_what_is_not_a_document_list(value: Any) -> None:
    assert _found(value) is None


def test_text_that_is_not_json_has_no_document_list() -> None:
    assert parse_json("Town 0. " + PASSAGE) is None
    assert parse_json('[{"snippet": "unterminated') is None


# a team channel in short messages, as people write in chat (each under the prose test's 100
# characters); the answer is two messages after the one that names the subject
SHORT_CHAT = [
    "Morning all, the coffee machine is broken again.",
    "Use the one by the kitchen until it is fixed.",
    "Has anyone seen the keys to the bike shed?",
    "They were on the hook by the door yesterday.",
    "The quarterly report draft is in the shared folder.",
    "Comments by Friday please, finance signs it off then.",
    "The Harbour Festival planning meeting is next week.",
    "Marta is booking a room and sending the agenda.",
    "It starts at 4 pm on Thursday in the Lighthouse room.",
    "Lunch today is from the Thai place on the corner.",
    "Put your orders in the sheet by noon please.",
    "The fire drill on Tuesday went well, four minutes.",
    "Please close the east wing windows before you leave.",
    "The forecast says heavy rain after midnight.",
]


def _channel(texts: list[str], **extra: str) -> dict[str, Any]:
    return {
        "ok": True,
        "messages": [{"user": f"U0{i % 3}", "text": t, **extra} for i, t in enumerate(texts)],
    }


def test_a_chats_short_messages_are_a_document_list_where_messages_are_asked_for() -> None:
    """Too short for the prose test, a channel's untitled messages read as passages where the
    caller asks for ``messages`` (the tools stage); not otherwise, not when titled, not when
    too few, and a list of names is no chat."""
    text = json.dumps(_channel(SHORT_CHAT))
    data = parse_json(text)
    found = find_documents(data, text, messages=True)
    assert found is not None and found.bodies == tuple(SHORT_CHAT)
    assert find_documents(data, text) is None
    titled = json.dumps(_channel(SHORT_CHAT, title="General"))
    assert find_documents(parse_json(titled), titled, messages=True) is None
    few = json.dumps(_channel(SHORT_CHAT[: MIN_MESSAGES - 1]))
    assert find_documents(parse_json(few), few, messages=True) is None
    assert (
        find_documents(
            parse_json(json.dumps(_channel(SHORT_CHAT[:MIN_MESSAGES]))),
            json.dumps(_channel(SHORT_CHAT[:MIN_MESSAGES])),
            messages=True,
        )
        is not None
    )
    names = json.dumps([{"id": i, "label": f"Blue widget {i}"} for i in range(20)])
    assert find_documents(parse_json(names), names, messages=True) is None
    # a JSON log's records, whose level the JSON crusher reads (it keeps the errors)
    levelled = [
        {"level": "ERROR" if i == 5 else "INFO", "message": t} for i, t in enumerate(SHORT_CHAT)
    ]
    log = json.dumps(levelled)
    assert find_documents(parse_json(log), log, messages=True) is None


def test_messages_shorter_than_their_timestamps_do_not_hide_the_body() -> None:
    """A chat export's body is its ``text`` even where a few replies ("ok", "thanks!") are
    shorter than the ``ts`` beside them: the body is the member with the most characters."""
    texts = [f"Town {i}. {PASSAGE}" for i in range(7)] + ["ok", "thanks!", "+1"]
    messages = [{"user": f"U0{i}", "text": t, "ts": f"17000011{i:02}.000100"} for i, t in enumerate(texts)]  # fmt: skip
    found = _found(messages)
    assert found is not None and found.body_path == ("text",) and found.bodies == tuple(texts)


def test_named_records_are_no_chat() -> None:
    """A listing whose longest member is a title (a site's popular pages, with their counts)
    names things; it is no chat, however prose-like the titles."""
    pages = [
        {"path": f"/acme/w/{i}", "title": f"How the blue widgets of batch {i} are painted", "count": i}
        for i in range(MIN_MESSAGES + 2)
    ]  # fmt: skip
    text = json.dumps(pages)
    assert find_documents(parse_json(text), text, messages=True) is None


def test_the_tools_stage_keeps_the_answer_after_a_short_message_naming_the_subject() -> None:
    call = {"id": "c0", "type": "function", "function": {"name": "read_channel", "arguments": "{}"}}
    question = "When is the Harbour Festival planning meeting?"
    request = Request.from_openai({"messages": [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": json.dumps(_channel(SHORT_CHAT))},
    ]})  # fmt: skip
    out, report = ToolsStage(min_chars=0).run_report(request)  # a short channel: it is ranked
    sent = out.messages[-1].text
    assert report.details["tools"][0]["kind"] == "documents"
    assert SHORT_CHAT[6] in sent and SHORT_CHAT[8] in sent  # the subject, the answer
    assert SHORT_CHAT[0] not in sent and "items elided" in sent  # the morning's news goes


# ---------------------------------------------------------------- writing the choice back


def test_left_out_items_and_stretches_become_markers_with_their_originals() -> None:
    text = json.dumps(_hits(6))
    found = find_documents(parse_json(text), text)
    assert found is not None
    body = found.bodies[4]
    cut = body.index("Ferries")
    out = render_documents(found, {1: None, 4: [(cut, len(body))]})
    assert out is not None and out.kind == "documents"
    data = json.loads(out.text)  # valid JSON
    assert data[1] == _hits(6)[1]  # a whole item is unchanged
    assert data[0].startswith("[… 1 item elided id=ps")
    assert data[2].startswith("[… 2 items elided id=ps")
    assert data[3]["snippet"].startswith("[… ") and data[3]["snippet"].endswith(body[cut:])
    by_where = {e.where: e for e in out.elisions}
    assert json.loads(by_where["$[2:4]"].original) == _hits(6)[2:4]
    left = body[:cut].rstrip()  # the space before the kept sentence stays beside the marker
    assert by_where[f"$[4].snippet[0:{len(left)}]"].original == left


def test_nothing_left_out_is_no_compression() -> None:
    found = _found(_hits(3))
    assert found is not None
    assert render_documents(found, dict.fromkeys(range(3))) is None


def test_escaped_input_stays_escaped() -> None:
    hits = [{"title": f"Zürich {i}", "snippet": f"Zürich {i}. {PASSAGE}"} for i in range(4)]
    text = json.dumps(hits)  # ensure_ascii: "Z\u00fcrich"
    found = find_documents(parse_json(text), text)
    assert found is not None
    out = render_documents(found, {0: None})
    assert out is not None and out.text.isascii() and "Z\\u00fcrich 0" in out.text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([None, "head", "tail"]) | st.just("drop"), min_size=3, max_size=9))
def test_every_item_is_kept_or_in_an_elision_in_order(plan: list[str | None]) -> None:
    hits = _hits(len(plan))
    text = json.dumps(hits)
    found = find_documents(parse_json(text), text)
    assert found is not None
    kept: dict[int, list[tuple[int, int]] | None] = {}
    for i, how in enumerate(plan):
        n = len(found.bodies[i])
        if how != "drop":
            kept[i] = None if how is None else [(0, n // 2)] if how == "head" else [(n // 2, n)]
    out = render_documents(found, kept)
    rebuilt: list[Any] = []
    originals = {e.id: e.original for e in out.elisions} if out is not None else {}
    for value in json.loads(out.text) if out is not None else hits:
        if isinstance(value, str):  # a run of items left out, its original stored
            rebuilt += json.loads(originals[value.rsplit("id=", 1)[1].rstrip("]")])
        else:
            rebuilt.append(value)
    assert [h["name"] for h in rebuilt] == [h["name"] for h in hits]
    for h, i in zip(rebuilt, range(len(plan))):
        assert (h == hits[i]) == (plan[i] in (None, "drop"))  # a trimmed body is the only edit


# ---------------------------------------------------------------- the tools stage


def test_search_results_keep_the_answer_the_crusher_lost(nq: list[BenchItem]) -> None:
    """The first 20 nq20-dev questions, their passages as a search tool's JSON: the record
    crusher lost most answers, the retrieval stage keeps them at a fraction of the tokens."""
    chosen, crushed = ToolsStage(), ToolsStage(documents=False)
    kept = lost = chars_in = chars_out = 0
    for item in nq:
        request = _search(item, ensure_ascii=False)
        result = chosen.run(request)
        text = result.request.messages[-1].text
        chars_in, chars_out = chars_in + len(request.messages[-1].text), chars_out + len(text)
        kept += evidence_retention(text, item.answers) > 0
        lost += (
            evidence_retention(crushed.run(request).request.messages[-1].text, item.answers) == 0
        )
        assert result.report.stages[0].changes[0].reason.startswith("tools/documents")
    assert kept >= 19 and chars_out < 0.35 * chars_in
    assert lost >= 5  # the old behaviour, for scale


def _fetched(item: BenchItem, arguments: str) -> list[Any]:
    """The ids the tools stage keeps of ``item``'s passages, fetched with ``arguments``."""
    hits = [
        {"id": f"doc-{9000 + i}", "snippet": d.text} for i, d in enumerate(item.request.documents)
    ]
    call = {"id": "c0", "type": "function", "function": {"name": "fetch", "arguments": arguments}}
    body = {
        "messages": [
            {"role": "user", "content": item.request.query},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "content": json.dumps(hits)},
        ]
    }
    out = ToolsStage().run(Request.from_openai(body)).request.messages[-1].text
    return [v["id"] for v in json.loads(out) if isinstance(v, dict)]


def test_an_item_the_call_names_stays_whatever_its_text(nq: list[BenchItem]) -> None:
    ranked = _fetched(nq[0], "{}")
    dropped = next(f"doc-{9000 + i}" for i in range(20) if f"doc-{9000 + i}" not in ranked)
    assert dropped in _fetched(nq[0], json.dumps({"ids": [dropped]}))


def test_a_fetched_pages_answer_is_kept_where_the_crusher_kept_its_head(
    nq: list[BenchItem],
) -> None:
    """The first 20 nq20-dev items' passages as the sections of one fetched page's content:
    the crusher kept the head of the string and lost most answers."""
    chosen, crushed = ToolsStage(), ToolsStage(documents=False)
    kept = lost = chars_in = chars_out = 0
    for item in nq:
        page = "\n\n".join(f"## {d.title}\n\n{d.text}" for d in item.request.documents)
        result = json.dumps({"url": "https://example.org/p", "content": page})
        arguments = json.dumps({"url": "https://example.org/p"})
        body = _search(item).to_openai()
        body["messages"][1]["tool_calls"][0]["function"]["arguments"] = arguments
        body["messages"][2]["content"] = result
        request = Request.from_openai(body)
        out = chosen.run(request).request.messages[-1].text
        chars_in, chars_out = chars_in + len(result), chars_out + len(out)
        kept += evidence_retention(out, item.answers) > 0
        lost += (
            evidence_retention(crushed.run(request).request.messages[-1].text, item.answers) == 0
        )
    # cut inside, not kept whole for the url its call names
    assert kept >= 19 and chars_out < 0.35 * chars_in
    assert lost >= 10


def test_the_same_result_gives_the_same_bytes_on_every_turn_and_stage(nq: list[BenchItem]) -> None:
    request = _search(nq[3])
    first = ToolsStage().run(request).request.messages[-1].text
    stage = ToolsStage()
    assert stage.run(request).request.messages[-1].text == first
    assert stage.run(request).request.messages[-1].text == first  # from the memo


def test_without_a_query_a_document_list_goes_on_unchanged() -> None:
    call = {"id": "c0", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    body = {
        "messages": [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "content": json.dumps(_hits(12))},
        ]
    }
    request = Request.from_openai(body)
    assert ToolsStage().run(request).request.messages[-1].text == json.dumps(_hits(12))


def test_documents_options_go_to_the_retrieval_stage(nq: list[BenchItem]) -> None:
    request = _search(nq[5])
    out = ToolsStage(documents={"max_k": 2, "cutoff": "none"}).run(request)
    kept = [v for v in json.loads(out.request.messages[-1].text) if isinstance(v, dict)]
    assert len(kept) == 2
    with pytest.raises(ConfigError) as bad:
        ToolsStage(documents={"max_k": 0})
    assert bad.value.field == "documents.max_k"
    with pytest.raises(ConfigError) as unknown:
        ToolsStage(documents={"max_kk": 2})
    assert unknown.value.field == "documents.max_kk"
    with pytest.raises(ConfigError) as typed:
        ToolsStage(documents="yes")  # type: ignore[arg-type]
    assert typed.value.field == "documents"


def test_documents_false_leaves_a_document_list_to_the_crusher(nq: list[BenchItem]) -> None:
    out = ToolsStage(documents=False).run(_search(nq[0]))
    assert out.report.stages[0].changes[0].reason.startswith("tools/json")


def test_the_warm_up_sample_is_a_document_list() -> None:
    assert find_documents(parse_json(_WARM_UP), _WARM_UP) is not None
    stage = ToolsStage()
    stage.warm_up()  # runs it through the retrieval stage: a scorer that fails raises here
    assert stage._documents is not None and stage._documents.stage.get_scorer() is not None


def test_a_list_longer_than_max_items_is_left_to_the_crusher() -> None:
    """The ranking's work is bounded by the items it reads."""
    assert _found(_hits(MAX_ITEMS)) is not None
    assert _found(_hits(MAX_ITEMS + 1)) is None


_prose = st.sampled_from([f"Town {i}. {PASSAGE}" for i in range(3)] + ["short", "x" * 300])
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _prose | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(
            st.sampled_from(["title", "text", "url", "meta", "results"]), inner, max_size=4
        )
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None)
@given(_json, st.randoms(use_true_random=False))
def test_any_json_either_is_no_document_list_or_renders_valid_json(value: Any, rng: Any) -> None:
    """Whatever the JSON, finding and writing back never fails, and what comes out parses,
    with every elision's original taken from the input."""
    text = json.dumps(value)
    found = find_documents(parse_json(text), text)
    if found is None:
        return
    kept: dict[int, list[tuple[int, int]] | None] = {}
    for i, body in enumerate(found.bodies):
        choice = rng.choice(["drop", "whole", "cut"])
        if choice == "whole" or (choice == "cut" and not body):
            kept[i] = None
        elif choice == "cut":
            kept[i] = [(0, len(body) // 2)]
    out = found.render(kept)
    if out is not None:
        json.loads(out.text)
        for e in out.elisions:
            if e.kind == "items":  # a run of items, as JSON
                assert isinstance(json.loads(e.original), list)
            else:  # a stretch of one body
                assert e.kind == "chars" and any(e.original in b for b in found.bodies)


def test_json_nested_past_the_walkers_depth_is_no_document_list() -> None:
    """A hit carrying metadata nested deeper than the compressors walk: the result goes on as
    the JSON compressor leaves such JSON, and the request does not fail."""
    deep: Any = "x"
    for _ in range(150):
        deep = {"a": deep}
    hits = _hits(12)
    hits[0]["meta"] = deep
    text = json.dumps(hits)
    assert find_documents(parse_json(text), text) is None
    call = {"id": "c0", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    body = {
        "messages": [
            {"role": "user", "content": "When do the ferries leave?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "content": text},
        ]
    }
    assert ToolsStage().run(Request.from_openai(body)).request.messages[-1].text == text


def test_a_repeated_member_name_reads_and_edits_its_first_member() -> None:
    """JSON may repeat a key: the first member is the body, and the one a cut rewrites."""
    pairs = [f'{{"meta": "none", "meta": {{"text": "Town {i}. {PASSAGE}"}}}}' for i in range(3)]
    text = "[" + ",".join(pairs) + "]"
    assert find_documents(parse_json(text), text) is None  # the first "meta" holds no text
    pairs = [f'{{"text": "Town {i}. {PASSAGE}", "text": "second"}}' for i in range(3)]
    text = "[" + ",".join(pairs) + "]"
    found = find_documents(parse_json(text), text)
    assert found is not None and found.bodies[0] == f"Town 0. {PASSAGE}"
    out = render_documents(found, {0: [(0, 7)]})
    assert (
        out is not None
        and out.text.startswith('[{"text":"Town 0. [')
        and '"text":"second"' in out.text
    )
