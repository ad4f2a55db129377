"""The marks of subtitle and timed-transcript cues (SRT, WebVTT, Whisper's segments): the
timing line, the id above it, and the text's words without them. ``promptslim.layout`` reads a
text's cues with them."""

from __future__ import annotations

import re

__all__ = ["TIMING", "cue_free"]

_TIME = r"(?:\d{1,2}:)?\d{1,2}:\d{2}(?:[.,]\d{1,3})?"
#: a subtitle cue's timing line (SRT's ``00:00:03,500 --> 00:00:06,700``, WebVTT's, its cue
#: settings after it; a line that goes on in words, as a schedule's may, is no cue's), or the
#: start of a transcript's line that times its own text (Whisper's ``[00:04.000 --> 00:08.000]
#: text``)
_RANGE = rf"{_TIME} *--> *{_TIME}"
_SETTINGS = r"(?: +[\w-]+:\S+)*"  # WebVTT's cue settings (``align:start position:10%``)
TIMING = re.compile(rf"[^\S\n]*(?:\[{_RANGE}\] *|{_RANGE}{_SETTINGS}$)")
#: a cue's id and timing line, or the timing before a Whisper segment's text: nothing a
#: scorer needs to read (a timing line is about seventeen of the word pieces a model reads
#: of a window)
_CUE_MARKS = re.compile(
    rf"(?m)^(?:\d+\n)?[^\S\n]*{_RANGE}{_SETTINGS}[^\S\n]*(?:\n|$)|^[^\S\n]*\[{_RANGE}\] *"
)


def cue_free(text: str) -> str:
    """``text`` (subtitles: ``cues``) without its cues' ids and timing lines, the words a
    scorer reads of it."""
    return _CUE_MARKS.sub("", text)
