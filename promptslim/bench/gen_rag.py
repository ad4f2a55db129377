"""``builtin:rag`` and ``builtin:rag-zh``: generated multi-document QA with distractors, in
English and Chinese: made-up entities with facts, one gold document among same-topic ones.
Deterministic for a given ``random.Random``; no files needed."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from ..types import Document
from .dataset_base import BenchItem
from .file_datasets import NQ_INSTRUCTION, qa_request

__all__ = [
    "FILLER",
    "fact_sentences",
    "one_gold_among",
    "rag_item",
    "rag_zh_item",
    "random_name",
    "random_person",
    "unique_names",
    "zh_random_name",
    "zh_random_person",
]


_SYLLABLES = [
    "ka",
    "lo",
    "ri",
    "ven",
    "mar",
    "tis",
    "dal",
    "or",
    "bel",
    "qua",
    "sen",
    "tho",
    "ru",
    "vik",
    "nal",
    "pe",
    "zor",
    "ith",
    "gan",
    "mel",
    "fos",
    "ur",
    "cai",
    "bra",
    "lin",
    "dov",
    "es",
    "han",
    "kel",
]
_KINDS = ("town", "museum", "company", "observatory", "guild", "library")
#: attribute -> (fact sentence, question, value generator); {n} is the name, {k} the kind
_ATTRIBUTES: dict[str, tuple[str, str, Callable[[random.Random], str]]] = {
    "founded": (
        "{n} was founded in {v}.",
        "In which year was the {k} {n} founded?",
        lambda r: str(r.randint(1620, 1990)),
    ),
    "founder": ("{n} was founded by {v}.", "Who founded the {k} {n}?", lambda r: random_person(r)),
    "colour": (
        "The emblem of {n} is {v}.",
        "What colour is the emblem of the {k} {n}?",
        lambda r: r.choice(
            [
                "amber",
                "crimson",
                "teal",
                "violet",
                "ochre",
                "silver",
                "indigo",
                "scarlet",
                "olive",
                "cobalt",
            ]
        ),
    ),
    "count": (
        "{n} has {v} registered members.",
        "How many registered members does the {k} {n} have?",
        lambda r: str(r.randint(120, 9800)),
    ),
    "region": (
        "{n} lies in {v}.",
        "In which province does the {k} {n} lie?",
        lambda r: random_name(r, 2) + " Province",
    ),
}
FILLER = (
    "It is mentioned in several regional guides.",
    "Visitors often arrive in the spring.",
    "Local records describe it in some detail.",
    "Its history has been studied by a small group of scholars.",
    "Several later accounts repeat the same description.",
)


def random_name(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(n)).capitalize()


def random_person(rng: random.Random) -> str:
    return f"{random_name(rng, 2)} {random_name(rng, 3)}"


def _entity_document(rng: random.Random, name: str, kind: str, facts: dict[str, str]) -> str:
    first = f"{name} is an {kind}." if kind[0] in "aeiou" else f"{name} is a {kind}."
    return " ".join([first, *fact_sentences(rng, name, facts, _ATTRIBUTES, FILLER, k=kind)])


def fact_sentences(
    rng: random.Random,
    name: str,
    facts: Mapping[str, str],
    attributes: Mapping[str, tuple[str, str, Callable[[random.Random], str]]],
    filler: Sequence[str],
    **fields: str,
) -> list[str]:
    """Each fact about ``name`` as its attribute's sentence (``fields``: the template's other
    fields), half of them followed by a filler sentence (shared by every language's
    generator; ``rng`` is drawn from in the same order whatever the language)."""
    sentences: list[str] = []
    for attr, value in facts.items():
        sentences.append(attributes[attr][0].format(n=name, v=value, **fields))
        if rng.random() < 0.5:
            sentences.append(rng.choice(filler))
    return sentences


def unique_names(rng: random.Random, n: int, make: Callable[[], str]) -> list[str]:
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


def rag_item(rng: random.Random, index: int, *, n_documents: int) -> BenchItem:
    """Multi-document QA: one gold fact document among distractors about other entities of the
    same kind (same attributes, other values) and near-namesakes, at a random position."""
    kind = rng.choice(_KINDS)
    attr = rng.choice(sorted(_ATTRIBUTES))
    names = unique_names(rng, n_documents, lambda: random_name(rng, rng.randint(2, 3)))
    return one_gold_among(
        rng,
        f"rag-{index}",
        _ATTRIBUTES,
        attr,
        names,
        write=lambda name, facts: _entity_document(rng, name, kind, facts),
        title=lambda name: f"{name} ({kind})",
        question=lambda name: _ATTRIBUTES[attr][1].format(n=name, k=kind),
        instruction=NQ_INSTRUCTION,
    )


def one_gold_among(
    rng: random.Random,
    item_id: str,
    attributes: Mapping[str, tuple[str, str, Callable[[random.Random], str]]],
    attr: str,
    names: list[str],
    *,
    write: Callable[[str, dict[str, str]], str],
    title: Callable[[str], str],
    question: Callable[[str], str],
    instruction: str,
) -> BenchItem:
    """The item asking ``attr`` of one of ``names`` (the gold document, at a random position)
    among documents about the others, which state it with other values. ``write`` makes an
    entity's document of its name and facts; ``title`` and ``question`` take the name (shared
    by every language's generator)."""
    gold_pos = rng.randrange(len(names))
    documents = []
    answer = ""
    for i, name in enumerate(names):
        facts = _document_facts(rng, attributes, attr, gold=i == gold_pos, answer=answer)
        if i == gold_pos:
            answer = facts[attr]
        documents.append(
            Document(
                id=f"d{i}",
                text=write(name, facts),
                metadata={"title": title(name), "isgold": i == gold_pos, "hasanswer": i == gold_pos},
            )
        )
    return BenchItem(
        item_id,
        qa_request(instruction, question(names[gold_pos]), documents),
        (answer,),
        {"gold_index": gold_pos},
    )


# Chinese counterpart of builtin:rag: same shape, generated Chinese text
_ZH_NAME_CHARS = (
    "安宁青云明华东海清远嘉禾金石银泉松柏岚溪文德瑞丰鸿源星河长乐平湖翠峰新城玉兰春江秋水临川"
)
_ZH_SURNAMES = "王李张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗"
_ZH_KINDS = ("古镇", "博物馆", "公司", "天文台", "商会", "图书馆")
_ZH_INSTRUCTION = "请只根据下面的搜索结果回答问题（部分结果可能与问题无关）。"
_ZH_ATTRIBUTES: dict[str, tuple[str, str, Callable[[random.Random], str]]] = {
    "founded": ("{n}成立于{v}年。", "{n}成立于哪一年？", lambda r: str(r.randint(1620, 1990))),
    "founder": ("{n}由{v}创办。", "{n}是由谁创办的？", lambda r: zh_random_person(r)),
    "colour": (
        "{n}的徽标是{v}的。",
        "{n}的徽标是什么颜色？",
        lambda r: r.choice(
            [
                "琥珀色",
                "深红色",
                "青绿色",
                "紫罗兰色",
                "赭石色",
                "银白色",
                "靛蓝色",
                "猩红色",
                "橄榄绿",
                "钴蓝色",
            ]
        ),
    ),
    "count": (
        "{n}共有{v}名注册会员。",
        "{n}有多少名注册会员？",
        lambda r: str(r.randint(120, 9800)),
    ),
    "region": ("{n}位于{v}省。", "{n}位于哪个省？", lambda r: zh_random_name(r, 2)),
}
_ZH_FILLER = (
    "多本地区旅游指南都提到过它。",
    "每年春天都有不少游客前来参观。",
    "当地的地方志对它有较为详细的记载。",
    "一些学者专门研究过它的历史。",
    "后来的几部文献都重复了同样的描述。",
)


def zh_random_name(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ZH_NAME_CHARS) for _ in range(n))


def zh_random_person(rng: random.Random) -> str:
    return rng.choice(_ZH_SURNAMES) + zh_random_name(rng, rng.randint(1, 2))


def rag_zh_item(rng: random.Random, index: int, *, n_documents: int) -> BenchItem:
    """``builtin:rag-zh``: as ``rag_item``, in Chinese: one gold document among distractors
    of the same kind that carry the asked attribute with other values. Deterministic."""
    kind = rng.choice(_ZH_KINDS)
    attr = rng.choice(sorted(_ZH_ATTRIBUTES))
    names = unique_names(rng, n_documents, lambda: zh_random_name(rng, rng.randint(2, 3)) + kind)

    def write(name: str, facts: dict[str, str]) -> str:
        first = f"{name}是一家{kind}。" if kind in ("公司", "商会") else f"{name}是一座{kind}。"
        # Chinese sentences follow each other with no space
        return "".join([first, *fact_sentences(rng, name, facts, _ZH_ATTRIBUTES, _ZH_FILLER)])

    return one_gold_among(
        rng,
        f"rag-zh-{index}",
        _ZH_ATTRIBUTES,
        attr,
        names,
        write=write,
        title=lambda name: name,
        question=lambda name: _ZH_ATTRIBUTES[attr][1].format(n=name),
        instruction=_ZH_INSTRUCTION,
    )
