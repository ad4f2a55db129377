"""``subtitles4``' and ``meeting4``' chunks: the NQ passages as timed text.

Captions (SRT, WebVTT) cut a video's words into cues of a few seconds each: a cue's id, its
timing line, a line or two of text, a blank line. A cue ends where its time runs out, not where
a sentence does, so most sentences go on from one cue to the next. A meeting tool's transcript
(WebVTT) gives each cue one line, the speaker's name before it. A RAG system over a video
library or a meeting archive sends such files as its loader read them.

Each passage is one file, its name (the passage's title) on the line above it. No cue ends
inside an answer, so the answer check reads each answer as written.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

from mail_data import SENDERS
from shapes_data import splits_answer

from promptslim.bench.datasets import BenchItem
from promptslim.types import Document

__all__ = [
    "CAPTION_COLUMNS",
    "CUE_LINES",
    "CUE_SECONDS",
    "MEETING_WORDS",
    "caption_file",
    "meeting_file",
    "meetings",
    "subtitles",
]

#: a caption line's most characters, and a caption cue's lines (broadcasters' rules)
CAPTION_COLUMNS = 42
CUE_LINES = 2
#: the words of a meeting transcript's cue (a few seconds of speech)
MEETING_WORDS = 11
#: the time each cue is on screen, the gap to the next one included
CUE_SECONDS = 3.5


def _clock(seconds: float, mark: str) -> str:
    """``seconds`` as a cue's time: ``00:01:03,500`` (SRT, ``mark`` ``,``) or ``.500``."""
    whole, millis = int(seconds), round(seconds % 1 * 1000)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}{mark}{millis:03d}"


def _cued(pieces: list[str], size: int, answers: tuple[str, ...]) -> list[list[str]]:
    """``pieces`` (lines or words) ``size`` to a cue; a cue ends later where its end would part
    an answer's words."""
    cues: list[list[str]] = []
    cue: list[str] = []
    for i, piece in enumerate(pieces):
        cue.append(piece)
        after = " ".join(pieces[i + 1 : i + 1 + 2 * size])
        if len(cue) >= size and not splits_answer(" ".join(cue), after, answers):
            cues.append(cue)
            cue = []
    return [*cues, cue] if cue else cues


def _timed(name: str, cues: list[list[str]], srt: bool) -> str:
    """A caption file of ``cues`` under its ``name``: SRT (numbered cues, times with a comma)
    or WebVTT (a header, times with a point)."""
    mark = "," if srt else "."
    blocks = [] if srt else ["WEBVTT"]
    for n, lines in enumerate(cues):
        start = n * CUE_SECONDS
        timing = f"{_clock(start, mark)} --> {_clock(start + CUE_SECONDS - 0.3, mark)}"
        blocks.append("\n".join([str(n + 1), timing, *lines]))
    return f"{name}.{'srt' if srt else 'vtt'}\n\n" + "\n\n".join(blocks)


def caption_file(d: Document, n: int, answers: tuple[str, ...]) -> str:
    """Passage ``d`` as a video's captions: lines of at most ``CAPTION_COLUMNS``, ``CUE_LINES``
    to a cue; SRT for even ``n``, WebVTT for odd."""
    lines = textwrap.wrap(d.text, CAPTION_COLUMNS, break_long_words=False, break_on_hyphens=False)
    return _timed(d.title or "", _cued(lines, CUE_LINES, answers), srt=n % 2 == 0)


def meeting_file(d: Document, n: int, answers: tuple[str, ...]) -> str:
    """Passage ``d`` as a meeting's transcript (WebVTT): ``MEETING_WORDS`` words to a cue, each
    cue one line after its speaker's name (the ``n``-th of ``SENDERS``)."""
    speaker = SENDERS[n % len(SENDERS)]
    cues = _cued(d.text.split(), MEETING_WORDS, answers)
    return _timed(d.title or "", [[f"{speaker}: {' '.join(words)}"] for words in cues], srt=False)


def _files(
    item: BenchItem, make: Callable[[Document, int, tuple[str, ...]], str], k: int
) -> list[str]:
    docs = list(item.request.documents)
    groups = [docs[c : c + k] for c in range(0, len(docs), k)]
    return ["\n\n".join(make(d, n, item.answers) for n, d in enumerate(g)) for g in groups]


def subtitles(item: BenchItem, k: int = 4) -> list[str]:
    """The item's passages in their order, ``k`` caption files to a chunk."""
    return _files(item, caption_file, k)


def meetings(item: BenchItem, k: int = 4) -> list[str]:
    """The item's passages in their order, ``k`` meeting transcripts to a chunk."""
    return _files(item, meeting_file, k)
