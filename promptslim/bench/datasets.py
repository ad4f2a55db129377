"""Benchmark datasets behind one interface: each item is a promptslim ``Request`` plus the gold
answers a model's reply is scored against.

A dataset is named by a spec ``KIND:ARG``::

    nq:PATH          "Lost in the Middle" multi-document QA (question, answers, ctxs)
    kv:PATH          "Lost in the Middle" key-value retrieval (ordered_kv_records, key, value)
    longbench:PATH   LongBench jsonl (input, context, answers)
    jsonl:PATH       promptslim's generic format (messages, documents, answers)
    builtin:rag      generated multi-document QA with distractors (no files needed)
    builtin:rag-zh   the same in Chinese
    builtin:chat     generated multi-turn chats with tool calls and a volatile system prompt
    builtin:chat-zh  the same in Chinese (Chinese dates and times in the system prompt)
    builtin:kv       generated UUID key-value lookups

A bare path is read as ``jsonl:``, unless its first record has the keys of another format.
Files may be gzip-compressed (``.gz``). A record that cannot be read is reported as a
``DatasetError`` naming the file and line, skipped and counted; loading goes on.

Loaders are looked up in ``DATASETS`` (a ``Registry``); users register their own.
"""

from __future__ import annotations

import datetime
import gzip
import json
import random
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DatasetError, InvalidRequest
from ..registry import Registry
from ..types import Document, Message, Request

__all__ = [
    "DATASETS",
    "NQ_INSTRUCTION",
    "BenchItem",
    "DatasetLoader",
    "LoadedDataset",
    "load_dataset",
]

#: the instruction of the "Lost in the Middle" QA prompt (Liu et al. 2023)
NQ_INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant)."
)
#: the instruction of that study's key-value retrieval prompt
KV_INSTRUCTION = "Extract the value corresponding to the specified key in the JSON object below."
LONGBENCH_INSTRUCTION = (
    "Answer the question based on the given passages. Only give the answer, no other words."
)


@dataclass(frozen=True)
class BenchItem:
    """One benchmark item: the request to slim and send, and the answers that count as right."""

    id: str
    request: Request
    answers: tuple[str, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class LoadedDataset:
    """The items of a dataset and the records that were skipped (each a DatasetError)."""

    name: str
    items: list[BenchItem]
    errors: list[DatasetError] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return len(self.errors)


class DatasetLoader(ABC):
    """Turns a source (a path, or a builtin generator's name) into BenchItems.

    ``load`` reads at most ``limit`` items; generators use ``seed``. Errors on single records
    go to ``on_error`` (the run goes on); an unreadable source raises ``DatasetError``.
    """

    kind: str

    def __init__(self, source: str) -> None:
        self.source = source

    @abstractmethod
    def items(
        self, *, seed: int, on_error: Callable[[DatasetError], None]
    ) -> Iterator[BenchItem]: ...

    def load(self, *, limit: int | None = None, seed: int = 0) -> LoadedDataset:
        errors: list[DatasetError] = []
        items: list[BenchItem] = []
        if limit is not None and limit <= 0:
            return LoadedDataset(f"{self.kind}:{self.source}", items, errors)
        for item in self.items(seed=seed, on_error=errors.append):
            items.append(item)
            if limit is not None and len(items) >= limit:
                break
        return LoadedDataset(f"{self.kind}:{self.source}", items, errors)


# ---------------------------------------------------------------- reading files


def _open_lines(path: Path) -> Any:
    # bytes, decoded line by line: a text-mode reader decodes ahead in chunks, so one bad
    # byte on line 3 used to fail the first readline and lose lines 1 and 2 (invariant 9)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")


def read_records(
    path: str | Path, on_error: Callable[[DatasetError], None]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each JSON-object line; blank lines are ignored, anything
    else unreadable goes to ``on_error`` and is skipped."""
    path = Path(path)
    try:
        handle = _open_lines(path)
    except OSError as exc:
        raise DatasetError(f"cannot open: {exc.strerror or exc}", path=str(path)) from exc
    with handle:
        lineno = 0
        while True:
            try:
                raw = handle.readline()
            except (OSError, EOFError) as exc:
                # a truncated .gz: nothing after it can be trusted
                on_error(DatasetError(f"unreadable: {exc}", path=str(path), line=lineno + 1))
                return
            if not raw:
                return
            lineno += 1
            try:
                # utf-8-sig on the first line: a BOM (Windows editors write one) is not content
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                on_error(
                    DatasetError(f"not UTF-8 (byte {exc.start})", path=str(path), line=lineno)
                )
                continue
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                on_error(DatasetError(f"invalid JSON: {exc.msg}", path=str(path), line=lineno))
                continue
            except RecursionError:
                on_error(
                    DatasetError("invalid JSON: nested too deeply", path=str(path), line=lineno)
                )
                continue
            if not isinstance(record, dict):
                on_error(
                    DatasetError(
                        f"expected a JSON object, got {type(record).__name__}",
                        path=str(path),
                        line=lineno,
                    )
                )
                continue
            yield lineno, record


def _require_str(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise InvalidRequest(
            "is required" if value is None else f"expected a string, got {type(value).__name__}",
            field=key,
        )
    return value


def _answers(value: Any, key: str = "answers") -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise InvalidRequest("expected a non-empty list of strings", field=key)
    return tuple(value)


class _FileLoader(DatasetLoader):
    """A jsonl file, one record a line; subclasses turn a record into a BenchItem."""

    def items(
        self, *, seed: int, on_error: Callable[[DatasetError], None]
    ) -> Iterator[BenchItem]:
        for lineno, record in read_records(self.source, on_error):
            try:
                item = self.parse(record, lineno)
            except InvalidRequest as exc:
                on_error(
                    DatasetError(exc.reason, path=self.source, line=lineno, field=exc.field)
                    if exc.field
                    else DatasetError(str(exc), path=self.source, line=lineno)
                )
                continue
            yield item

    @abstractmethod
    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem: ...

    def _id(self, record: Mapping[str, Any], lineno: int) -> str:
        for key in ("id", "_id"):
            if isinstance(record.get(key), (str, int)):
                return str(record[key])
        return f"{Path(self.source).name}:{lineno}"


def _qa_request(instruction: str, question: str, documents: list[Document]) -> Request:
    """The "Lost in the Middle" prompt shape: the instruction, the numbered search results
    (rendered by promptslim just before the question), then the question."""
    return Request(
        messages=[
            Message(role="system", content=instruction),
            Message(role="user", content=f"Question: {question}"),
        ],
        documents=documents,
        query=question,
    )


class NQLoader(_FileLoader):
    """``nq:PATH``: question, answers, ctxs (title, text, hasanswer, isgold)."""

    kind = "nq"

    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem:
        question = _require_str(record, "question")
        answers = _answers(record.get("answers"))
        ctxs = record.get("ctxs")
        if not isinstance(ctxs, list):
            raise InvalidRequest("expected a list of passages", field="ctxs")
        documents = []
        for i, ctx in enumerate(ctxs):
            if not isinstance(ctx, dict) or not isinstance(ctx.get("text"), str):
                raise InvalidRequest("expected an object with a text", field=f"ctxs[{i}]")
            meta = {k: ctx[k] for k in ("title", "isgold", "hasanswer") if k in ctx}
            documents.append(Document(id=str(ctx.get("id", f"ctx-{i}")), text=ctx["text"], metadata=meta))
        meta = {"gold_index": record["gold_index"]} if "gold_index" in record else {}
        return BenchItem(
            self._id(record, lineno), _qa_request(NQ_INSTRUCTION, question, documents), answers, meta
        )


def _kv_request(pairs: list[tuple[str, str]], key: str) -> Request:
    """One document per pair, written as a JSON member (``"key": "value"``), so retrieval can
    pick pairs like passages; the question is the study's ``Key: "..."`` line."""
    documents = [
        Document(
            id=f"kv-{i}",
            text=f"{json.dumps(k)}: {json.dumps(v)}",
            metadata={"isgold": k == key, "hasanswer": k == key},
        )
        for i, (k, v) in enumerate(pairs)
    ]
    return Request(
        messages=[
            Message(role="system", content=KV_INSTRUCTION),
            Message(role="user", content=f"Key: {json.dumps(key)}\nCorresponding value:"),
        ],
        documents=documents,
        query=key,
        protect=[key],
    )


class KVLoader(_FileLoader):
    """``kv:PATH``: ordered_kv_records ([[key, value], ...]), key, value."""

    kind = "kv"

    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem:
        raw = record.get("ordered_kv_records")
        if not isinstance(raw, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in raw
        ):
            raise InvalidRequest("expected a list of [key, value] string pairs", field="ordered_kv_records")
        key = _require_str(record, "key")
        value = _require_str(record, "value")
        pairs = [(p[0], p[1]) for p in raw]
        return BenchItem(self._id(record, lineno), _kv_request(pairs, key), (value,))


def split_passages(text: str, *, max_words: int = 200) -> list[str]:
    """Paragraphs of ``text`` merged up to ``max_words`` words each (a long paragraph is cut at
    word boundaries), so a long context becomes documents that retrieval can rank."""
    passages: list[str] = []
    current: list[str] = []
    for para in (p.strip() for p in text.split("\n")):
        if not para:
            continue
        words = para.split()
        while len(words) > max_words:
            if current:
                passages.append(" ".join(current))
                current = []
            passages.append(" ".join(words[:max_words]))
            words = words[max_words:]
        if current and len(current) + len(words) > max_words:
            passages.append(" ".join(current))
            current = []
        current.extend(words)
    if current:
        passages.append(" ".join(current))
    return passages


class LongBenchLoader(_FileLoader):
    """``longbench:PATH``: input (the question), context, answers."""

    kind = "longbench"

    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem:
        question = _require_str(record, "input")
        context = _require_str(record, "context")
        answers = _answers(record.get("answers"))
        documents = [
            Document(id=f"p-{i}", text=t) for i, t in enumerate(split_passages(context))
        ]
        meta: dict[str, Any] = {k: record[k] for k in ("dataset", "length") if k in record}
        return BenchItem(
            self._id(record, lineno), _qa_request(LONGBENCH_INSTRUCTION, question, documents), answers, meta
        )


class JsonlLoader(_FileLoader):
    """``jsonl:PATH``: ``{"id"?, "messages": [...], "documents"?: [...], "query"?, "answers": [...]}``
    where messages and documents are what ``Request.from_openai`` reads."""

    kind = "jsonl"

    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem:
        answers = _answers(record.get("answers"))
        body = {k: v for k, v in record.items() if k not in ("id", "answers", "query", "metadata")}
        options: dict[str, Any] = {}
        if record.get("query") is not None:
            options["query"] = _require_str(record, "query")
        request = Request.from_openai(body, **options)
        raw_meta = record.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        return BenchItem(self._id(record, lineno), request, answers, meta)


# ---------------------------------------------------------------- generated (builtin) data

_SYLLABLES = ["ka", "lo", "ri", "ven", "mar", "tis", "dal", "or", "bel", "qua", "sen", "tho", "ru", "vik", "nal", "pe", "zor", "ith", "gan", "mel", "fos", "ur", "cai", "bra", "lin", "dov", "es", "han", "kel"]
_KINDS = ("town", "museum", "company", "observatory", "guild", "library")
#: attribute -> (fact sentence, question, value generator); {n} is the name, {k} the kind
_ATTRIBUTES: dict[str, tuple[str, str, Callable[[random.Random], str]]] = {
    "founded": (
        "{n} was founded in {v}.",
        "In which year was the {k} {n} founded?",
        lambda r: str(r.randint(1620, 1990)),
    ),
    "founder": ("{n} was founded by {v}.", "Who founded the {k} {n}?", lambda r: _person(r)),
    "colour": (
        "The emblem of {n} is {v}.",
        "What colour is the emblem of the {k} {n}?",
        lambda r: r.choice(["amber", "crimson", "teal", "violet", "ochre", "silver", "indigo", "scarlet", "olive", "cobalt"]),
    ),
    "count": (
        "{n} has {v} registered members.",
        "How many registered members does the {k} {n} have?",
        lambda r: str(r.randint(120, 9800)),
    ),
    "region": (
        "{n} lies in {v}.",
        "In which province does the {k} {n} lie?",
        lambda r: _name(r, 2) + " Province",
    ),
}
_FILLER = (
    "It is mentioned in several regional guides.",
    "Visitors often arrive in the spring.",
    "Local records describe it in some detail.",
    "Its history has been studied by a small group of scholars.",
    "Several later accounts repeat the same description.",
)


def _name(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(n)).capitalize()


def _person(rng: random.Random) -> str:
    return f"{_name(rng, 2)} {_name(rng, 3)}"


def _entity_document(rng: random.Random, name: str, kind: str, facts: dict[str, str]) -> str:
    sentences = [f"{name} is an {kind}." if kind[0] in "aeiou" else f"{name} is a {kind}."]
    for attr, value in facts.items():
        sentences.append(_ATTRIBUTES[attr][0].format(n=name, k=kind, v=value))
        if rng.random() < 0.5:
            sentences.append(rng.choice(_FILLER))
    return " ".join(sentences)


def _unique_names(rng: random.Random, n: int, make: Callable[[], str]) -> list[str]:
    """``n`` distinct names from ``make`` (which draws from ``rng``), in the order drawn."""
    names: list[str] = []
    while len(names) < n:
        candidate = make()
        if candidate not in names:
            names.append(candidate)
    return names


def _document_facts(
    rng: random.Random,
    attributes: Mapping[str, tuple[str, str, Callable[[random.Random], str]]],
    attr: str,
    *,
    gold: bool,
    answer: str,
) -> dict[str, str]:
    """Three random facts about one entity. The gold document also states the asked attribute;
    a distractor states it too, with a value other than the answer (shared by rag and rag-zh)."""
    facts = {a: attributes[a][2](rng) for a in rng.sample(sorted(attributes), 3)}
    if gold:
        facts.setdefault(attr, attributes[attr][2](rng))
    else:
        facts[attr] = attributes[attr][2](rng)
        while facts[attr] == answer and answer:
            facts[attr] = attributes[attr][2](rng)
    return facts


def _rag_item(rng: random.Random, index: int, *, n_documents: int) -> BenchItem:
    """Multi-document QA: one gold fact document among distractors about other entities of the
    same kind (same attributes, other values) and near-namesakes, at a random position."""
    kind = rng.choice(_KINDS)
    attr = rng.choice(sorted(_ATTRIBUTES))
    names = _unique_names(rng, n_documents, lambda: _name(rng, rng.randint(2, 3)))
    gold_pos = rng.randrange(n_documents)
    documents = []
    answer = ""
    for i, name in enumerate(names):
        facts = _document_facts(rng, _ATTRIBUTES, attr, gold=i == gold_pos, answer=answer)
        if i == gold_pos:
            answer = facts[attr]
        documents.append(
            Document(
                id=f"d{i}",
                text=_entity_document(rng, name, kind, facts),
                metadata={"title": f"{name} ({kind})", "isgold": i == gold_pos, "hasanswer": i == gold_pos},
            )
        )
    question = _ATTRIBUTES[attr][1].format(n=names[gold_pos], k=kind)
    return BenchItem(
        f"rag-{index}",
        _qa_request(NQ_INSTRUCTION, question, documents),
        (answer,),
        {"gold_index": gold_pos},
    )


# Chinese counterpart of builtin:rag: same shape, generated Chinese text
_ZH_NAME_CHARS = "安宁青云明华东海清远嘉禾金石银泉松柏岚溪文德瑞丰鸿源星河长乐平湖翠峰新城玉兰春江秋水临川"
_ZH_SURNAMES = "王李张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗"
_ZH_KINDS = ("古镇", "博物馆", "公司", "天文台", "商会", "图书馆")
_ZH_INSTRUCTION = "请只根据下面的搜索结果回答问题（部分结果可能与问题无关）。"
_ZH_ATTRIBUTES: dict[str, tuple[str, str, Callable[[random.Random], str]]] = {
    "founded": ("{n}成立于{v}年。", "{n}成立于哪一年？", lambda r: str(r.randint(1620, 1990))),
    "founder": ("{n}由{v}创办。", "{n}是由谁创办的？", lambda r: _zh_person(r)),
    "colour": (
        "{n}的徽标是{v}的。",
        "{n}的徽标是什么颜色？",
        lambda r: r.choice(["琥珀色", "深红色", "青绿色", "紫罗兰色", "赭石色", "银白色", "靛蓝色", "猩红色", "橄榄绿", "钴蓝色"]),
    ),
    "count": ("{n}共有{v}名注册会员。", "{n}有多少名注册会员？", lambda r: str(r.randint(120, 9800))),
    "region": ("{n}位于{v}省。", "{n}位于哪个省？", lambda r: _zh_name(r, 2)),
}
_ZH_FILLER = (
    "多本地区旅游指南都提到过它。",
    "每年春天都有不少游客前来参观。",
    "当地的地方志对它有较为详细的记载。",
    "一些学者专门研究过它的历史。",
    "后来的几部文献都重复了同样的描述。",
)


def _zh_name(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ZH_NAME_CHARS) for _ in range(n))


def _zh_person(rng: random.Random) -> str:
    return rng.choice(_ZH_SURNAMES) + _zh_name(rng, rng.randint(1, 2))


def _rag_zh_item(rng: random.Random, index: int, *, n_documents: int) -> BenchItem:
    """``builtin:rag-zh``: as ``_rag_item``, in Chinese: one gold document among distractors
    of the same kind that carry the asked attribute with other values. Deterministic."""
    kind = rng.choice(_ZH_KINDS)
    attr = rng.choice(sorted(_ZH_ATTRIBUTES))
    names = _unique_names(rng, n_documents, lambda: _zh_name(rng, rng.randint(2, 3)) + kind)
    gold_pos = rng.randrange(n_documents)
    documents = []
    answer = ""
    for i, name in enumerate(names):
        facts = _document_facts(rng, _ZH_ATTRIBUTES, attr, gold=i == gold_pos, answer=answer)
        if i == gold_pos:
            answer = facts[attr]
        sentences = [f"{name}是一家{kind}。" if kind in ("公司", "商会") else f"{name}是一座{kind}。"]
        for a, value in facts.items():
            sentences.append(_ZH_ATTRIBUTES[a][0].format(n=name, v=value))
            if rng.random() < 0.5:
                sentences.append(rng.choice(_ZH_FILLER))
        documents.append(
            Document(
                id=f"d{i}",
                text="".join(sentences),  # Chinese sentences follow each other with no space
                metadata={"title": name, "isgold": i == gold_pos, "hasanswer": i == gold_pos},
            )
        )
    question = _ZH_ATTRIBUTES[attr][1].format(n=names[gold_pos])
    return BenchItem(
        f"rag-zh-{index}",
        _qa_request(_ZH_INSTRUCTION, question, documents),
        (answer,),
        {"gold_index": gold_pos},
    )


def _chat_item(rng: random.Random, index: int, *, n_filler_turns: int) -> BenchItem:
    """A support chat: a system prompt with volatile values (date, request id, user name) and a
    tool definition; a fact planted in the first user turn; a tool call and its result; filler
    turns; the last user turn asks for the planted fact."""
    user = _person(rng)
    date = f"20{rng.randint(24, 27)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    request_id = f"req-{rng.getrandbits(48):012x}"
    code = f"{_name(rng, 2).upper()}-{rng.randint(100, 999)}"
    system = (
        "You are a concise support assistant for an internal project tracker. "
        "Answer from the conversation; if a value was given earlier, repeat it exactly.\n"
        f"Current date: {date}\nRequest id: {request_id}\nUser: {user}"
    )
    topic = _name(rng, 2)
    messages: list[Message] = [
        Message(role="system", content=system),
        Message(role="user", content=f"Hi, I am setting up the {topic} project. Its project code is {code}. Please remember it."),
        Message(role="assistant", content=f"Noted: the {topic} project has the code {code}."),
        Message(role="user", content=f"Can you check the status of ticket {rng.randint(1000, 9999)}?"),
        Message.model_validate(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{index}",
                        "type": "function",
                        "function": {"name": "get_ticket", "arguments": json.dumps({"project": topic})},
                    }
                ],
            }
        ),
        Message(
            role="tool",
            tool_call_id=f"call_{index}",
            content=json.dumps({"status": rng.choice(["open", "blocked", "in review"]), "owner": _person(rng)}),
        ),
        Message(role="assistant", content="The ticket is tracked; details are in the tool result above."),
    ]
    for _ in range(n_filler_turns):
        other = _name(rng, 2)
        messages.append(
            Message(role="user", content=f"What should I write in the summary for the {other} milestone? {rng.choice(_FILLER)}")
        )
        messages.append(
            Message(role="assistant", content=f"Describe what the {other} milestone delivered, who reviewed it, and what is left. {rng.choice(_FILLER)}")
        )
    messages.append(Message(role="user", content=f"What is the project code of the {topic} project?"))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_ticket",
                "description": "Look up a ticket in the tracker.",
                "parameters": {"type": "object", "properties": {"project": {"type": "string"}}},
            },
        }
    ]
    return BenchItem(
        f"chat-{index}",
        Request(messages=messages, tools=tools),
        (code,),
        {"volatile": [date, request_id, user]},
    )


_ZH_WEEKDAYS = "一二三四五六日"
_ZH_PERIODS = ("上午", "下午", "晚上")
_ZH_CHAT_FILLER = (
    "这个问题之前在周会上讨论过。",
    "相关的记录都在项目文档里。",
    "评审意见已经整理好了。",
    "不过还需要再确认一下细节。",
    "大家对这个安排没有异议。",
)


def _chat_zh_item(rng: random.Random, index: int, *, n_filler_turns: int) -> BenchItem:
    """``builtin:chat-zh``: as ``_chat_item``, in Chinese: a system prompt with volatile values
    (a Chinese date such as 2026年11月30日, a weekday, a time such as 下午3点, a request id, a
    user name) and a tool definition; a project code planted in the first user turn; a tool
    call and its result; filler turns; the last user turn asks for the code. Deterministic."""
    user = _zh_person(rng)
    day = datetime.date(2000 + rng.randint(24, 27), rng.randint(1, 12), rng.randint(1, 28))
    date = f"{day.year}年{day.month}月{day.day}日"
    weekday = "星期" + _ZH_WEEKDAYS[day.weekday()]  # the date's own weekday
    hour = rng.randint(1, 11)
    time = f"{rng.choice(_ZH_PERIODS)}{hour}点" + rng.choice(["", f"{rng.randint(10, 59)}分", "半"])
    request_id = f"req-{rng.getrandbits(48):012x}"
    code = f"{_name(rng, 2).upper()}-{rng.randint(100, 999)}"
    system = (
        "你是一个内部项目管理系统的客服助手，回答要简洁。"
        "请根据对话内容回答；如果前面给出过某个值，请原样复述。\n"
        f"当前日期：{date}（{weekday}）\n当前时间：{time}\n请求编号：{request_id}\n用户：{user}"
    )
    topic = _zh_name(rng, 2)
    ticket = rng.randint(1000, 9999)
    messages: list[Message] = [
        Message(role="system", content=system),
        Message(role="user", content=f"你好，我正在创建{topic}项目。它的项目代码是{code}，请记住。"),
        Message(role="assistant", content=f"好的，已记下：{topic}项目的代码是{code}。"),
        Message(role="user", content=f"能帮我查一下工单{ticket}的状态吗？"),
        Message.model_validate(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{index}",
                        "type": "function",
                        "function": {
                            "name": "get_ticket",
                            "arguments": json.dumps({"project": topic, "ticket": ticket}, ensure_ascii=False),
                        },
                    }
                ],
            }
        ),
        Message(
            role="tool",
            tool_call_id=f"call_{index}",
            content=json.dumps(
                {"status": rng.choice(["处理中", "已阻塞", "评审中"]), "owner": _zh_person(rng)},
                ensure_ascii=False,
            ),
        ),
        Message(role="assistant", content="工单已经在跟踪中，详细信息见上面的工具结果。"),
    ]
    for _ in range(n_filler_turns):
        other = _zh_name(rng, 2)
        messages.append(
            Message(role="user", content=f"{other}里程碑的总结应该写些什么？{rng.choice(_ZH_CHAT_FILLER)}")
        )
        messages.append(
            Message(
                role="assistant",
                content=f"写清楚{other}里程碑交付了什么、由谁评审、还剩下哪些工作。{rng.choice(_ZH_CHAT_FILLER)}",
            )
        )
    messages.append(Message(role="user", content=f"{topic}项目的项目代码是什么？"))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_ticket",
                "description": "在项目管理系统中查询工单。",
                "parameters": {
                    "type": "object",
                    "properties": {"project": {"type": "string"}, "ticket": {"type": "integer"}},
                },
            },
        }
    ]
    return BenchItem(
        f"chat-zh-{index}",
        Request(messages=messages, tools=tools),
        (code,),
        {"volatile": [date, weekday, time, request_id, user]},
    )


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _kv_item(rng: random.Random, index: int, *, n_pairs: int) -> BenchItem:
    pairs = [(_uuid(rng), _uuid(rng)) for _ in range(n_pairs)]
    key, value = pairs[rng.randrange(n_pairs)]
    return BenchItem(f"kv-{index}", _kv_request(pairs, key), (value,))


class BuiltinLoader(DatasetLoader):
    """``builtin:rag|rag-zh|chat|chat-zh|kv``: items generated from ``seed``; the same seed gives the same
    items. Sizes are small on purpose so a CPU run stays short."""

    kind = "builtin"
    GENERATORS: Mapping[str, Callable[[random.Random, int], BenchItem]] = {
        "rag": lambda rng, i: _rag_item(rng, i, n_documents=8),
        "rag-zh": lambda rng, i: _rag_zh_item(rng, i, n_documents=8),
        "chat": lambda rng, i: _chat_item(rng, i, n_filler_turns=4),
        "chat-zh": lambda rng, i: _chat_zh_item(rng, i, n_filler_turns=4),
        "kv": lambda rng, i: _kv_item(rng, i, n_pairs=20),
    }
    #: how many items a builtin dataset has when no limit is given
    SIZE = 100

    def __init__(self, source: str) -> None:
        if source not in self.GENERATORS:
            raise ConfigError(
                f"unknown builtin dataset {source!r}; known: {', '.join(sorted(self.GENERATORS))}",
                field="dataset",
            )
        super().__init__(source)

    def items(
        self, *, seed: int, on_error: Callable[[DatasetError], None]
    ) -> Iterator[BenchItem]:
        generate = self.GENERATORS[self.source]
        for i in range(self.SIZE):
            # one generator per item: item i is the same whatever the limit
            yield generate(random.Random(f"{self.source}:{seed}:{i}"), i)


# ---------------------------------------------------------------- lookup

#: dataset loaders by spec kind
DATASETS: Registry[type] = Registry(
    "dataset",
    {
        "nq": "promptslim.bench.datasets:NQLoader",
        "kv": "promptslim.bench.datasets:KVLoader",
        "longbench": "promptslim.bench.datasets:LongBenchLoader",
        "jsonl": "promptslim.bench.datasets:JsonlLoader",
        "builtin": "promptslim.bench.datasets:BuiltinLoader",
        "tools": "promptslim.bench.tool_traces:ToolTracesLoader",
    },
)

# keys that identify a file format from its first record
_SNIFF = (("ctxs", "nq"), ("ordered_kv_records", "kv"), ("context", "longbench"))


def _sniff(path: str) -> str:
    for _, record in read_records(path, lambda e: None):
        for key, kind in _SNIFF:
            if key in record:
                return kind
        return "jsonl"
    return "jsonl"


def parse_spec(spec: str) -> tuple[str, str]:
    """``(kind, source)`` of a dataset spec; a bare existing path gets its kind sniffed."""
    kind, sep, source = spec.partition(":")
    if sep and kind in DATASETS:
        if not source:
            raise ConfigError(f"{spec!r} needs a path or name after ':'", field="dataset")
        return kind, source
    if Path(spec).exists():
        return _sniff(spec), spec
    if sep:
        raise ConfigError(
            f"unknown dataset kind {kind!r} in {spec!r}; known: {', '.join(DATASETS.names())}",
            field="dataset",
        )
    raise ConfigError(f"no such dataset file {spec!r} (or use KIND:PATH)", field="dataset")


def load_dataset(spec: str, *, limit: int | None = None, seed: int = 0) -> LoadedDataset:
    """Load the dataset named by ``spec`` (see the module docstring)."""
    kind, source = parse_spec(spec)
    loader: DatasetLoader = DATASETS.get(kind, field="dataset")(source)
    return loader.load(limit=limit, seed=seed)
