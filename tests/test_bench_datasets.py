"""Dataset loaders: the real evaluation data (tests/data), generated data, and malformed lines."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from promptslim.bench.datasets import NQ_INSTRUCTION, load_dataset, split_passages
from promptslim.errors import ConfigError, DatasetError
from promptslim.render import render_documents


def test_nq_loader_on_the_sample_builds_the_lost_in_the_middle_prompt(eval_data: Path) -> None:
    data = load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}", limit=3)
    assert len(data.items) == 3 and data.skipped == 0
    item = data.items[0]
    request = item.request
    assert request.messages[0].role == "system" and request.messages[0].text == NQ_INSTRUCTION
    assert request.messages[-1].role == "user" and request.query in request.messages[-1].text
    assert len(request.documents) == 20
    gold = [d for d in request.documents if d.metadata.get("isgold")]
    assert len(gold) == 1 and {"title", "isgold", "hasanswer"} <= set(gold[0].metadata)
    assert item.answers and all(isinstance(a, str) for a in item.answers)
    assert "Document [1](Title: " in render_documents(request.documents)


def test_kv_loader_on_the_sample_keeps_uuids_exact(eval_data: Path) -> None:
    path = eval_data / "kv75-dev.jsonl.gz"
    data = load_dataset(f"kv:{path}", limit=2)
    assert len(data.items) == 2
    item = data.items[0]
    with gzip.open(path, "rt") as f:
        raw = json.loads(f.readline())
    assert item.answers == (raw["value"],)
    assert len(item.request.documents) == len(raw["ordered_kv_records"])
    gold = [d for d in item.request.documents if d.metadata["isgold"]]
    assert len(gold) == 1 and raw["key"] in gold[0].text and raw["value"] in gold[0].text
    assert raw["key"] in item.request.messages[-1].text
    # a bare path is sniffed to the same format
    assert load_dataset(str(path), limit=1).items[0].answers == item.answers


def test_longbench_and_jsonl_loaders(tmp_path: Path) -> None:
    lb = tmp_path / "lb.jsonl"
    context = "\n".join(f"Paragraph {i}. " + "word " * 150 for i in range(3))
    lb.write_text(json.dumps({"_id": "x1", "input": "what?", "context": context, "answers": ["a"]}) + "\n")
    item = load_dataset(f"longbench:{lb}").items[0]
    assert item.id == "x1" and item.request.messages[-1].text == "Question: what?"
    assert len(item.request.documents) == 3
    gen = tmp_path / "gen.jsonl.gz"
    record = {
        "id": "g1",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q?"}],
        "documents": [{"id": "d1", "text": "t", "metadata": {"title": "T"}}],
        "answers": ["t"],
    }
    with gzip.open(gen, "wt") as f:
        f.write(json.dumps(record) + "\n")
    item = load_dataset(f"jsonl:{gen}").items[0]
    assert item.id == "g1" and item.request.documents[0].title == "T" and item.answers == ("t",)


def test_split_passages_caps_words() -> None:
    passages = split_passages("a " * 450, max_words=200)
    assert [len(p.split()) for p in passages] == [200, 200, 50]


@pytest.mark.parametrize("kind", ["nq", "kv", "jsonl"])
def test_malformed_lines_are_reported_with_file_and_line_and_skipped(tmp_path: Path, kind: str) -> None:
    good = {
        "nq": {"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "text": "a b"}]},
        "kv": {"ordered_kv_records": [["k", "v"]], "key": "k", "value": "v"},
        "jsonl": {"messages": [{"role": "user", "content": "q"}], "answers": ["a"]},
    }[kind]
    lines = [json.dumps(good), "{not json", "", json.dumps([1, 2]), json.dumps({"answers": 3}), json.dumps(good)]
    path = tmp_path / f"bad-{kind}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    data = load_dataset(f"{kind}:{path}")
    assert len(data.items) == 2  # lines 1 and 6: the run goes on past the bad ones
    assert [e.line for e in data.errors] == [2, 4, 5]
    assert all(isinstance(e, DatasetError) and e.path == str(path) for e in data.errors)
    assert f"{path}:2: invalid JSON" in str(data.errors[0])


def test_builtin_datasets_are_deterministic_by_seed() -> None:
    for name in ("rag", "chat", "kv"):
        a = load_dataset(f"builtin:{name}", limit=3, seed=7).items
        b = load_dataset(f"builtin:{name}", limit=3, seed=7).items
        c = load_dataset(f"builtin:{name}", limit=3, seed=8).items
        assert [x.request for x in a] == [x.request for x in b]
        assert [x.answers for x in a] != [x.answers for x in c]
        for item in a:
            context = " ".join(m.text for m in item.request.messages[:-1])
            context += " ".join(d.text for d in item.request.documents)
            context += " ".join(
                c.function.arguments for m in item.request.messages for c in m.tool_calls or ()
            )
            assert item.answers[0] in context  # the answer is in the prompt, not the question
            assert item.answers[0] not in item.request.messages[-1].text


def test_builtin_chat_has_volatile_system_values_and_a_tool_call() -> None:
    item = load_dataset("builtin:chat", limit=1).items[0]
    system = item.request.messages[0].text
    assert all(v in system for v in item.metadata["volatile"])
    assert any(m.tool_calls for m in item.request.messages)
    assert any(m.role == "tool" for m in item.request.messages)


def test_bad_specs_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown builtin dataset 'nope'"):
        load_dataset("builtin:nope")
    with pytest.raises(ConfigError, match="unknown dataset kind 'zz'"):
        load_dataset("zz:foo")
    with pytest.raises(DatasetError, match="cannot open"):
        load_dataset(f"nq:{tmp_path / 'missing.jsonl'}")
