"""Document lists in tool results: a search or retrieval tool that returns its hits as a JSON
array of passages (``[{"title": ..., "snippet": ...}, ...]``, or ``{"results": [...]}``).

Such an array is not records: which item matters depends on what each one says, not on a
status field or an outlier, and the answer may sit anywhere in a passage, where a long string's
head is what the JSON crusher keeps. This module finds the array and writes it back once
something else (the tools stage's retrieval stage) has chosen what of it to keep: the items
left out become one marker per run, the parts left out of a kept passage one marker each,
every original in an ``Elision``. What counts as a document list:

- an array of at least ``MIN_ITEMS`` items (at most ``MAX_ITEMS``), at the top or under an
  object's member up to ``SEARCH_DEPTH`` levels down (inside an array of arrays too: one list
  per query), or an object there (a fetched page's
  ``{"url": ..., "content": ...}``), taken as a list of one that is never left out whole; an
  array with a sibling as long (Chroma's ``ids`` beside its ``documents``) keeps each item's
  place, one marker for each item left out;
- each item a string, or an object with a string member (the same key path in at least
  ``BODY_SHARE`` of them, its own or of an object it holds: ``metadata.text``) that is its
  body: of those key paths, the one holding the most characters;
- bodies that read as prose (``prose.reads_as_prose``: no ids, URLs, keys, encoded blobs,
  code, diffs or listings) and make up at least ``PROSE_SHARE`` of the text a reader reads (the result's string values, links aside: a search hit's title and snippet,
  not its URL): an API listing whose objects carry a description among dozens of fields
  stays the JSON crusher's business. Where the caller asks for ``messages`` (the tools
  stage), an array of at least ``MIN_MESSAGES`` untitled items whose bodies read as prose
  but for their length, down to ``MESSAGE_CHARS`` (a chat channel's history: one text in
  order, a line or two a message), counts too: the crusher's first and last items and
  matching words lose the answer a message or two after the one that names the subject.
  Items with a status-like field (a JSON log's ``level``) are records, not messages.

Items that hold one of the turn's literals (``literal_items``: an id the question names) stay
whatever the ranking says, as the crusher keeps them (cut, if the ranking kept them cut).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import Compressed, Elision, ToolContext, elision_id, marker
from .json_crusher import matching_items
from .json_fields import LINK_SCHEMES
from .json_status import Paths
from .json_values import Obj, TooDeep, dump_json, items_leaves, leaves, load_json
from .match import matcher_for
from .prose import MAX_ITEMS, Found, reads_as_prose, trimmed_body

__all__ = ["DocumentList", "find_documents", "literal_items", "parse_json", "render_documents"]

#: where a document list may be, and how many items it holds (the module docstring)
MIN_ITEMS = 1
SEARCH_DEPTH = 2
BODY_SHARE = 0.8
#: member names that title an item (compared in lower case), and a title's longest
TITLE_KEYS = ("title", "name", "heading", "headline", "subject")
_MAX_TITLE = 300
#: how much of what a reader reads of the result the bodies must be
PROSE_SHARE = 0.5
#: items kept for the turn's literals, as the JSON crusher's ``max_matches``
MAX_LITERAL_ITEMS = 8
#: an untitled list of short bodies that counts where ``messages`` is asked for: this many
#: items at least, the body holding the median character and the mean line this long
MIN_MESSAGES = 8
MESSAGE_CHARS = 30

#: where an array sits: from the top, the index to follow in each object's pairs or array
Path = tuple[int, ...]


@dataclass(frozen=True)
class DocumentList:
    """A document list found in a tool result: the parsed JSON, where the array is, the key
    path of each item's body (empty: the items are the bodies themselves), and per item its
    body and title (``single``: the "list" is one object, whose body is the passage;
    ``aligned``: a sibling array as long, so each left-out item gets its own marker)."""

    data: Any
    path: Path
    where: str
    body_path: tuple[str, ...]
    bodies: tuple[str, ...]
    titles: tuple[str | None, ...]
    ascii_only: bool
    single: bool = False
    aligned: bool = False

    @property
    def body_key(self) -> str | None:
        """The body's key path as the report writes it (``metadata.text``); None: the items
        are the bodies themselves."""
        return ".".join(self.body_path) or None

    @property
    def items(self) -> list[Any]:
        value = self.data
        for at in self.path:
            value = value[at][1] if type(value) is Obj else value[at]
        return [value] if self.single else list(value)

    def leaves(self) -> list[list[tuple[str, Any]]]:
        """Each item's scalars with their key paths (what ``literal_items`` searches)."""
        return items_leaves(self.items, len(self.path) + 1)

    def render(self, kept: Mapping[int, Sequence[tuple[int, int]] | None]) -> Compressed | None:
        """``render_documents`` of this list."""
        return render_documents(self, kept)

    def subset(self, kept: Mapping[int, str | None]) -> str:
        """The JSON with only the items in ``kept`` (by index, in their order), each whole
        (None) or with its body replaced by the text given, and no marker where the others
        were: what the retrieval stage sends of a request document that is a document list,
        as it sends no marker for a document it drops. A ``single`` list's one item is the
        whole result."""
        out: list[Any] = []
        for i, item in enumerate(self.items):
            if i in kept:
                text = kept[i]
                if text is not None:
                    item = _with_member(item, self.body_path, text) if self.body_path else text
                out.append(item)
        new = out[0] if self.single and out else out
        return dump_json(_replaced(self.data, self.path, new), ascii_only=self.ascii_only)


def parse_json(text: str) -> Any:
    """``text``'s JSON value as ``load_json`` reads it, or None when it is not a JSON object
    or array (what ``find_documents`` and the JSON compressor both take)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return load_json(stripped)
    except (ValueError, RecursionError):
        return None


def find_documents(data: Any, text: str, *, messages: bool = False) -> DocumentList | None:
    """The document list in ``data`` (``text`` parsed by ``parse_json``), or None; None too
    for JSON nested deeper than the compressors walk (``MAX_DEPTH``), which the JSON
    compressor leaves as it is. ``messages``: an untitled list of short messages counts too
    (the module docstring)."""
    best: DocumentList | None = None
    ascii_only = text.isascii() and "\\u" in text
    for candidate in _arrays(data, (), "$", 0):
        found = _documents(data, candidate, ascii_only, messages)
        # on a tie the deeper candidate wins: `$.page` over `$` with the body `page.content`
        if found is not None and (best is None or _chars(found) >= _chars(best)):
            best = found
    if best is None:
        return None
    try:
        share = _text_chars(data)  # every value is walked: nesting past MAX_DEPTH fails here
    except TooDeep:
        return None
    return best if _chars(best) >= PROSE_SHARE * share else None


def _text_chars(data: Any) -> int:
    """The characters of ``data``'s string values that are not links: what a reader reads of
    a result (a search hit's title and snippet, not its URL, keys or punctuation)."""
    return sum(
        len(v)
        for _, v in leaves(data, 0)
        if type(v) is str and not (v.startswith(LINK_SCHEMES) and " " not in v)
    )


def literal_items(found: Found, context: ToolContext) -> set[int]:
    """The items that hold a literal of the turn (an id or a number the query or the call
    names, in any member), as the JSON crusher finds them: they stay whatever their text."""
    return matching_items(matcher_for(context), found.leaves(), MAX_LITERAL_ITEMS, 0)


def _chars(found: DocumentList) -> int:
    return sum(map(len, found.bodies))


class _Candidate(NamedTuple):
    """Where a document list may be: its path, its items, whether it is one object taken as
    a list (``single``), and whether a sibling array has as many items (``aligned``: Chroma's
    ``ids`` beside its ``documents``), so that each item must keep its place."""

    path: Path
    where: str
    items: list[Any]
    single: bool = False
    aligned: bool = False


def _arrays(
    value: Any, path: Path, where: str, depth: int, aligned: bool = False
) -> list[_Candidate]:
    """The arrays at ``value`` and under its members ``SEARCH_DEPTH`` levels down (and inside
    an array of arrays: Chroma's ``{"documents": [[...]]}``, one list per query), and each
    object among them as a list of one (a fetched page's ``{"url", "content"}``)."""
    if type(value) is list:
        found = [_Candidate(path, where, value, aligned=aligned)]
        if depth < SEARCH_DEPTH and value and all(type(v) is list for v in value):
            for i, inner in enumerate(value):
                found += _arrays(inner, (*path, i), f"{where}[{i}]", depth + 1, aligned)
        return found
    if type(value) is not Obj:
        return []
    found = [_Candidate(path, where, [value], single=True)]
    if depth < SEARCH_DEPTH:
        sizes = Counter(len(m) for _, m in value if type(m) is list)
        for j, (key, member) in enumerate(value):
            beside = type(member) is list and sizes[len(member)] > 1
            found += _arrays(member, (*path, j), f"{where}.{key}", depth + 1, beside)
    return found


def _documents(
    data: Any, found: _Candidate, ascii_only: bool, messages: bool
) -> DocumentList | None:
    path, where, items, single, aligned = found
    if not MIN_ITEMS <= len(items) <= MAX_ITEMS:
        return None
    titles: list[str | None] = [None] * len(items)
    body: tuple[str, ...] = ()
    if all(type(v) is str for v in items):
        bodies = list(items)
    else:
        members = [_members(v) for v in items]
        found_body = _body_path(members)
        if found_body is None:
            return None
        body = found_body
        bodies = [m[body] if type(m.get(body)) is str else "" for m in members]
        titles = [_title(m, body) for m in members]
    depth = len(path) + 1
    if not (reads_as_prose(bodies) or (messages and _messages(items, depth, body, bodies, titles))):
        return None
    return DocumentList(
        data, path, where, body, tuple(bodies), tuple(titles), ascii_only, single, aligned
    )


def _messages(
    items: list[Any],
    depth: int,
    body: tuple[str, ...],
    bodies: Sequence[str],
    titles: Sequence[str | None],
) -> bool:
    """Whether untitled ``bodies`` are a chat's messages: prose but for their length, in
    items without a status-like field (a log's ``level``, a job's ``status``: records the
    JSON crusher reads by their status, keeping the errors whatever their words), and not
    in a title member (``{"path", "title", "count"}``: named records, not messages)."""
    return (
        len(bodies) >= MIN_MESSAGES
        and not any(titles)
        and not (body and body[-1].lower() in TITLE_KEYS)
        and reads_as_prose(bodies, MESSAGE_CHARS, MESSAGE_CHARS)
        and not Paths(items_leaves(items, depth)).status
    )


def _members(item: Any) -> dict[tuple[str, ...], Any]:
    """An item's members by their key path: its own, and those of an object it holds (a
    vector store's ``{"id", "score", "metadata": {"text", "title"}}``); the first of a
    repeated name (``_trimmed`` edits that one). A number is a ``Num``, so ``type(v) is str``
    tells strings from it."""
    out: dict[tuple[str, ...], Any] = {}
    if type(item) is Obj:
        for k, v in item:
            if (k,) in out:
                continue  # a repeated name: its first member is the one read and edited
            out[(k,)] = v
            if type(v) is Obj:
                for k2, v2 in v:
                    out.setdefault((k, k2), v2)
    return out


def _body_path(items: list[dict[tuple[str, ...], Any]]) -> tuple[str, ...] | None:
    """The key path that holds the most characters among those with a string in at least
    ``BODY_SHARE`` of the items (None when there is none). By characters, not by which
    member is longest item by item: a chat export's ``ts`` (``"1700001164.000100"``) is
    longer than its one-word messages, and a few of those must not make the channel one
    blob."""
    chars: Counter[tuple[str, ...]] = Counter()
    strings: Counter[tuple[str, ...]] = Counter()
    for members in items:
        for k, v in members.items():
            if type(v) is str:
                chars[k] += len(v)
                strings[k] += 1
    common = [k for k, n in strings.items() if n >= BODY_SHARE * len(items)]
    return max(common, key=chars.__getitem__) if common else None


def _title(members: Mapping[tuple[str, ...], Any], body: tuple[str, ...]) -> str | None:
    for path, value in members.items():
        if path != body and path[-1].lower() in TITLE_KEYS and type(value) is str:
            return value if 0 < len(value) <= _MAX_TITLE else None
    return None


def render_documents(
    found: DocumentList, kept: Mapping[int, Sequence[tuple[int, int]] | None]
) -> Compressed | None:
    """``found``'s JSON with only the items in ``kept`` (by index): an item mapped to None
    whole, one mapped to spans with only those spans of its body (a marker for each stretch
    between). None when everything was kept."""
    items = found.items
    if found.single and 0 not in kept:
        kept = {0: None}  # the whole result is never left out
    elisions: list[Elision] = []
    out: list[Any] = []
    gap: list[int] = []
    for i, item in enumerate(items):
        if i not in kept:
            gap.append(i)
            if found.aligned:  # one marker an item: the sibling arrays' indexes still match
                out.append(_gap(found, items, gap, elisions))
                gap = []
            continue
        if gap:
            out.append(_gap(found, items, gap, elisions))
            gap = []
        spans = kept[i]
        out.append(item if spans is None else _trimmed(found, i, item, spans, elisions))
    if gap:
        out.append(_gap(found, items, gap, elisions))
    if not elisions:
        return None
    new = out[0] if found.single else out
    text = dump_json(_replaced(found.data, found.path, new), ascii_only=found.ascii_only)
    return Compressed(text, tuple(elisions), "documents")


def _gap(found: DocumentList, items: list[Any], gap: list[int], elisions: list[Elision]) -> str:
    original = dump_json([items[i] for i in gap], ascii_only=found.ascii_only)
    ident = elision_id(original)
    where = f"{found.where}[{gap[0]}:{gap[-1] + 1}]"
    elisions.append(Elision(ident, "items", len(gap), where, original))
    return marker(len(gap), "items" if len(gap) > 1 else "item", ident)


def _trimmed(
    found: DocumentList,
    i: int,
    item: Any,
    spans: Sequence[tuple[int, int]],
    elisions: list[Elision],
) -> Any:
    """Item ``i`` with its body cut to ``spans``."""
    field = found.where if found.single else f"{found.where}[{i}]"
    field += f".{found.body_key}" if found.body_key else ""
    text = trimmed_body(found.bodies[i], spans, field, elisions)
    return _with_member(item, found.body_path, text) if found.body_path else text


def _with_member(item: Any, path: tuple[str, ...], value: str) -> Obj:
    """``item`` (an object) with the first member at ``path`` set to ``value``, copied."""
    pairs = Obj(item)
    at = next(j for j, (k, _) in enumerate(pairs) if k == path[0])
    member = value if len(path) == 1 else _with_member(pairs[at][1], path[1:], value)
    pairs[at] = (path[0], member)
    return pairs


def _replaced(value: Any, path: Path, new: Any) -> Any:
    """``value`` with the value at ``path`` replaced by ``new`` (copies along the path)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if type(value) is not Obj:
        items = list(value)
        items[head] = _replaced(items[head], rest, new)
        return items
    pairs = Obj(value)
    key, member = pairs[head]
    pairs[head] = (key, _replaced(member, rest, new))
    return pairs
