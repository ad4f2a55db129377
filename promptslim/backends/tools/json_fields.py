"""Link fields of JSON objects: left out, their keys named once, unless the turn names them.

API responses are mostly objects whose bytes go to links: a GitHub repository carries about
45 ``*_url`` fields and each user in it 16 more, all built from names and ids the object holds
anyway. A turn rarely needs a link, and when it does it names it. So in each object a string
value that is one http(s) URL is left out, unless the turn names it:

- its key is among the query's words, or each of the key's words is (``clone url`` names
  ``clone_url``; words under three letters do not count);
- or a literal of the turn (an id, name or number from the query, the call's arguments or the
  protected literals) is in it, and in the object's links at most a quarter as many times as
  there are links: the repository that every link of a response names picks none out.

An object's links go only when together they are longer than the marker that replaces them
(``MIN_CHARS``). They become one pair at the object's end, ``"…": "[… 45 fields elided id=ps…]"``,
whose original is the fields left out as a JSON object (objects are unordered in JSON:
restoring merges the pairs back). The first marker for each set of keys names them, ``(url,
html_url, forks_url, …)``, so every key path is shown once. That naming is added to the
finished text (``name_first``), after repeated objects were found, so that two copies of an
object stay equal whichever of them comes first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from . import Elision, elision_id, marker
from .json_values import Obj, encoder
from .match import Matcher

__all__ = ["LINK_KEY", "LINK_SCHEMES", "MIN_CHARS", "Links"]

#: the key of the pair that stands for an object's left-out links
LINK_KEY = "…"
#: an object's links go only when their text is at least this long: the marker pair costs
#: about 50 characters (its id is 14), two typical API links about 120
MIN_CHARS = 120
#: what a link starts with
LINK_SCHEMES = ("https://", "http://")
_KEY_WORDS = re.compile(r"[a-z0-9]+")
_MAX_KEYS = 4096
# compact JSON of a dict of strings, as ``json_values.dump_json`` writes it (the same string
# encoders), by the standard library's C encoder: by ascii_only
_DUMPS: dict[bool, Callable[[Any], str]] = {
    a: json.JSONEncoder(ensure_ascii=a, separators=(",", ":"), check_circular=False).encode
    for a in (False, True)
}


class _NamedKeys(dict[str, bool]):
    """Whether the query names a key, by key: a dict lookup once a key was seen."""

    __slots__ = ("words",)

    def __init__(self, words: frozenset[str]) -> None:
        super().__init__()
        self.words = words

    def __missing__(self, key: str) -> bool:
        # a turn meets each key of its results here once: a set test, not a loop over words
        low, parts = _key_words(key)
        found = low in self.words or (parts <= self.words if parts else False)
        if len(self) < _MAX_KEYS:
            self[key] = found
        return found


@lru_cache(maxsize=_MAX_KEYS)
def _key_words(key: str) -> tuple[str, frozenset[str]]:
    """A key lowercased and its words of three letters or more: the same for every query (an
    API's keys repeat from response to response), so found once, not once per turn."""
    low = key.lower()
    return low, frozenset(p for p in _KEY_WORDS.findall(low) if len(p) >= 3)


@lru_cache(maxsize=64)
def _named_keys(words: tuple[str, ...]) -> _NamedKeys:
    """The keys a query names, shared by the results of one turn (the same words): an API's
    keys repeat from result to result. Bounded: at most ``_MAX_KEYS`` keys are remembered."""
    return _NamedKeys(frozenset(words))


class Links:
    """One compression's link elision: the turn's words and literals, the elisions it made,
    and the first marker of each set of keys (named by ``name_first`` once the text is
    written). ``text``: the JSON text, so literals it does not hold are never looked for."""

    __slots__ = ("dumps", "elisions", "enc", "key_taken", "literals", "named", "unnamed")

    def __init__(
        self, matcher: Matcher, elisions: list[Elision], text: str, *, ascii_only: bool
    ) -> None:
        self.enc = encoder(ascii_only)
        self.dumps = _DUMPS[ascii_only]
        self.elisions = elisions
        self.named = _named_keys(matcher.words)
        # an escape could hide a literal from a search of the text: then look for them all
        raw = "\\" not in text
        self.literals = [lit for lit in matcher.literals if not raw or lit in text]
        # whether some object could already hold the marker's key (checked per object then)
        self.key_taken = not raw or f'"{LINK_KEY}"' in text
        # the set of keys -> (the marker as written, the marker naming them)
        self.unnamed: dict[tuple[str, ...], tuple[str, str]] = {}

    def elide(self, pairs: Obj, links: list[int], path: str) -> Obj | None:
        """``pairs`` without the links the turn did not name (the indexes in ``links``) and
        with the marker pair at the end; None when nothing goes."""
        named = self.named
        drop = [j for j in links if not named[pairs[j][0]]]
        if len(drop) > 1 and self.literals:
            drop = self._unpicked(pairs, drop, len(links))
        if len(drop) < 2:
            return None
        keys = tuple([pairs[j][0] for j in drop])
        fields = dict([pairs[j] for j in drop])
        enc = self.enc
        if len(fields) == len(keys):  # links and keys are plain strings: the C encoder
            original = self.dumps(fields)
        else:  # a key given twice: each pair written
            original = "{" + ",".join(enc(pairs[j][0]) + ":" + enc(pairs[j][1]) for j in drop)
            original += "}"
        if len(original) < MIN_CHARS:
            return None  # the marker would cost about what the links do
        if self.key_taken and any(k == LINK_KEY for k, _ in pairs):
            return None  # the marker's key is taken: restoring could not tell them apart
        ident = elision_id(original)
        shown = marker(len(drop), "fields", ident)
        note = ""
        if keys not in self.unnamed:
            note = ", ".join(keys)
            self.unnamed[keys] = (enc(shown), enc(marker(len(drop), "fields", ident, note)))
        self.elisions.append(Elision(ident, "fields", len(drop), path, original, note))
        gone = set(drop)
        out = Obj([p for j, p in enumerate(pairs) if j not in gone])
        out.append((LINK_KEY, shown))
        return out

    def _unpicked(self, pairs: Obj, drop: list[int], links: int) -> list[int]:
        """The links in ``drop`` that no literal of the turn picks out. A literal's spread is
        counted in one ``str.count`` over the links joined (most literals are in none of
        them, or in most); only the few that pass are then found link by link."""
        values: list[str] = [pairs[j][1] for j in drop]
        joined = "\x1e".join(values)
        limit = max(1, links // 4)
        rare = [lit for lit in self.literals if 0 < joined.count(lit) <= limit]
        if not rare:
            return drop
        found = Matcher(rare, ()).literals_per_part(values)
        return [j for j, hits in zip(drop, found) if not hits]

    def name_first(self, text: str) -> str:
        """``text`` with the first marker of each set of keys naming them (the first written
        is the first in the text: the walk writes objects in document order, and a repeated
        object that became a reference is a later copy, never the first)."""
        for plain, named in self.unnamed.values():
            text = text.replace(plain, named, 1)
        return text
