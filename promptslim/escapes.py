"""Text written with JSON's ``\\uXXXX`` escapes or HTML's character references, as its readers
see it.

Python's ``json.dumps`` writes every character past ASCII as an escape unless told otherwise
(``ensure_ascii=True`` is its default), and so do the JSON Lines exports, logs that print a
JSON payload and YAML dumps made with it. A document of such lines reaches the retrieval stage
as ASCII: to a word-based scorer "Gr\\u00f6\\u00dfe" is three runs of letters and hex, a
Chinese passage is nothing but hex, and to the language check it is all English, so a Chinese
question finds its documents "in another language" and keeps every one. The retrieval
stage's scorers, window sizes and language check, the extractive compressor's ranking and the
tools stage's prose test read the characters the escapes stand for (:func:`unescaped`); the
document's bytes are kept as they were sent.

Only ``\\u`` escapes are read: ``\\n`` or ``\\t`` are as common in LaTeX (``\\nabla``,
``\\theta``) and in Windows paths as in JSON, and what they stand for is a space to a scorer.

HTML and XML write the same way: a page saved as ASCII (Python's ``xmlcharrefreplace``, many
CMS exports) holds ``&#20013;`` for each Chinese character, and scraped text keeps ``&amp;``,
``&eacute;`` and ``&#39;``. A character reference is read only when it ends with ``;``: HTML5
also reads legacy names without one, so ``html.unescape`` turns the "&not" of a URL's
"&notify=1" into "¬", and plain text holds such runs.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from html.entities import html5

__all__ = ["unescaped"]

# a surrogate pair (a character past the BMP: an emoji, a rare Han character) or one escape;
# not after a backslash, which makes the escape's own backslash a character of the text
# (JSON writes the "u" in lower case alone: Python's \U0001F600 is no JSON escape)
_HEX = "[0-9a-fA-F]"
_ESCAPE = re.compile(
    rf"(?<!\\)\\u([dD][89abAB]{_HEX}{{2}})\\u([dD][c-fC-F]{_HEX}{{2}})|(?<!\\)\\u({_HEX}{{4}})"
)
_SURROGATES = range(0xD800, 0xE000)
# a named reference, or a decimal or hex one, with its ";" (HTML5's longest name has 31 letters)
_REFERENCE = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});")


def unescaped(text: str) -> str:
    """``text`` with each JSON ``\\uXXXX`` escape (and surrogate pair) and each HTML character
    reference read as its character: ``text`` itself when it holds none. A lone surrogate and
    a name HTML does not define stay written as they were, and a control character other than
    a tab or a line break reads as a space."""
    if "\\u" in text:
        text = _ESCAPE.sub(_character, text)
    if "&" in text:
        text = _REFERENCE.sub(_referenced, text)
    return text


def _character(match: re.Match[str]) -> str:
    high, low, single = match.groups()
    if single is None:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    code = int(single, 16)
    if code in _SURROGATES:
        return match.group(0)
    return _readable(chr(code))


def _referenced(match: re.Match[str]) -> str:
    return _reference(match.group(0))


# a page saved as ASCII writes each of its few thousand characters hundreds of times
@lru_cache(maxsize=8192)
def _reference(reference: str) -> str:
    if reference[1] == "#":  # html.unescape reads a number no character has as U+FFFD
        character = html.unescape(reference)
    else:  # the whole name alone: html.unescape reads an unknown "&notary;" as "¬ary;"
        character = html5.get(reference[1:], reference)
    return _readable(character)


def _readable(character: str) -> str:
    """A control character (what ``\\u0000`` or ``&#7;`` stand for) reads as a space, as does
    the nothing ``html.unescape`` reads a control code's reference as."""
    if not character or (len(character) == 1 and character < " " and character not in "\t\n\r"):
        return " "
    return character
