"""Retrieved context written into a message's text, found by the marks prompt templates put
around it.

A client that calls a chat API through the proxy, or a chain that "stuffs" its documents into
the prompt, sends no ``Request.documents``: its retrieved context is part of a message, set off
by a template. Four kinds of mark are read, the ones the common templates use:

- **tags**: a ``<documents>``, ``<context>``, ``<search_results>``... element (the block is its
  content), or sibling ``<document>`` elements with no container (first to last);
- **a heading**: an unindented line that names the context and ends in a colon or "is below"
  (``Context:``, ``## Documents``, ``Context information is below.``): the block starts after
  it, between fence lines (``-----``) when one follows;
- **a lead-in**: "the following (pieces of retrieved) context / documents / passages", "the
  context below", "these sources:", "Here are the relevant passages:": the block starts on
  the next line after a colon, else at the next paragraph;
- **a lead-out**: a short last paragraph that points back ("Using the information above,
  answer..."): the block is what comes before it (after a short first paragraph that ends in
  a colon, if there is one).

A block that is not fenced or closed ends at a line that starts the template's next part
(``Question:``, ``Query:``, ``Answer:``, ``Instructions:``) or at the message's end; there, a
short last paragraph stays outside it, as templates put their question or a last instruction
after the context. A block under ``MIN_CHARS`` is not worth ranking and is not reported.

The marks are English and Chinese (参考资料：, 以下资料, 根据以上内容, 问题：); a template in
another language is left as it is. A Chinese block's characters each weigh ``CJK_CHAR_WEIGHT``
toward ``MIN_CHARS``, as the retrieval stage's windows weigh them.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from .scripts import CJK_CHAR_WEIGHT, dominant_script

__all__ = ["MIN_CHARS", "ContextBlock", "element_patterns", "find_context_block"]

#: the fewest characters a block must have (about 250 tokens of English): below it, ranking
#: and selection cost more than the little they could save
MIN_CHARS = 1_000
#: a last paragraph this short, after an unclosed block, is the template's (a question, an
#: instruction), not the context's
_TAIL_CHARS = 300

_TAG_NAMES = (
    "documents|document|docs|doc|context|contexts|search_results|search_result|sources|passages|"
    "passage|chunk|snippets|snippet|excerpt|results|result|"
    "retrieved_documents|retrieved_context|knowledge|references|chunks|excerpts"
)
_OPEN = re.compile(rf"<({_TAG_NAMES})(?:\s[^<>]*)?>", re.IGNORECASE)
_NOUN = (
    r"(?:context|contexts|documents?|docs|passages?|sources?|search results|results|excerpts?|"
    r"snippets?|articles?|chunks?|information|knowledge(?: base)?|reference material|references)"
)
#: the same nouns in Chinese templates (参考资料：, 以下资料, 根据以上内容)
_ZH_NOUN = r"(?:上下文|参考资料|参考文档|资料|背景信息|背景资料|相关信息|已知信息|文档|材料|检索结果|搜索结果)"
_ZH_REFERENCE = rf"(?:{_ZH_NOUN}|内容|段落|文章|信息)"
#: a heading's words before the noun ("Relevant documents:", "Wikipedia article section:")
_QUALIFIER = r"(?:[\w-]+[ \t]+){0,2}"
_HEADING = re.compile(
    rf"(?im)^(?:#{{1,6}}[ \t]*)?(?:\*\*)?{_QUALIFIER}{_NOUN}(?:[ \t]+(?:information|section))?"
    rf"(?:\*\*)?[ \t]*(?::(?:\*\*)?|(?:is|are) (?:given |provided |shown )?below[.:]?)"
    rf"[ \t]*(?:\n|(?=\S))"
    rf"|^#{{1,6}}[ \t]*{_QUALIFIER}{_NOUN}[ \t]*\n"  # a Markdown heading with no colon
    rf"|^\[{_QUALIFIER}{_NOUN}\][ \t]*\n"  # [CONTEXT]
    rf"|^{_QUALIFIER}{_NOUN}[ \t]*\n(?=[ \t]*([-=*_~])\1{{2,}}[ \t]*\n)"  # a title over a fence
    rf"|^{_QUALIFIER}{_NOUN} (?:for|from|about|on) [^\n:]{{1,40}}:[ \t]*\n"  # "Results for...:"
    rf"|^(?:#{{1,6}}[ \t]*)?(?:\*\*)?{_ZH_NOUN}(?:\*\*)?[ \t]*[:：][ \t]*(?:\n|(?=\S))"
)
_LEAD_IN = re.compile(
    rf"(?im)\b(?:the|these|this) (?:following|below) (?:pieces of )?{_QUALIFIER}{_NOUN}\b"
    rf"|\b(?:the|these) {_QUALIFIER}{_NOUN} (?:below|provided below|that follows?)\b"
    rf"|\b(?:the|these|those) {_QUALIFIER}{_NOUN}\b[^\n:.]{{0,40}}:[ \t]*$"
    rf"|^here(?:'s| is| are) (?:some |the )?{_QUALIFIER}{_NOUN}\b[^\n]*:[ \t]*$"
    rf"|(?:以下|下面|下列|如下)(?:是|为)?(?:一些|几段|几篇|这些)?(?:相关|参考|检索到)?的?{_ZH_REFERENCE}"
)
#: a last paragraph that points back at the context ("Using the information above, ...")
_LEAD_OUT = re.compile(
    rf"(?i)\b(?:the|this|these) {_QUALIFIER}{_NOUN} above\b|\bthe above {_QUALIFIER}{_NOUN}\b"
    r"|\b(?:based on|given|using) the above\b"
    r"|(?:根据|基于|参考|结合)(?:以上|上述|上面)"
)
_FENCE = re.compile(r"[ \t]*(?:([-=*_~])\1{2,}|\"\"\"|```\w*)[ \t]*\n")
#: where an unfenced block ends: the template's next part, or a line that closes the context
_NEXT_PART = re.compile(
    r"(?im)^(?:(?:\*\*)?(?:question|query|user question|user query|q|instructions?|task|answer|"
    r"response)(?:\*\*)?[ \t]*:"
    r"|#{1,6}[ \t]*(?:question|query|user question|instructions?|task|answer)[ \t]*$"
    rf"|\[(?:/|end[ \t]+(?:of[ \t]+)?){_QUALIFIER}{_NOUN}\]"
    rf"|end of (?:the )?{_QUALIFIER}{_NOUN}\b"
    r"|(?:问题|用户问题|提问|查询|回答|答案)[ \t]*[:：])"
)


class ContextBlock(NamedTuple):
    """Where the context lies in a text: ``text[start:end]``, found by ``kind`` (``tags``,
    ``heading``, ``lead_in`` or ``lead_out``)."""

    start: int
    end: int
    kind: str


def find_context_block(text: str) -> ContextBlock | None:
    """The first block of retrieved context the text's template marks, with at least
    ``MIN_CHARS`` characters; ``None`` when there is none."""
    if len(text) < MIN_CHARS // CJK_CHAR_WEIGHT:
        return None
    for find in (_tagged, _headed, _led_in, _led_out):
        block = find(text)
        if block is not None and _long_enough(text[block.start : block.end].strip()):
            return block
    return None


def _long_enough(block: str) -> bool:
    """At least ``MIN_CHARS``, a CJK text's characters each weighing ``CJK_CHAR_WEIGHT`` (as
    the retrieval stage's windows weigh them)."""
    if len(block) >= MIN_CHARS:
        return True
    return len(block) * CJK_CHAR_WEIGHT >= MIN_CHARS and dominant_script(block) == "cjk"


def _tagged(text: str) -> ContextBlock | None:
    """The content of the first context element, or the run of sibling elements of one name
    when they have no container (``<document>...</document><document>...``)."""
    tried: set[str] = set()
    for m in _OPEN.finditer(text):
        name = m.group(1).lower()
        if name in tried:  # only each name's first element: the text is read once a name
            continue
        tried.add(name)
        opens, close = element_patterns(name)
        closes = list(close.finditer(text, m.end()))
        if not closes:
            continue
        sibling = opens.search(text, closes[0].end())
        if sibling is not None:  # siblings: the block is the elements themselves, first to last
            block = ContextBlock(m.start(), closes[-1].end(), "tags")
        else:
            block = ContextBlock(m.end(), closes[0].start(), "tags")
        if _long_enough(text[block.start : block.end].strip()):
            return block
    return None


@functools.lru_cache(maxsize=256)
def element_patterns(name: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The open and the close tag of elements named ``name``, any case (built once a name)."""
    escaped = re.escape(name)
    return (
        re.compile(rf"<{escaped}(?:\s[^<>]*)?>", re.IGNORECASE),
        re.compile(rf"</{escaped}\s*>", re.IGNORECASE),
    )


def _headed(text: str) -> ContextBlock | None:
    """The block after the first heading that names the context."""
    m = _HEADING.search(text)
    if m is None:
        return None
    start = m.end()
    fence = _FENCE.match(text, start)
    if fence is not None:  # fenced: the block ends at the next fence line
        start = fence.end()
        closing = _FENCE.search(text, start)
        if closing is not None:
            return ContextBlock(start, closing.start(), "heading")
    return _open_ended(text, start, "heading")


def _led_in(text: str) -> ContextBlock | None:
    """The block from the paragraph after "the following context" (or documents...)."""
    m = _LEAD_IN.search(text)
    if m is None:
        return None
    line_end = text.find("\n", m.end())
    if line_end >= 0 and text[m.end() : line_end].rstrip().endswith((":", "：")):
        return _open_ended(text, line_end, "lead_in")  # "...these sources:" opens the block
    brk = text.find("\n\n", m.end())
    if brk < 0:
        line = text.find("\n", m.end())
        if line < 0:
            return None
        brk = line
    return _open_ended(text, brk, "lead_in")


def _led_out(text: str) -> ContextBlock | None:
    """The block before a short last paragraph that points back at it ("the context above"),
    from the text's start or from after a short first paragraph that ends in a colon."""
    end = len(text.rstrip())
    last = text.rfind("\n\n", 0, end)
    if last < 0 or end - last > _TAIL_CHARS or _LEAD_OUT.search(text, last) is None:
        return None
    first = text.find("\n\n", 0, last)
    intro = 0 <= first <= _TAIL_CHARS and text[:first].rstrip().endswith((":", "："))
    start = first if intro else 0
    while start < last and text[start] in " \t\n\r":
        start += 1
    return ContextBlock(start, last, "lead_out")


def _open_ended(text: str, start: int, kind: str) -> ContextBlock:
    """A block from ``start`` to the template's next part, or to the end of the text less a
    short last paragraph."""
    while start < len(text) and text[start] in " \t\n\r":
        start += 1
    nxt = _NEXT_PART.search(text, start)
    if nxt is not None:
        end = nxt.start()
    else:
        end = len(text.rstrip())
        last = text.rfind("\n\n", start, end)
        if last > start and end - last <= _TAIL_CHARS:
            end = last
    while True:  # a separator line before the template's next part is the template's
        line = text.rfind("\n", start, len(text[:end].rstrip()))
        if line < start or not _FENCE.fullmatch(text[line + 1 : end].rstrip() + "\n"):
            return ContextBlock(start, end, kind)
        end = line
