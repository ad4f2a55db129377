"""What a request asks: the text its documents are scored against, and the other ways the
conversation may be asking it.

When the caller gives ``Request.query``, that is the question, taken as given. Otherwise the
question is somewhere in the messages, and the last user message alone is often not it:

- **a template around the question** ("Using only the documents provided, answer concisely and
  cite the ids... Question: ..."): a sentence embedder that reads a text's head (its first 96
  word pieces) reads the instructions and never the question;
- **a follow-up that names nothing** ("Can you check again?", "and when was he born?"): the
  topic is in an earlier user turn.

So :func:`ask_of` gives two things. ``text`` is what a lexical scorer reads: the last user
message, after the earlier user turns it may refer to. A word that no document holds adds
nothing to BM25, so an old question on another topic costs nothing. ``views`` are the other
ways the question may be put: each sentence of a multi-sentence last message, the earlier
turns alone. A dense scorer compares each with the documents and trusts most the one the
documents answer best (:func:`promptslim.backends.scorer_base.view_weights`). The documents
were retrieved for what the user means now, so they say which view that is.

An ask may hold several questions ("Who wrote The Outsiders? And when was Gettysburg?"). Each
is answered by other documents, and scored as one text the better-matched question sets the
top of the scale and the other's documents fall under the cut-off. ``questions`` names them,
when a short ask (at most :data:`VIEW_CHARS` characters) holds two to :data:`MAX_QUESTIONS`
questions with a topic of their own: sentences that end in a question mark, the questions
such a sentence joins with "and" before a question word, and lines that open with a question
word (a list of questions, often written without marks); the retrieval stage scores the
documents against each as well as against the whole (``each_question``). A question that
refers back and names at most one thing of its own ("When was it published?") leans on what
was said before it, and is asked with that.

Not every ask is a question that part of the documents answers. "Summarize the documents",
"Translate them into French", "List every person mentioned in the sources" ask for all of
them: ranked against such an ask, the documents score by noise and most are dropped.
:func:`asks_for_whole` tells those apart, by the ask's words (its lexicon is English and
Chinese) and whether the documents hold them:

- a task over a text (summarize, translate, rewrite, outline, list, compare, explain... or
  总结, 翻译, 改写, 概括...) with no topic besides the documents themselves (what is left once
  the task's words, the words that point at the documents, such as "the passages above", and
  function words are gone: "Summarize what they say about refunds" has a topic, and is
  ranked by it);
- "all", "every" or "each" of something in the documents ("every date in these files"), in an
  ask that is not a question (a template's "read all of the passages and answer: who...?" is
  one);
- an ask with no topic at all, the earlier turns a follow-up refers to included ("What is
  this about?"): there is nothing to rank by;
- an ask that is not a question and whose topics no document holds ("Make this shorter",
  "Put the passages into Spanish"): nothing in the documents answers to its words. A question
  whose words the documents do not use is still ranked: the model reads what it means.
(A request with no ask, no user turn and no ``Request.query``, is not one: the retrieval stage
keeps its retriever's order.)

Missing one costs what it cost before; a false alarm costs the tokens the stage would have
saved on that request, never an answer.

Bounded by construction: at most :data:`EARLIER_TURNS` earlier turns, each read as its first
and last :data:`VIEW_CHARS` / 2 characters when longer, the first and last sentences of a long
message (:data:`HEAD_SENTENCES`, :data:`TAIL_SENTENCES`), each view cut to :data:`VIEW_CHARS`
characters. Pure Python: no model runs here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from .request import Request
from .text import analyse, sentence_bounds

__all__ = [
    "EARLIER_TURNS",
    "HEAD_SENTENCES",
    "MAX_QUESTIONS",
    "TAIL_SENTENCES",
    "VIEW_CHARS",
    "Ask",
    "ask_of",
    "asks_for_whole",
    "questions_in",
]

#: earlier user turns a follow-up may refer to (the most recent ones)
EARLIER_TURNS = 2
#: sentences of a long last message taken as views: a question comes first or last, around
#: instructions or a pasted text
HEAD_SENTENCES = 1
TAIL_SENTENCES = 3
#: characters of each view: an embedder reads a few dozen word pieces of it anyway
VIEW_CHARS = 1_000
#: the most questions of one ask scored each on its own; an ask with more (a questionnaire)
#: is scored as one, so a request's scoring work stays bounded
MAX_QUESTIONS = 4
# a question's end: its mark, then any closing quotes or brackets
_QUESTION_END = re.compile("[?\uff1f][\"')\\]\u2019\u201d]*\\s*$")
# a second question inside one: "and" (or "also") before a question word ("Who wrote it and
# when did it start?"); the question word stays with the second
_CLAUSE = re.compile(
    r"[,;]?\s+(?:and|also)\s+(?=(?:who|whom|whose|what|when|where|which|why|how)\b)",
    re.IGNORECASE,
)
#: a line that asks without a question mark: it opens with a question word, after a list's
#: bullet or number if any ("1. who wrote the outsiders", "- when did gettysburg start")
_MARKER = r"(?:[-*\u2022]|\(?(?:\d{1,2}|[a-z])[.)])[ \t]+"
_LISTED = re.compile(
    rf"^[ \t]*(?:{_MARKER})?"
    r"(?P<q>(?:who|whom|whose|what|when|where|which|why|how)\b[^\n?\uff1f]*)$",
    re.IGNORECASE | re.MULTILINE,
)
_MARKERS = re.compile(rf"^[ \t]*{_MARKER}", re.IGNORECASE | re.MULTILINE)
#: words by which a question refers back to what was said before it ("When was it
#: published?", "Who else was involved?"): English third-person pronouns and demonstratives,
#: "else", and their Chinese kin (a term holding one of those characters: 它们, 这件, 其他)
_BACK = re.compile(
    r"\b(?:it|its|itself|they|them|their|he|him|his|she|her|this|that|these|those|else)\b"
    r"|[它他她这那其]",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Ask:
    """``text``: what documents are scored against (a lexical scorer reads it all); ``views``:
    other ways the conversation may be asking it (empty: ``text`` is the only one);
    ``questions``: the separate questions it holds, when it holds several (else empty)."""

    text: str
    views: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()


def ask_of(request: Request) -> Ask:
    """The request's ask: ``Request.query`` as given, or one derived from its user turns."""
    if request.query is not None:
        return Ask(request.query, questions=questions_in(request.query))
    users = [m.text for m in request.messages if m.role == "user"]
    if not users:
        return Ask("")
    last = users[-1]
    earlier = [_clip(t) for t in users[-1 - EARLIER_TURNS : -1] if t.strip()]
    text = "\n".join([*earlier, last]) if earlier else last
    views: list[str] = []
    sentences = _sentences(last)
    if len(sentences) > 1:
        views += [last, *sentences]
    elif earlier:
        views.append(last)
    views += reversed(earlier)  # the most recent first
    unique = [v for v in dict.fromkeys(v[:VIEW_CHARS] for v in views) if v.strip()]
    return Ask(text, tuple(v for v in unique if v != text[:VIEW_CHARS]), questions_in(last))


def questions_in(text: str) -> tuple[str, ...]:
    """The questions ``text`` asks, when it is short and asks two to :data:`MAX_QUESTIONS`
    with a topic each (else none): its sentences that end in a question mark, each cut where
    "and" (or "also") comes before a question word ("Who wrote Dune and when did Gettysburg
    start?" asks two), and its lines that open with a question word, as a list of questions
    often has no marks ("1. who wrote the outsiders"). A long text is a pasted one, whose
    question marks are not the user's; a question with no topic ("Is that right?") names
    nothing to rank by. A question that leans on what was said before it (``_leans``: "Who
    wrote The Outsiders? When was it published?") is asked with it: with the sentences since
    the question before when they name something ("I read about Gettysburg. When did it
    start?"), else with that question. Alone, its one word matches whatever windows hold it. A
    line without a question mark is not cut: a search-box query ("who wrote antigone and what
    are the dates of his birth") is one ask, its second part leaning on the first."""
    spans = _question_spans(text) if len(text) <= VIEW_CHARS else []
    if len(spans) < 2:  # one question or none: nothing to split, nothing to analyse
        return ()
    found: list[tuple[int, int]] = []
    end = 0  # where the question before ended
    for a, b in spans:
        if _leans(text[a:b]):
            said = text[end:a]  # what was said since the question before
            if _topics(_MARKERS.sub("", said)):
                found.append((end + len(said) - len(said.lstrip()), b))
            elif found:
                found[-1] = (found[-1][0], b)
        elif _topics(text[a:b]):
            found.append((a, b))
        end = b
    unique = tuple(dict.fromkeys(text[a:b] for a, b in found))
    return unique if 2 <= len(unique) <= MAX_QUESTIONS else ()


def _question_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text``'s questions are, in order, without surrounding space: its sentences that
    end in a question mark, each cut where "and" comes before a question word (``_CLAUSE``),
    and its lines that ask without a mark (``_LISTED``), each whole."""
    listed = [(m.start("q"), m.start("q") + len(m["q"].rstrip())) for m in _LISTED.finditer(text)]
    if "?" not in text and "\uff1f" not in text:
        return listed
    spans: list[tuple[int, int]] = []
    for a, b in sentence_bounds(text):
        if not _QUESTION_END.search(text[a:b]):
            continue
        cuts = [(m.start(), m.end()) for m in _CLAUSE.finditer(text, a, b)]
        starts, ends = [a, *(e for _, e in cuts)], [*(s for s, _ in cuts), b]
        for start, end in zip(starts, ends):
            marked = _MARKERS.match(text, start)  # a list's bullet or number is not asked
            begin = marked.end() if marked else start
            part = text[begin:end]
            if part.strip():
                spans.append((begin + len(part) - len(part.lstrip()), begin + len(part.rstrip())))
    return sorted({*spans, *listed})


def _leans(question: str) -> bool:
    """Whether ``question`` leans on what was said before it: it refers back (``_BACK``) and
    names at most one thing of its own ("When was it published?", "Who else was in it?").
    Scored alone, its one word (or the model's reading of a pronoun) ranks windows that have
    nothing to do with what it asks about. All but one of nq20-dev's 1,000 questions name two
    things or more, and none that refers back names fewer."""
    if not _BACK.search(question):
        return False
    return len([t for t in _topics(question) if not _BACK.search(t)]) <= 1


def _clip(turn: str) -> str:
    """An earlier turn as the ask reads it: its head and tail when it is long (a pasted text
    with the question before or after it), so that BM25's work stays bounded."""
    if len(turn) <= VIEW_CHARS:
        return turn
    half = VIEW_CHARS // 2
    return f"{turn[:half]}\n{turn[-half:]}"


def _sentences(text: str) -> list[str]:
    """The first and last sentences of ``text`` with a word in them (all when few)."""
    spans = [(a, b) for a, b in sentence_bounds(text) if any(c.isalnum() for c in text[a:b])]
    if len(spans) > HEAD_SENTENCES + TAIL_SENTENCES:
        spans = spans[:HEAD_SENTENCES] + spans[-TAIL_SENTENCES:]
    return [text[a:b] for a, b in spans]


# ---------------------------------------------------------------- asks for the whole

#: a task over a whole text, in English and Chinese
_TASKS = re.compile(
    r"\b(?:summar\w*|overview|recap|tl;?dr|gist|translat\w*|rewrite|rephrase|paraphrase"
    r"|proofread|outline|compare|contrast|list|enumerate|extract|explain|describe|review"
    r"|analy[sz]e)\b|总结|概括|摘要|概述|归纳|翻译|改写|要点|比较|列出|列举",
    re.IGNORECASE,
)
#: "all", "every" or "each" of something in the documents
_EVERY = re.compile(
    r"\b(?:all|every|each)\b[^.?!\n]{0,60}?\b(?:in|across|from|of|throughout)\s+"
    r"(?:the\s+|these\s+|those\s+|all\s+(?:the\s+)?|each\s+|every\s+)?"
    r"(?:documents?|docs?|passages?|sources?|articles?|chunks?|context|texts?|results?"
    r"|pages?|files?)\b"
    r"|(?:所有|全部|每(?:篇|个|份|段))[^。？！?\n]{0,30}(?:文档|文章|资料|段落|来源|内容|结果)",
    re.IGNORECASE,
)
#: a question that part of the documents may answer
_QUESTION = re.compile(
    r"[?？]|^\W*(?:who|what|when|where|which|why|how|whose|whom)\b|什么|哪|谁|吗|多少",
    re.IGNORECASE | re.MULTILINE,
)
#: words that point at the documents, shape an answer or ask for one, and the tasks' own words:
#: none of them is a topic
_NOT_TOPICS = (
    "document docs doc passage text context article source chunk result page file paper "
    "content material excerpt snippet information info data above below following provided "
    "given attached whole entire everything anything something please briefly brief short "
    "shortly concise concisely detail detailed bullet point sentence paragraph word line "
    "language english french spanish german chinese japanese korean italian portuguese "
    "russian arabic hindi dutch say said tell write give make help mention include contain "
    "discuss cover read find show need want like us thing stuff plain simple simpler clear "
    "style tone formal informal tl dr search now instead ok okay thanks thank yes quick "
    "quickly kindly one two three four five six seven eight nine ten few several couple "
    "overall note table email draft bulleted format markdown json csv memo "
    "summary summarize summarise overview recap tldr gist translate translation rewrite "
    "rephrase paraphrase proofread outline compare contrast list enumerate extract explain "
    "describe review analyse analyze key main idea takeaway "
    "文档 文章 资料 段落 内容 上文 以上 下文 下面 上面 全文 文本 来源 结果 信息 一下 简要 简单 "
    "简短 详细 中文 英文 英语 请 帮 帮我 用 成 总结 概括 摘要 概述 归纳 翻译 改写 要点 比较 "
    "列出 列举 所有 全部 每篇 主要 关键 说 讲 把 将 翻译成 改写成 总结成 概括成 "
    "时候"  # of 什么时候, "when", which the segmenter leaves a word
)


@cache
def _not_topics() -> frozenset[str]:
    return frozenset(analyse(_NOT_TOPICS))


def _topics(text: str) -> set[str]:
    """The terms of ``text`` that name something besides the documents and what to do with
    them."""
    return {t for t in analyse(text) if t not in _not_topics() and not t.isdigit()}


def asks_for_whole(request: Request) -> bool:
    """Whether ``request`` asks for its documents as a whole (the module docstring): a
    summary, a translation, every one of something in them, or nothing to rank them by."""
    if request.query is not None:
        last = request.query
    else:
        users = [m.text for m in request.messages if m.role == "user"]
        last = users[-1] if users else ""
    if _TASKS.search(last) and not _topics(last):
        return True
    if _EVERY.search(last) and not _QUESTION.search(last):
        return True
    text = ask_of(request).text
    if not text.strip() or not request.documents:
        return False  # no ask at all (the retriever's order), or nothing to look in
    topics = _topics(text)
    if not topics:
        return True  # nothing to rank by
    if _QUESTION.search(last):
        return False  # a question: ranked, by the model where the documents word it otherwise
    # the first line that holds one ends the search: the words of an ask are in the documents
    # retrieved for it, most often in the first one's first lines
    lines = (line for d in request.documents for line in (d.title or "", *d.text.split("\n")))
    return not any(topics.intersection(analyse(line)) for line in lines if line.strip())
