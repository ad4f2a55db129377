"""Subtitles and timed transcripts (SRT, WebVTT, Whisper's segments): a sentence goes on from
one cue's text to the next cue's, past the cue's id and its timing line; a file's name or title
heads the cues below it; a page that only shows a cue or two keeps its own layout."""

from __future__ import annotations

import re
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.backends.compress.extractive import split_units
from promptslim.layout import cue_free, line_layout, unwrap
from promptslim.stages.windows import paragraph_heads, split_windows

from .test_layout import LINE, PARAGRAPHS

#: every sentence of ``PARAGRAPHS``, in order
SENTENCES = [s for p in PARAGRAPHS for s in p.replace(". ", ".\n").split("\n")]
#: a cue's id and timing line, or Whisper's timing before a segment's text
CUE_LINES = re.compile(r"(?m)^(?:\d+\n)?(?:\d\d:)?\d\d:\d\d[.,]\d{3} --> .*\n|^\[[^\]]*\] *")


def clock(seconds: float, mark: str = ".") -> str:
    return (
        f"00:{int(seconds) // 60:02d}:{int(seconds) % 60:02d}{mark}{round(seconds % 1 * 1000):03d}"
    )


def captions(fmt: str, width: int = 42, lines_a_cue: int = 2, text: str = "") -> str:
    """``text`` (default: ``PARAGRAPHS`` run on) as a caption file of ``fmt``: ``srt``,
    ``vtt`` (a header, cues without ids, settings after the timing), ``vtt-ids`` or ``whisper``
    (one line a segment, its timing in brackets before it)."""
    lines = textwrap.wrap(text or " ".join(PARAGRAPHS), width)
    cues = [lines[i : i + lines_a_cue] for i in range(0, len(lines), lines_a_cue)]
    if fmt == "whisper":
        return "\n".join(
            f"[{clock(4 * n)[3:]} --> {clock(4 * n + 4)[3:]}]  {' '.join(cue)}"
            for n, cue in enumerate(cues)
        )
    mark, blocks = ("," if fmt == "srt" else "."), ([] if fmt == "srt" else ["WEBVTT"])
    for n, cue in enumerate(cues):
        timing = f"{clock(3.5 * n, mark)} --> {clock(3.5 * n + 3.2, mark)}"
        timing += " align:start position:10%" if fmt == "vtt" else ""
        ids = [] if fmt == "vtt" else [str(n + 1)]
        blocks.append("\n".join([*ids, timing, *cue]))
    return "\n\n".join(blocks)


def sentences_of(text: str) -> list[str]:
    """The units of ``text`` with their cue lines taken out and their spaces squeezed, but the
    units that are only a cue's lines (its id, its timing, a file's header)."""
    units = (" ".join(CUE_LINES.sub(" ", u.of(text) + "\n").split()) for u in split_units(text))
    return [u for u in units if u and not u.isdigit() and u != "WEBVTT"]


def test_a_sentence_goes_on_across_cues() -> None:
    """In SRT, WebVTT and Whisper's segments, each sentence is one unit across the cues it runs
    over, at several widths and cue sizes; a colon at a line's end ends none."""
    for fmt in ("srt", "vtt", "vtt-ids", "whisper"):
        for width, lines_a_cue in ((32, 1), (42, 2), (37, 3)):
            text = captions(fmt, width, lines_a_cue)
            assert line_layout(text).kind == "cues", (fmt, width)
            assert sentences_of(text) == SENTENCES, (fmt, width, lines_a_cue)
    text = captions("srt", 34, 1, "The label on the bridge said this: it opened in May.")
    colon = text.index("this:") + len("this:")
    assert colon in line_layout(text).soft
    assert sentences_of(text) == ["The label on the bridge said this: it opened in May."]


def test_a_cue_that_ends_a_sentence_ends_its_unit() -> None:
    """Where a cue's text ends a sentence, the next cue's text starts a new unit: no break
    after a sentence's end is read as a space."""
    text = "\n\n".join(
        f"{n + 1}\n{clock(3 * n, ',')} --> {clock(3 * n + 2, ',')}\n{s}"
        for n, s in enumerate(SENTENCES)
    )
    layout = line_layout(text)
    assert layout.kind == "cues" and layout.soft == ()
    assert sentences_of(text) == SENTENCES
    # Whisper's segments, two a sentence, a silent one (its timing alone) after each sentence
    halves = [
        (" ".join(w[: len(w) // 2]), " ".join(w[len(w) // 2 :])) for w in map(str.split, SENTENCES)
    ]
    text = "\n".join(
        f"[00:01.000 --> 00:02.000]  {a}\n[00:02.000 --> 00:03.000]  {b}\n[00:03.000 --> 00:04.000]"
        for a, b in halves
    )
    assert sentences_of(text) == SENTENCES


def test_a_file_s_name_heads_its_cues() -> None:
    """Caption files one after another, each under its name: a paragraph starts at each name,
    and runs over the file's cues; the name is a unit of its own (Whisper's segments follow it
    on the next line)."""
    for fmt, gap in (("srt", "\n\n"), ("whisper", "\n")):
        files = [f"Clip {n}.{fmt}{gap}{captions(fmt, text=p)}" for n, p in enumerate(PARAGRAPHS)]
        text = "\n\n".join(files)
        units = split_units(text)
        heads = paragraph_heads(text, units)
        starts = [units[u].of(text) for u in sorted(set(heads))]
        assert starts == [f"Clip {n}.{fmt}" for n in range(len(PARAGRAPHS))], fmt


def test_a_page_that_shows_a_cue_keeps_its_layout() -> None:
    """A page about the format, two cues in its example among wrapped prose, is wrapped prose;
    a log whose arrows join no times is not read as cues."""
    example = captions("srt", text=PARAGRAPHS[0]).split("\n\n")[:2]
    page = "\n\n".join(
        [textwrap.fill(PARAGRAPHS[1], 70), *example, textwrap.fill(PARAGRAPHS[2], 70)]
    )
    assert line_layout(page).kind == "wrapped"
    log = "\n".join(f"job {i}: queued --> running --> done in {i} s" for i in range(12))
    assert line_layout(log).kind != "cues" and unwrap(log) == log
    # a schedule whose times run to words on the same line: no cue (its words are read)
    talks = ["Keynote", "Storage at scale", "Lunch", "Caching prefixes", "Closing remarks"]
    schedule = "\n".join(f"{9 + i}:00 --> {9 + i}:45 {t}" for i, t in enumerate(talks))
    assert line_layout(schedule).kind != "cues" and cue_free(schedule) == schedule


def test_windows_of_subtitles_are_scored_on_their_words() -> None:
    """The scorers read a caption file's words, not its cues' ids and timing lines; the
    windows still span the file's units, byte for byte."""
    for fmt in ("srt", "vtt", "vtt-ids", "whisper"):
        text = f"Clip.{fmt}\n\n" + captions(fmt)
        assert cue_free(text).split() == [
            f"Clip.{fmt}",
            *(["WEBVTT"] if "vtt" in fmt else []),
            *" ".join(PARAGRAPHS).split(),
        ]
        windowed = split_windows([text], [None], window_chars=300, overlap=1, max_windows=64)
        assert len(windowed.windows) > 3
        assert all("-->" not in w.text and w.text.strip() for w in windowed.windows), fmt
        units = windowed.units[0]
        assert units[0].start == 0 and units[-1].end == len(text)
    prose = textwrap.fill(" ".join(PARAGRAPHS), 70) + "\n\n00:00:01.000 --> 00:00:02.000"
    windowed = split_windows([prose], [None], window_chars=300, overlap=1, max_windows=64)
    assert "-->" in windowed.windows[-1].text  # not subtitles: read as written


def test_a_window_of_subtitles_holds_a_prose_window_s_words() -> None:
    """A caption file is cut into the windows its words would be as prose: its cues' ids and
    timing lines, which the scorer does not read, do not count toward a window's size (they
    would halve its words, and part the sentence after the one naming a subject from it)."""
    prose = textwrap.fill(" ".join(PARAGRAPHS), 70)
    as_prose = split_windows([prose], [None], window_chars=300, overlap=1, max_windows=64)
    words = [w.text.split() for w in as_prose.windows]
    assert len(words) > 3
    for fmt in ("srt", "vtt", "vtt-ids", "whisper"):
        windowed = split_windows(
            [captions(fmt)], [None], window_chars=300, overlap=1, max_windows=64
        )
        read = [[t for t in w.text.split() if t != "WEBVTT"] for w in windowed.windows]
        assert read == words, fmt


CUE_TEXT = st.lists(LINE.filter(str.strip), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.lists(CUE_TEXT, min_size=2, max_size=10), st.sampled_from(["srt", "vtt", "whisper"]))
def test_cue_layout_offsets_point_at_line_breaks(cues: list[list[str]], fmt: str) -> None:
    """Whatever the cues' text, the layout's breaks are line breaks, soft and paragraph ones
    apart, and every unit is non-blank text."""
    if fmt == "whisper":
        text = "\n".join(
            f"[00:0{n % 10}.000 --> 00:0{n % 10}.500] {' '.join(c)}" for n, c in enumerate(cues)
        )
    else:
        text = "\n\n".join(
            "\n".join([str(n + 1), f"{clock(n)} --> {clock(n + 0.5)}", *c])
            for n, c in enumerate(cues)
        )
    layout = line_layout(text)
    assert layout.kind == "cues"
    assert len(unwrap(text, layout)) == len(text)
    assert all(text[i] == "\n" for i in (*layout.soft, *layout.breaks))
    assert not set(layout.soft) & set(layout.breaks)
    assert list(layout.soft) == sorted(set(layout.soft))
    units = split_units(text)
    assert all(u.of(text).strip() == u.of(text) and u.of(text) for u in units)
