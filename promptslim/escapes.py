"""Text written with JSON's ``\\uXXXX`` escapes, as its readers see it.

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
"""

from __future__ import annotations

import re

__all__ = ["unescaped"]

# a surrogate pair (a character past the BMP: an emoji, a rare Han character) or one escape;
# not after a backslash, which makes the escape's own backslash a character of the text
# (JSON writes the "u" in lower case alone: Python's \U0001F600 is no JSON escape)
_HEX = "[0-9a-fA-F]"
_ESCAPE = re.compile(
    rf"(?<!\\)\\u([dD][89abAB]{_HEX}{{2}})\\u([dD][c-fC-F]{_HEX}{{2}})|(?<!\\)\\u({_HEX}{{4}})"
)
_SURROGATES = range(0xD800, 0xE000)


def unescaped(text: str) -> str:
    """``text`` with each JSON ``\\uXXXX`` escape (and surrogate pair) read as its character:
    ``text`` itself when it holds none. A lone surrogate stays written as it was (no encoder
    takes it), and a control character reads as a space."""
    if "\\u" not in text:
        return text
    return _ESCAPE.sub(_character, text)


def _character(match: re.Match[str]) -> str:
    high, low, single = match.groups()
    if single is None:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    code = int(single, 16)
    if code in _SURROGATES:
        return match.group(0)
    return chr(code) if code >= 0x20 or chr(code) in "\t\n\r" else " "
