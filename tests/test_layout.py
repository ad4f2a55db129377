"""Line layouts: hard-wrapped prose is read as sentences, not lines; paragraphs are found in
blank-line, one-per-line and wrapped text; code, logs, records and lists are left alone."""

from __future__ import annotations

import json
import re
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.backends.compress.extractive import split_units
from promptslim.layout import line_layout, unwrap
from promptslim.stages.windows import paragraph_heads, split_windows

PARAGRAPHS = [
    (
        "How You Remind Me is a song by the Canadian rock band Nickelback. It was released on "
        "August 21, 2001 as the lead single from their third studio album, Silver Side Up, and it "
        "topped the charts in the United States and in Canada for several weeks that autumn."
    ),
    (
        "The band was formed in Hanna, Alberta, in 1995 by Chad Kroeger, Ryan Peake, Mike Kroeger "
        "and Brandon Kroeger. They recorded their first album in Vancouver with money borrowed "
        "from a relative, and toured small venues in western Canada for the next two years."
    ),
    (
        "Silver Side Up was produced by Rick Parashar and recorded at Green House Studios. The "
        "album was certified six times platinum, and its singles were played on rock and pop "
        "stations alike, which made it the band's first record to sell well outside Canada."
    ),
]


def wrapped(width: int = 72, sep: str = "\n") -> str:
    return sep.join(textwrap.fill(p, width) for p in PARAGRAPHS)


def test_wrapped_prose_is_detected_and_unwrapped_in_place() -> None:
    text = wrapped()
    layout = line_layout(text)
    assert layout.kind == "wrapped"
    flat = unwrap(text, layout)
    assert len(flat) == len(text)
    assert [i for i, (a, b) in enumerate(zip(text, flat)) if a != b] == list(layout.soft)
    assert all(text[i] == "\n" and flat[i] == " " for i in layout.soft)
    # the line breaks that end a paragraph stay
    assert flat.count("\n") == len(PARAGRAPHS) - 1


def test_a_sentence_across_wrapped_lines_is_one_unit() -> None:
    """Whatever the width, each unit of wrapped prose is a whole sentence: the answer (a date
    a line break may split) is never cut in two units."""
    sentences = [s for p in PARAGRAPHS for s in p.replace(". ", ".\n").split("\n")]
    for width in range(20, 120):
        text = wrapped(width)
        assert [" ".join(u.of(text).split()) for u in split_units(text)] == sentences, width
    # the same sentences on one line each split the same way, as before
    assert len(split_units("\n".join(sentences))) == len(sentences)


def test_paragraphs_of_wrapped_text_start_where_the_next_word_would_have_fitted() -> None:
    """A line that ends a sentence ends its paragraph when the next line's first word would
    have fitted on it (the writer broke the line, not the wrapping). A paragraph whose last
    line is full cannot be told from a sentence ending at a wrap: it runs on into the next
    (no false start, whatever the width), and most widths find every paragraph."""
    found_all = 0
    widths = range(40, 100)
    for width in widths:
        text = wrapped(width)
        units = split_units(text)
        heads = paragraph_heads(text, units)
        starts = [units[u].of(text)[:20] for u, h in enumerate(heads) if u == h]
        assert set(starts) <= {p[:20] for p in PARAGRAPHS}, width
        found_all += starts == [p[:20] for p in PARAGRAPHS]
    assert found_all >= 0.75 * len(widths)


def test_a_heading_in_wrapped_text_starts_a_paragraph() -> None:
    """A title on a line of its own starts its passage's paragraph even when the passage
    before was cut off mid-sentence (its last line full, no sentence end)."""
    # no sentence end, and its last line goes on in lower case (a tail that starts with a
    # capital and ends no sentence cannot be told from a heading)
    cut = PARAGRAPHS[1].rsplit(". ", 1)[0] + " in western Canada for the next two"
    text = "\n".join(
        f"{title}\n{textwrap.fill(body, 70)}"
        for title, body in [("Nickelback", PARAGRAPHS[0]), ("Early years", cut),
                            ("Silver Side Up", PARAGRAPHS[2])]
    )  # fmt: skip
    layout = line_layout(text)
    assert layout.kind == "wrapped"
    units = split_units(text)
    heads = paragraph_heads(text, units)
    starts = [units[u].of(text) for u, h in enumerate(heads) if u == h]
    assert starts == ["Nickelback", "Early years", "Silver Side Up"]
    assert "two\nSilver" in text and "two Silver" not in unwrap(text, layout)


def test_blank_lines_mark_paragraphs_also_in_wrapped_text() -> None:
    text = wrapped(sep="\n\n")
    layout = line_layout(text)
    assert layout.kind == "wrapped"
    assert len(layout.breaks) == len(PARAGRAPHS) - 1
    assert all(text[i : i + 2] == "\n\n" for i in layout.breaks)


def test_one_paragraph_a_line_with_titles() -> None:
    """``Title\\nparagraph\\nTitle\\nparagraph``: a paragraph starts after each paragraph line,
    and a title belongs to the paragraph below it."""
    titles = ["How You Remind Me", "Nickelback", "Silver Side Up"]
    text = "\n".join(f"{t}\n{p}" for t, p in zip(titles, PARAGRAPHS))
    layout = line_layout(text)
    assert layout.kind == "lines"
    units = split_units(text)
    heads = paragraph_heads(text, units)
    starts = [units[u].of(text) for u, h in enumerate(heads) if u == h]
    assert starts == titles


def test_blank_line_layout_is_unchanged() -> None:
    text = "Title\nFirst sentence. Second one.\n\nOther title\nThird sentence here."
    layout = line_layout(text)
    assert layout.kind == "blank_lines"
    assert layout.soft == ()
    units = split_units(text)
    heads = paragraph_heads(text, units)
    assert [units[u].of(text) for u, h in enumerate(heads) if u == h] == ["Title", "Other title"]


def test_a_heading_between_blank_lines_belongs_to_the_paragraph_below_it() -> None:
    """Markdown's ``## Title``, blank line, text: the heading starts its section's paragraph;
    a line that ends a sentence, or a paragraph of several lines, is no heading, and a
    heading at the text's end has nothing below it."""
    titles = ["## How You Remind Me", "## Nickelback (band)", "## Silver Side Up"]
    text = "\n\n".join(f"{t}\n\n{p}" for t, p in zip(titles, PARAGRAPHS))
    layout = line_layout(text)
    assert layout.kind == "blank_lines"
    assert [text[b + 2 : b + 4] for b in layout.breaks] == ["##", "##"]
    units = split_units(text)
    heads = paragraph_heads(text, units)
    assert [units[u].of(text) for u, h in enumerate(heads) if u == h] == titles
    for before in ("A line that ends a sentence.", "Two lines\nof a paragraph", "Setup:"):
        assert len(line_layout(f"{before}\n\n{PARAGRAPHS[0]}").breaks) == 1, before
    assert len(line_layout(f"{PARAGRAPHS[0]}\n\n## Notes\n\n").breaks) == 2


def test_a_markdown_section_about_one_window_long_is_one_window() -> None:
    """Each section, heading and paragraph, a little longer than a window, is one window: read
    apart from its paragraph, a heading leaves the paragraph to be cut, and the window over its
    tail ends on the next section's heading, the best match of that section's subject."""
    titles = ["## How You Remind Me", "## Nickelback (band)", "## Silver Side Up"]
    sections = [f"{t}\n\n{p}" for t, p in zip(titles, PARAGRAPHS)]
    size = min(len(s) for s in sections) - 30
    assert all(size < len(s) <= 1.25 * size for s in sections)
    page = "\n\n".join(sections)
    windowed = split_windows([page], [None], window_chars=size, overlap=1, max_windows=64)
    assert [w.text for w in windowed.windows] == sections


def test_no_line_break_no_structure() -> None:
    text = " ".join(PARAGRAPHS)
    assert line_layout(text).kind == "none"
    assert unwrap(text) == text


def test_quoted_text_is_wrapped_prose_behind_its_marks() -> None:
    """An e-mail's quoted text, one or two marks deep: its lines are wrapped prose behind the
    marks, so each sentence is one unit across them."""
    sentences = [s for p in PARAGRAPHS for s in p.replace(". ", ".\n").split("\n")]
    for marks in ("> ", ">> ", "> > ", ">"):
        for width in (50, 60, 72):
            quoted = textwrap.wrap(" ".join(PARAGRAPHS), width - len(marks))
            text = "\n".join(["On Sunday, Ann wrote:", *(marks + line for line in quoted)])
            assert line_layout(text).kind == "wrapped", (marks, width)
            units = [re.sub(r"(?:^|\n)[> ]*", " ", u.of(text)) for u in split_units(text)]
            assert [" ".join(u.split()) for u in units][-len(sentences) + 1 :] == sentences[1:]


NOT_PROSE = {
    "python": "\n".join(
        f"def handler_{i}(request, response):\n    return respond(request, {i})" for i in range(8)
    ),
    "c": "\n".join(f"    total = total + values[{i}] * weights[{i}] + offset;" for i in range(12)),
    "log": "\n".join(
        f"2024-05-0{i % 9 + 1} 12:00:0{i % 10} INFO worker {i} finished the batch "
        "without errors and went back to waiting"
        for i in range(12)
    ),
    "records": "\n".join(
        f'"key-{i:04d}-aaaa-bbbb": "value-{i:04d}-cccc-dddd-eeee-ffff",' for i in range(12)
    ),
    "csv": "\n".join(
        f"{i},alpha beta gamma,{i * 3},delta epsilon zeta eta theta" for i in range(12)
    ),
    "list": "\n".join(
        f"- item {i} is one of the things on the list for this week" for i in range(12)
    ),
    "json": json.dumps(
        {f"field_{i}": f"some value number {i} for the field" for i in range(10)}, indent=2
    ),
    "imports": "\n".join(
        f"from promptslim.{module} import {name}"
        for module, name in [
            ("stages.windows", "paragraph_heads"),
            ("layout", "line_layout"),
            ("backends.compress.extractive", "split_units"),
            ("memo", "BoundedCache"),
            ("tokens", "count_document"),
            ("errors", "ConfigError"),
        ]
    ),
    "table": "\n".join(
        f"Name {i}  Value {i * 3}  Description of the row number {i} in the table"
        for i in range(20)
    ),
    "levels": "\n".join(
        f"{level} worker {i} finished the batch and went back to waiting for the queue"
        for i, level in enumerate(["INFO", "INFO", "WARN", "INFO", "ERROR", "INFO"] * 3)
    ),
    "sentences": "\n".join(
        f"Sentence number {i} says one thing and then it stops here." for i in range(12)
    ),
    # a Python prompt's lines: three marks deep, code, not an e-mail's quoted prose
    "prompt": "\n".join(
        f">>> result_{i} = compute_the_value(first_argument, second_argument, {i})"
        for i in range(12)
    ),
}


def test_code_logs_records_and_lists_keep_their_lines() -> None:
    """Nothing here is wrapped prose: no line break is read as a space, and the lines of
    single sentences or rows are not taken for paragraphs."""
    for name, text in NOT_PROSE.items():
        layout = line_layout(text)
        assert layout.soft == (), name
        assert layout.kind in ("none", "blank_lines"), (name, layout.kind)
        assert unwrap(text) == text, name


LINE = st.text(alphabet=st.sampled_from("abcXY .,;:!?-\"'()1"), max_size=90)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, min_size=1, max_size=12))
def test_layout_offsets_point_at_line_breaks(lines: list[str]) -> None:
    text = "\n".join(lines)
    layout = line_layout(text)
    flat = unwrap(text, layout)
    assert len(flat) == len(text)
    assert all(a == b or (a == "\n" and b == " ") for a, b in zip(text, flat))
    assert all(text[i] == "\n" for i in (*layout.soft, *layout.breaks))
    assert not set(layout.soft) & set(layout.breaks)
    assert list(layout.breaks) == sorted(layout.breaks)
    units = split_units(text)
    assert all(u.of(text).strip() == u.of(text) and u.of(text) for u in units)
    assert len(paragraph_heads(text, units)) == len(units)


def paged(lines_a_page: int = 6, foot: str = "Page {n} of {total}", width: int = 70) -> str:
    """The titled paragraphs wrapped at ``width`` columns, as a PDF's text: pages of
    ``lines_a_page`` lines under a running head and over ``foot`` (``{n}``: the page's
    number), a blank line between pages (pypdf's join)."""
    lines = [
        line
        for title, body in zip(["Nickelback", "Early years", "Silver Side Up"], PARAGRAPHS)
        for line in [title, *textwrap.wrap(body, width)]
    ]
    pages = [lines[at : at + lines_a_page] for at in range(0, len(lines), lines_a_page)]
    return "\n\n".join(
        "\n".join(["FIELD GUIDE", *page, foot.format(n=n, total=len(pages))])
        for n, page in enumerate(pages, 1)
    )


def test_a_sentence_goes_on_past_a_page_s_foot_and_the_next_page_s_head() -> None:
    """In text extracted from a PDF, a sentence cut by a page's foot, the blank line and the
    next page's head is one unit (those lines inside it), and the blank lines between pages
    mark no paragraph: the titles do."""
    text = paged()
    layout = line_layout(text)
    assert layout.kind == "wrapped"
    units = [" ".join(u.of(text).split()) for u in split_units(text)]
    sentences = [s for p in PARAGRAPHS for s in p.replace(". ", ".\n").split("\n")]
    crossing = [s for s in sentences if s not in units]  # the ones a page break falls in
    assert crossing
    for sentence in crossing:
        held = [u for u in units if u.startswith(sentence[:30])]
        assert len(held) == 1 and re.sub(r" Page \d of \d FIELD GUIDE", "", held[0]) == sentence
    heads = paragraph_heads(text, split_units(text))
    starts = [units[u] for u, h in enumerate(heads) if u == h]
    titles = ["Nickelback", "Early years", "Silver Side Up"]
    assert [s for s in starts if s in titles] == titles
    assert all(re.fullmatch(r"FIELD GUIDE|Page \d of \d", s) for s in starts if s not in titles)


def test_a_page_break_after_a_sentence_end_is_no_soft_break() -> None:
    """Where a page ends with its sentence, the foot and the head stay lines of their own."""
    text = paged(lines_a_page=4)
    ended = [at for at in range(len(text)) if text.startswith(".\nPage ", at)]
    assert ended
    soft = set(line_layout(text).soft)
    assert all(at + 1 not in soft for at in ended)


def test_lines_that_recur_as_they_are_make_no_page() -> None:
    """A head and a foot with no page number recur as a title does (two passages of one
    article under it): nothing tells them from one, so no sentence is read past them."""
    numbered = line_layout(paged())
    assert numbered.soft != line_layout(paged(foot="Confidential")).soft
    for text in (paged(foot="Confidential"), paged(foot="FIELD GUIDE")):
        flat = unwrap(text)
        assert flat.count("\n\nFIELD GUIDE\n") == text.count("\n\nFIELD GUIDE\n") == 2


def test_titles_that_differ_by_a_year_make_no_page() -> None:
    """Recurring titles whose number is no page's (``2015 World Series``, ``2005 World
    Series``: not one more from one to the next) make no page gap; a number that goes up by
    one from one to the next does."""
    for foot, pages in (("{n}0 World Series", False), ("{n} World Series", True)):
        text = paged(foot=foot)
        soft = set(line_layout(text).soft)
        # the line break after each foot
        feet = [m.start() for m in re.finditer(r"\n\nFIELD GUIDE\n", text)]
        assert len(feet) >= 2
        assert any(at in soft for at in feet) is pages, foot


def test_a_title_alone_between_two_sentences_starts_a_paragraph() -> None:
    """A numbered title that recurs a number on (``... (season 7)``, ``... (season 8)``) may
    be a page's foot, but where it is the only line between a full line that ends a sentence
    and the next passage, it starts a paragraph as any title does."""
    checked = 0
    for width in range(40, 100):
        first, second = textwrap.wrap(PARAGRAPHS[0], width), textwrap.wrap(PARAGRAPHS[1], width)
        if len(first[-1]) + len(" The") <= width:
            continue  # the next word would have fitted: the paragraph ends anyway
        titles = ["Silver Side Up (season 7)", "Silver Side Up (season 8)", "Early years"]
        lines = [
            titles[0],
            *first,
            titles[1],
            *second,
            titles[2],
            *textwrap.wrap(PARAGRAPHS[2], width),
        ]
        text = "\n".join(lines)
        layout = line_layout(text)
        if layout.kind != "wrapped":
            continue
        assert text.index("\n" + titles[1]) in layout.breaks, width
        checked += 1
    assert checked >= 3


def test_blank_lines_between_paragraphs_still_mark_them_across_pages() -> None:
    """Where the writer marks paragraphs by blank lines, those still start paragraphs; the
    blank line that joins two pages inside a sentence does not."""
    lines = wrapped(sep="\n\n").split("\n")
    cut = max(i for i, line in enumerate(lines) if line and not line.endswith("."))
    text = "\n".join(
        ["FIELD GUIDE", *lines[: cut + 1], "Page 1", "", "FIELD GUIDE", *lines[cut + 1 :], "Page 2"]
    )
    page = text.index("Page 1\n\n") + len("Page 1")
    writers = [at for at in range(len(text)) if text.startswith("\n\n", at) and at != page]
    layout = line_layout(text)
    assert layout.kind == "wrapped" and len(writers) == len(PARAGRAPHS) - 1
    assert list(layout.breaks) == writers
    assert page in layout.soft and page + 1 in layout.soft


def _sentences_and_paragraphs(text: str) -> tuple[list[str], list[str]]:
    """The units of ``text`` and its paragraphs, with the page lines of ``paged`` (and of
    ``- 1 -``) taken out and the white space squeezed."""

    def clean(unit: str) -> str:
        return " ".join(re.sub(r"FIELD GUIDE|Page \d+ of \d+|- \d+ -", " ", unit).split())

    units = split_units(text)
    sentences = [clean(u.of(text)) for u in units]
    paragraphs: dict[int, list[str]] = {}
    for u, head in enumerate(paragraph_heads(text, units)):
        paragraphs.setdefault(head, []).append(sentences[u])
    joined = [" ".join(" ".join(p).split()) for p in paragraphs.values()]
    return [s for s in sentences if s], [p for p in joined if p]


def _without_pages(text: str) -> str:
    text = re.sub(r"\n(Page \d+ of \d+|- \d+ -)\n\nFIELD GUIDE", "", text)
    return re.sub(r"\n(Page \d+ of \d+|- \d+ -)$", "", text).removeprefix("FIELD GUIDE\n")


def test_pages_cut_no_sentence_and_start_no_paragraph() -> None:
    """At any width and page length, wrapped text in pages reads as the same text without
    them: the same sentences (a page's foot and head inside the one a page break cuts) and
    the same paragraphs. A line before a foot is judged by the line after the next head, not
    by the foot's first word; a second half may start with a digit (``in`` / ``1995 by``)."""
    checked = 0
    for width in range(40, 100):
        for lines_a_page in range(6, 12):
            text = paged(lines_a_page, width=width)
            if line_layout(text).kind != "wrapped":
                continue  # a page's lines are a third of these short pages' lines
            read = _sentences_and_paragraphs(text)
            assert read == _sentences_and_paragraphs(_without_pages(text)), (width, lines_a_page)
            checked += 1
    assert checked >= 250


def test_a_page_that_ends_a_sentence_inside_a_paragraph_ends_no_paragraph() -> None:
    """A page ending on a full line that ends a sentence: the paragraph goes on on the next
    page (its first word would not have fitted), though the foot (``- 1 -``) would have."""
    for width in range(40, 100):
        body = textwrap.wrap(PARAGRAPHS[1], width)
        widest = max(len(line) for p in PARAGRAPHS for line in textwrap.wrap(p, width))
        # a line that ends a sentence with room left for the foot's "-" but not the next word
        inner = [
            i
            for i, line in enumerate(body[:-1])
            if line.endswith(".") and len(line) + len(" -") <= widest
        ]
        if inner:
            break
    titles = ["Nickelback", "Early years", "Silver Side Up"]
    first = ["FIELD GUIDE", titles[0], *textwrap.wrap(PARAGRAPHS[0], width), titles[1]]
    last = [titles[2], *textwrap.wrap(PARAGRAPHS[2], width), "- 2 -"]
    cut = inner[0] + 1
    text = "\n".join([*first, *body[:cut], "- 1 -", "", "FIELD GUIDE", *body[cut:], *last])
    assert line_layout(text).kind == "wrapped"
    paragraphs = _sentences_and_paragraphs(text)[1]
    assert paragraphs == _sentences_and_paragraphs(_without_pages(text))[1]
    assert [p.split(" ", 2)[:2] for p in paragraphs] == [
        ["Nickelback", "How"],
        ["Early", "years"],
        ["Silver", "Side"],
    ]
