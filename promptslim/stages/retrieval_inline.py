"""Retrieved context inside a message (``promptslim.context_blocks``), ranked as documents.

A request with no ``Request.documents`` may still carry retrieved context, in its last user
message: a question template's (LlamaIndex's "Context information is below", a client's
``<documents>``). The block the template marks is taken out of the message and ranked as the
request's documents, with everything the stage does to documents; what is kept goes back in its
place, in its order, and the request goes on with no ``documents``, as it came. Only a block
that reads as prose (the tools stage's ``reads_as_prose``) is ranked: code, a log or JSON a
template marks as context is left whole.

A block in a system message is left as it is. From one request, a system prompt's section of
reference text cannot be told from context retrieved for this question, and the first is
exactly what a prefix cache serves: ranking it per question would change the prefix's bytes on
every request. (The prefix stage's work on it, moving its volatile values, is its own.)

A block is one document, cut by the stage's windows like any long document, unless it is a run
of sibling elements of one name (``<document index="1">...</document>``): each element is then a
document, and an element kept goes back with its tags, the text between elements kept with
the element after it. A block whose every part is kept goes back byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..backends.tools.prose import reads_as_prose
from ..context_blocks import ContextBlock, element_patterns, find_context_block
from ..memo import BoundedCache
from ..messages import Document
from ..reports import StageReport
from ..request import Request
from ..tokens import count_request, get_counter

__all__ = ["InlineContext", "inline_context", "inline_for"]

_OPEN_TAG = re.compile(r"<([A-Za-z][\w.-]*)(?:\s[^<>]*)?>")
#: ``find_context_block`` of a last user message, memoised: a pipeline looks before its
#: stages and its retrieval stage again (in a pipeline, to no block); bounded by entries and
#: by the characters of text held
_blocks: BoundedCache[str, ContextBlock | None] = BoundedCache(
    max_entries=1_024, max_size=8_000_000, compute=find_context_block
)
#: the most names of elements inside an element looked at for its body
_NESTED_NAMES = 8
_QUESTION = re.compile(
    r"(?im)^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?(?:(?:[\w-]+[ \t]+)?(?:question|query|q)(?: is)?"
    r"|用户问题|问题|提问)(?:\*\*)?[ \t]*[:：][ \t]*\n?[ \t]*(\S[^\n]*)"
)
_TAG = re.compile(r"<[^<>]*>")
#: the longest text beside an element's body read as its title
_TITLE_CHARS = 200
#: the share of a block's non-space characters its elements must hold to be its documents
_ELEMENTS_SHARE = 0.8


@dataclass(frozen=True)
class InlineContext:
    """A block of context found in ``original``'s message ``message``, and the request to rank
    it as (``request``: the block out of its message, its parts as ``documents``)."""

    original: Request
    message: int
    block: ContextBlock
    parts: Sequence[tuple[int, int]]  # each document's span in the block (the element's, or all)
    bodies: Sequence[tuple[int, int]]  # each document's text span in the block
    request: Request

    def put_back(self, ranked: Request) -> Request:
        """``ranked`` (the stage's output for ``request``) with its kept documents written back
        into the message in the block's place, in their order, and no ``documents``."""
        text = self._text()
        block = text[self.block.start : self.block.end]
        kept = {d.id: d.text for d in ranked.documents}
        pieces = [block[: self.parts[0][0]]]  # what comes before the elements and after them
        first = True
        for k, ((start, end), (body_start, body_end)) in enumerate(zip(self.parts, self.bodies)):
            body = kept.get(_doc_id(k, len(self.parts)))
            if body is None and not block[body_start:body_end].strip():
                body = block[body_start:body_end]  # nothing to rank: an empty element stays
            if body is None:
                continue
            if not first:  # an element goes with the text between it and the one before
                pieces.append(block[self.parts[k - 1][1] : start])
            pieces += [block[start:body_start], body, block[body_end:end]]
            first = False
        pieces.append(block[self.parts[-1][1] :])
        new = text[: self.block.start] + "".join(pieces) + text[self.block.end :]
        messages = list(ranked.messages)
        # the last user message still: stages before may have dropped turns before it
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        messages[last] = messages[last].model_copy(update={"content": new})
        return ranked.replace(messages=messages, documents=[], query=self.original.query)

    def finish(self, request: Request, reports: Sequence[StageReport]) -> tuple[Request, int]:
        """A pipeline's end (``inline_for``): ``request`` put back, its tokens, and the
        retrieval stage's report saying where the block was."""
        out = self.put_back(request)
        for report in reports:
            if report.stage == "retrieval":
                report.details["inline_context"] = self.details()
        return out, count_request(out, get_counter(out.tokenizer))

    def details(self) -> dict[str, Any]:
        """What the report says of the block."""
        return {
            "message": self.message,
            "kind": self.block.kind,
            "start": self.block.start,
            "end": self.block.end,
            "documents": len(self.parts),
        }

    def _text(self) -> str:
        content = self.original.messages[self.message].content
        assert isinstance(content, str)  # only a text message is searched for a block
        return content


def inline_for(stages: Sequence[Any], request: Request) -> InlineContext | None:
    """For a pipeline of ``stages``: the block of the request's last user message, where one of
    its retrieval stages reads one (``inline_context``). The block then goes through every
    stage as the request's documents (the budget shares them out, the compress stage shrinks
    them) and back into its message after the last (``InlineContext.finish``)."""
    reads = any(
        getattr(s, "name", None) == "retrieval" and getattr(s, "inline_context", False)
        for s in stages
    )
    return inline_context(request) if reads else None


def inline_context(request: Request) -> InlineContext | None:
    """The block of context in the request's last user message, made ready to rank; ``None``
    when there is none, or the request has documents of its own."""
    if request.documents:
        return None
    users = [i for i, m in enumerate(request.messages) if m.role == "user"]
    if not users or users[-1] < request.prefix_end():
        return None
    content = request.messages[users[-1]].content
    block = _blocks(content) if isinstance(content, str) else None
    if block is None:
        return None
    found = _made(request, users[-1], block)
    # what a template marks is passages; code, a log or JSON under "context:" is not ranked
    return found if reads_as_prose([d.text for d in found.request.documents]) else None


def _made(request: Request, i: int, block: ContextBlock) -> InlineContext:
    content = request.messages[i].content
    assert isinstance(content, str)
    text = content[block.start : block.end]
    elements = _elements(text) if block.kind == "tags" else []
    if elements:
        parts = [(e.start, e.end) for e in elements]
        bodies = [_body(text, e) for e in elements]
    else:
        parts = bodies = [(0, len(text))]
    docs = [
        Document(
            id=_doc_id(k, len(parts)),
            text=text[body[0] : body[1]],
            metadata=_title(text, part, body),
        )
        for k, (part, body) in enumerate(zip(parts, bodies))
    ]
    messages = list(request.messages)
    cut = content[: block.start] + content[block.end :]
    messages[i] = messages[i].model_copy(update={"content": cut})
    # the template's question line, where it has one, is the ask: not the template's words
    asked = _QUESTION.search(cut) if request.query is None else None
    query = asked.group(1).strip() if asked is not None else request.query
    ranked = request.replace(messages=messages, documents=docs, query=query)
    return InlineContext(request, i, block, parts, bodies, ranked)


class _Element(NamedTuple):
    """An element's span in a text, and its content's (between its tags)."""

    start: int
    end: int
    inner_start: int
    inner_end: int


def _named(text: str, name: str, start: int = 0, end: int | None = None) -> list[_Element]:
    """The elements named ``name`` in ``text[start:end]``, each open tag with the first close
    after it, in one pass: the work stays linear however many tags are left open."""
    end = len(text) if end is None else end
    opens, closes = element_patterns(name.lower())
    found: list[_Element] = []
    while (o := opens.search(text, start, end)) is not None:
        c = closes.search(text, o.end(), end)
        if c is None:
            break
        found.append(_Element(o.start(), c.end(), o.end(), c.start()))
        start = c.end()
    return found


def _elements(text: str) -> list[_Element]:
    """The block's sibling elements of its first element's name, when there are two or more
    and they hold most of its text; ``[]`` otherwise."""
    first = _OPEN_TAG.search(text)
    found = _named(text, first.group(1)) if first is not None else []
    if len(found) < 2:
        return []
    held = sum(len(text[e.start : e.end].split()) for e in found)
    return found if held >= _ELEMENTS_SHARE * len(text.split()) else []


def _body(text: str, element: _Element) -> tuple[int, int]:
    """Where an element's text lies: in the element it holds with most of its text, when it
    holds one (``<source>...</source><document_content>...</document_content>``: the other
    elements go with the tags), its spaces at either end left out."""
    start, end = element.inner_start, element.inner_end
    names = dict.fromkeys(m.group(1) for m in _OPEN_TAG.finditer(text, start, end))
    nested = [e for name in list(names)[:_NESTED_NAMES] for e in _named(text, name, start, end)]
    best = max(nested, key=lambda e: e.inner_end - e.inner_start, default=None)
    inner_words = len(text[start:end].split())
    if best is not None and len(text[best.inner_start : best.inner_end].split()) >= inner_words / 2:
        start, end = best.inner_start, best.inner_end
    body = text[start:end]
    if not body.strip():
        return start, end
    return start + len(body) - len(body.lstrip()), end - len(body) + len(body.rstrip())


def _title(text: str, part: tuple[int, int], body: tuple[int, int]) -> dict[str, str]:
    """An element's title: the text of what it holds beside its body (``<source>``,
    ``<title>``), which the scorers read as a document's title; none when that is long."""
    inner = text[part[0] : body[0]] + " " + text[body[1] : part[1]]
    words = " ".join(_TAG.sub(" ", inner).split())
    return {"title": words} if words and len(words) <= _TITLE_CHARS else {}


def _doc_id(k: int, n: int) -> str:
    return "context" if n == 1 else f"context:{k + 1}"
