"""JSON tool results: crush long arrays to the items that carry information, keep the rest
of the structure, and stay valid JSON.

For each array longer than ``head + tail`` items (and, for an array of scalars, longer than
``SMALL_ARRAY_CHARS`` in all: a marker would cost what it saves), kept are: the first ``head``
and last ``tail`` items; items holding a literal of the turn (an id, name or number from the
query or the tool-call arguments); the items that match the most query words; items whose
status-like fields (``state``, ``status``, ``error``, ``level``...: ``json_status``) differ
from the array's majority or that carry an error key the majority lacks; numeric outliers
(robust z-score over a field); and, so that the schema stays visible, further items (up to
``max_schema``, 3) showing key paths no kept item has. Each run of left-out items becomes
one string item, a marker saying how many were left out and what their status fields held,
with the id their original is stored under. Long strings keep their head and a marker,
unless the query names their key. In each object kept, the links (URL values) the turn does
not name become one marker pair, their keys named once (``json_fields``).

Numbers, ``NaN`` and ``Infinity`` are written back as the input spelled them, objects keep
duplicate keys and key order: what is kept is byte-exact data, written compactly.
"""

from __future__ import annotations

import statistics
from collections import Counter
from operator import itemgetter
from typing import Any

from ...errors import ConfigError
from ...text import find_protected_spans
from . import Compressed, Elision, ToolCompressor, ToolContext, elision_id, marker
from .json_dedup import dedup_subtrees
from .json_fields import LINK_SCHEMES, Links
from .json_status import Paths, status_note
from .json_values import MAX_DEPTH, Num, Obj, TooDeep, dump_json, items_leaves, load_json
from .match import Matcher, matcher_for

__all__ = ["JsonCompressor", "NotJson", "dump_json", "load_json", "matching_items"]

# an array of scalars shorter than this stays whole: a marker (about 40 characters with its
# id) would cost about what the items it replaced do (seven days of counts, a few tags)
SMALL_ARRAY_CHARS = 120
# a leaf's key path and its value
_path = itemgetter(0)
_value = itemgetter(1)


class NotJson(ValueError):
    """The text is not a JSON object or array (or is too deep for the parser)."""


class JsonCompressor(ToolCompressor):
    """Structure-aware crushing of JSON tool results (see the module docstring).

    ``head``/``tail``: items kept at each end of a long array. ``max_matches``: items kept for
    the turn's literals; ``word_matches``: items kept for query words. ``max_anomalies``:
    items kept for status fields that differ from the majority; ``max_outliers``: numeric
    outliers; ``max_schema``: further items kept to show key paths no kept item has.
    ``max_string``: strings longer than this keep their head (half of it) and a marker.
    ``dedup_chars``: later copies of an object this long or longer become markers (0: off).
    ``elide_links``: leave out the links of objects that the turn does not name.
    """

    name = "json"

    def __init__(
        self,
        *,
        head: int = 1,
        tail: int = 1,
        max_matches: int = 8,
        word_matches: int = 2,
        max_anomalies: int = 4,
        max_outliers: int = 2,
        max_schema: int = 3,
        max_string: int = 400,
        dedup_chars: int = 120,
        elide_links: bool = True,
    ) -> None:
        for fld, value in (
            ("head", head),
            ("tail", tail),
            ("max_matches", max_matches),
            ("word_matches", word_matches),
            ("max_anomalies", max_anomalies),
            ("max_outliers", max_outliers),
            ("max_schema", max_schema),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"must be an int >= 0, got {value!r}", field=fld)
        if isinstance(max_string, bool) or not isinstance(max_string, int) or max_string < 16:
            raise ConfigError(f"must be an int >= 16, got {max_string!r}", field="max_string")
        self.head = head
        self.tail = tail
        self.max_matches = max_matches
        self.word_matches = word_matches
        self.max_anomalies = max_anomalies
        self.max_outliers = max_outliers
        self.max_schema = max_schema
        self.max_string = max_string
        if isinstance(dedup_chars, bool) or not isinstance(dedup_chars, int) or dedup_chars < 0:
            raise ConfigError(f"must be an int >= 0, got {dedup_chars!r}", field="dedup_chars")
        self.dedup_chars = dedup_chars
        if not isinstance(elide_links, bool):
            raise ConfigError(f"must be a bool, got {elide_links!r}", field="elide_links")
        self.elide_links = elide_links

    def compress(self, text: str, context: ToolContext) -> Compressed | None:
        try:
            return self.compress_json(text, context)
        except NotJson:
            return None  # the text compressor's business

    def compress_json(
        self, text: str, context: ToolContext, *, parsed: Any = None
    ) -> Compressed | None:
        """``compress``, telling apart text that is not JSON (``NotJson`` raised) from JSON
        with nothing to crush (None), so the router need not parse it a second time.
        ``parsed``: the text's value from ``load_json``, where the caller has it already."""
        stripped = text.strip()
        if not stripped or stripped[0] not in "[{":
            raise NotJson("not a JSON object or array")
        if parsed is not None:
            data = parsed
        else:
            try:
                data = load_json(stripped)
            except (ValueError, RecursionError) as exc:
                raise NotJson(str(exc)) from exc
        try:
            ascii_only = text.isascii() and "\\u" in text
            run = _Run(self, matcher_for(context), stripped, ascii_only)
            crushed = run.crush(data, "$", 0)
            out, repeated = dedup_subtrees(
                crushed, min_chars=self.dedup_chars, ascii_only=run.ascii_only
            )
        except (ValueError, RecursionError, TooDeep):
            return None  # JSON too deep to walk: it goes on as it is
        run.elisions += repeated
        if not run.elisions:
            return None
        return Compressed(run.links.name_first(out), tuple(run.elisions), "json")


class _Run:
    """One compression: the settings, the turn's matcher, and the elisions found so far."""

    def __init__(self, cfg: JsonCompressor, matcher: Matcher, text: str, ascii_only: bool) -> None:
        self.cfg = cfg
        self.matcher = matcher
        self.ascii_only = ascii_only
        self.elisions: list[Elision] = []
        self.links = Links(matcher, self.elisions, text, ascii_only=ascii_only)

    def dump(self, value: Any) -> str:
        return dump_json(value, ascii_only=self.ascii_only)

    def crush(self, value: Any, path: str, depth: int) -> Any:
        """``value`` with its long arrays and strings crushed; what is unchanged is returned
        as it is (the same object), so a walk over kept data allocates nothing."""
        if isinstance(value, list):  # Obj is a list too
            if value and depth + 1 > MAX_DEPTH:
                raise TooDeep
            if type(value) is Obj:
                return self._object(value, path, depth)
            return self._array(value, path, depth)
        if depth > MAX_DEPTH:
            raise TooDeep
        if isinstance(value, str) and type(value) is not Num and len(value) > self.cfg.max_string:
            return self._string(value, path)
        return value

    def _object(self, pairs: Obj, path: str, depth: int) -> Obj:
        out: Obj | None = None
        limit = self.cfg.max_string
        links: list[int] = []
        for j, (k, v) in enumerate(pairs):
            if type(v) is str:
                if len(v) <= limit:
                    # a link: one http(s) URL and nothing else
                    if v.startswith(LINK_SCHEMES) and " " not in v and "\n" not in v:
                        links.append(j)
                    continue
                if self.links.named[k]:
                    continue  # a long string the query names is what the turn wants: whole
            elif not isinstance(v, list):
                continue
            new = self.crush(v, f"{path}.{k}", depth + 1)
            if new is not v:
                if out is None:
                    out = Obj(pairs)
                out[j] = (k, new)
        if len(links) > 1 and self.cfg.elide_links:
            elided = self.links.elide(pairs if out is None else out, links, path)
            if elided is not None:
                return elided
        return pairs if out is None else out

    # ---- strings

    def _string(self, value: str, path: str) -> str:
        cut = self.cfg.max_string // 2
        # a line break near the cut makes the cleanest edge, else a space: no id, number or
        # URL holds either, so an edge there splits none; a text with neither near the cut is
        # searched for the spans it must not split (the search costs more than the rest)
        edge = value.rfind("\n", cut // 2, cut)
        if edge <= 0:
            edge = value.rfind(" ", cut // 2, cut)
        if edge > 0:
            cut = edge
        else:
            for span in find_protected_spans(value[: cut + 200]):
                if span.start < cut < span.end:  # never split an id or a URL: cut before it
                    cut = span.start
        rest = value[cut:]
        ident = elision_id(rest)
        self.elisions.append(Elision(ident, "chars", len(rest), f"{path}[{cut}:]", rest))
        return value[:cut] + " " + marker(len(rest), "chars", ident)

    # ---- arrays

    def _array(self, items: list[Any], path: str, depth: int) -> list[Any]:
        cfg = self.cfg
        n = len(items)
        if n <= cfg.head + cfg.tail + 1 or _small_scalars(items):
            short = [self.crush(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(items)]
            return items if all(a is b for a, b in zip(short, items)) else short
        leaves = items_leaves(items, depth + 1)
        paths = Paths(leaves)
        keep: set[int] = set(range(cfg.head)) | set(range(n - cfg.tail, n))
        keep |= self._matches(leaves)
        keep |= self._anomalies(leaves, paths)
        keep |= self._outliers(leaves, paths)
        keep |= self._schema(leaves, keep)
        out: list[Any] = []
        gap: list[int] = []
        for i, v in enumerate(items):
            if i in keep:
                if gap:
                    out.append(self._gap(items, leaves, paths, gap, path))
                    gap = []
                out.append(self.crush(v, f"{path}[{i}]", depth + 1))
            else:
                gap.append(i)
        if gap:
            out.append(self._gap(items, leaves, paths, gap, path))
        return out

    def _gap(
        self,
        items: list[Any],
        leaves: list[list[tuple[str, Any]]],
        paths: Paths,
        gap: list[int],
        path: str,
    ) -> str:
        original = self.dump([items[i] for i in gap])
        ident = elision_id(original)
        note = status_note([leaves[i] for i in gap], paths.noted) if paths.noted else ""
        where = f"{path}[{gap[0]}:{gap[-1] + 1}]"
        self.elisions.append(Elision(ident, "items", len(gap), where, original, note))
        return marker(len(gap), "items" if len(gap) > 1 else "item", ident, note)

    def _matches(self, leaves: list[list[tuple[str, Any]]]) -> set[int]:
        return matching_items(self.matcher, leaves, self.cfg.max_matches, self.cfg.word_matches)

    def _anomalies(self, leaves: list[list[tuple[str, Any]]], paths: Paths) -> set[int]:
        status = paths.status
        if not status:
            return set()
        n = len(leaves)
        values: dict[str, dict[int, str]] = {}
        for i, lv in enumerate(leaves):
            for p, v in lv:
                if p in status and (v is None or isinstance(v, (str, bool))):  # Num is a str
                    values.setdefault(p, {})[i] = str(v)
        odd: Counter[int] = Counter()
        for p, by_item in values.items():
            if status[p] and len(by_item) <= n // 2:  # an error key
                odd.update({i: 2 for i in by_item if by_item[i] not in ("None", "False", "")})
                continue
            counts = Counter(by_item.values())
            if len(counts) < 2:
                continue
            major, _ = counts.most_common(1)[0]
            odd.update({i: 1 for i, v in by_item.items() if v != major and counts[v] <= n // 2})
        ranked = sorted(odd, key=lambda i: (-odd[i], i))
        return set(ranked[: self.cfg.max_anomalies])

    def _outliers(self, leaves: list[list[tuple[str, Any]]], paths: Paths) -> set[int]:
        measured = paths.measured
        if len(leaves) < 8 or not self.cfg.max_outliers or not measured:
            return set()
        # one dict per measured path up front: ``setdefault(p, {})`` built a dict per leaf
        numbers: dict[str, dict[int, float]] = {p: {} for p in measured}
        for i, lv in enumerate(leaves):
            for p, v in lv:
                if type(v) is Num and p in numbers:
                    try:
                        numbers[p][i] = float(v)
                    except ValueError:
                        continue
        scored: list[tuple[float, int]] = []
        for by_item in numbers.values():
            if len(by_item) < 8:
                continue
            med = statistics.median(by_item.values())
            # the robust z-score; when most values are equal (MAD 0) the mean absolute
            # deviation scales it instead (1.2533: its ratio to sigma for normal data)
            deviations = [abs(x - med) for x in by_item.values()]
            mad = statistics.median(deviations) / 0.6745
            scale = mad if mad > 0 else 1.2533 * statistics.fmean(deviations)
            if scale <= 0:
                continue
            for i, x in by_item.items():
                z = abs(x - med) / scale
                if z > 5.0:
                    scored.append((-z, i))
        chosen: list[int] = []
        for _, i in sorted(scored):
            if i not in chosen:
                chosen.append(i)
        return set(chosen[: self.cfg.max_outliers])

    def _schema(self, leaves: list[list[tuple[str, Any]]], keep: set[int]) -> set[int]:
        shown = {p for i in keep for p, _ in leaves[i]}
        extra: set[int] = set()
        for i, lv in enumerate(leaves):
            if len(extra) >= self.cfg.max_schema:
                break
            if i in keep or shown.issuperset(map(_path, lv)):
                continue
            extra.add(i)
            shown.update(map(_path, lv))
        return extra


def matching_items(
    m: Matcher, leaves: list[list[tuple[str, Any]]], max_matches: int, word_matches: int
) -> set[int]:
    """The items (by their leaves) that the turn names: up to ``max_matches`` holding its
    literals, most distinct ones first, and up to ``word_matches`` by query words: those
    holding a word few items hold (``{"name": "billing", ...}``: a record named by a plain
    word), then those matching the most query words (well above the array's median)."""
    if m.empty:
        return set()
    # each item's scalars as text (``str`` of a Num is its spelling), map()ed: per leaf
    # work in C, not in a comprehension
    texts = ["\x1f".join(map(str, map(_value, lv))) for lv in leaves]
    found, words = m.sets_per_part(texts)
    for lv, hits in zip(leaves, found):
        if not hits:
            continue  # most items: no literal, nothing to filter
        # a number names an item only as a whole value (``21`` is in every 2021 date)
        numeric = {h for h in hits if h.isdigit()}
        if numeric:
            hits -= numeric - set(map(str, map(_value, lv)))
    # a literal that most items hold (the repository every URL names) picks out nothing
    spread = Counter(h for hits in found for h in hits)
    limit = max(2, len(leaves) // 4)
    score = [sum(1 for h in hits if spread[h] <= limit) if hits else 0 for hits in found]
    ranked = sorted((i for i, s in enumerate(score) if s), key=lambda i: (-score[i], i))
    chosen = set(ranked[:max_matches])
    if m.words and word_matches:
        chosen |= _word_items(words, word_matches)
    return chosen


#: a query word in at most this many items of an array names them, as a literal would
_NAMING_ITEMS = 2


def _word_items(words: list[set[str]], most: int) -> set[int]:
    """Up to ``most`` items by the query words each holds (``words``): first those holding
    the most words that at most ``_NAMING_ITEMS`` items hold, then those holding the most
    words, at least 2 and above the median."""
    spread = Counter(w for held in words for w in held)
    rare = [sum(1 for w in held if spread[w] <= _NAMING_ITEMS) for held in words]
    counts = [len(held) for held in words]
    floor = max(2.0, statistics.median(counts) + 1)
    ranked = sorted(
        (i for i, c in enumerate(counts) if rare[i] or c >= floor),
        key=lambda i: (-rare[i], -counts[i], i),
    )
    return set(ranked[:most])


def _small_scalars(items: list[Any]) -> bool:
    """Whether ``items`` are scalars whose text is shorter than ``SMALL_ARRAY_CHARS``."""
    if len(items) * 2 > SMALL_ARRAY_CHARS or any(isinstance(v, list) for v in items):
        return False  # Obj is a list too
    return sum(len(v) if isinstance(v, str) else 5 for v in items) + len(items) < SMALL_ARRAY_CHARS
