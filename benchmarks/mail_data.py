"""``mail4``'s chunks: the NQ passages as e-mail threads, each passage a message's quoted text.

Mail clients quote the message a reply answers behind ``> `` marks, wrapped, under the
reply's headers and its own few lines: what a support desk's or a mailing list's archive
holds, and what a RAG system over it sends.
"""

from __future__ import annotations

import textwrap

from promptslim.bench.datasets import BenchItem
from promptslim.types import Document

__all__ = ["QUOTE_COLUMNS", "REPLIES", "SENDERS", "threads"]

#: who writes the messages (each quotes the next one's), and what each says above the text it
#: quotes
SENDERS = ("Dana Whitfield", "Marco Ruiz", "Priya Natarajan", "Tom Becker")
REPLIES = (
    "Thanks, that helps.",
    "See below, I pasted the relevant part.",
    "Forwarding this for the record.",
    "Is this the one you meant?",
)
#: the columns mail clients wrap quoted text at, its quote marks included
QUOTE_COLUMNS = 72


def message(d: Document, n: int) -> str:
    """The ``n``-th e-mail of a thread: headers, a line of reply, and passage ``d`` quoted as
    mail clients quote it (wrapped, each line behind ``> ``), its title the subject."""
    name = SENDERS[n % len(SENDERS)]
    quoted = textwrap.wrap(
        d.text, QUOTE_COLUMNS - 2, break_long_words=False, break_on_hyphens=False
    )
    return "\n".join(
        [
            f"From: {name} <{name.split()[0].lower()}@example.com>",
            f"Date: Mon, {3 + n} Jun 2024 10:{10 + n}:00 +0000",
            f"Subject: Re: {d.title}",
            "",
            REPLIES[n % len(REPLIES)],
            "",
            f"On Sun, {2 + n} Jun 2024, {SENDERS[(n + 1) % len(SENDERS)]} wrote:",
            *(f"> {line}" for line in quoted),
        ]
    )


def threads(item: BenchItem, k: int = 4) -> list[str]:
    """The item's passages in their order, ``k`` to a thread."""
    docs = list(item.request.documents)
    groups = [docs[c : c + k] for c in range(0, len(docs), k)]
    return ["\n\n".join(message(d, n) for n, d in enumerate(group)) for group in groups]
