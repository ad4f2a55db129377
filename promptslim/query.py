"""What a request asks: the text its documents are scored against, and the other ways the
conversation may be asking it.

When the caller gives ``Request.query``, that is the question, taken as given. Otherwise the
question is somewhere in the messages, and the last user message alone is often not it:

- **a template around the question** ("Using only the documents provided, answer concisely and
  cite the ids... Question: ..."): a sentence embedder that reads a text's first 64 word pieces
  reads the instructions and never the question;
- **a follow-up that names nothing** ("Can you check again?", "and when was he born?"): the
  topic is in an earlier user turn.

So :func:`ask_of` gives two things. ``text`` is what a lexical scorer reads: the last user
message, after the earlier user turns it may refer to. A word that no document holds adds
nothing to BM25, so an old question on another topic costs nothing. ``views`` are the other
ways the question may be put: each sentence of a multi-sentence last message, the earlier
turns alone. A dense scorer compares each with the documents and trusts most the one the
documents answer best (:func:`promptslim.backends.scorer_base.view_weights`). The documents
were retrieved for what the user means now, so they say which view that is.

Bounded by construction: at most :data:`EARLIER_TURNS` earlier turns, each read as its first
and last :data:`VIEW_CHARS` / 2 characters when longer, the first and last sentences of a long
message (:data:`HEAD_SENTENCES`, :data:`TAIL_SENTENCES`), each view cut to :data:`VIEW_CHARS`
characters. Pure Python: no model runs here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .request import Request
from .text import sentence_bounds

__all__ = ["EARLIER_TURNS", "HEAD_SENTENCES", "TAIL_SENTENCES", "VIEW_CHARS", "Ask", "ask_of"]

#: earlier user turns a follow-up may refer to (the most recent ones)
EARLIER_TURNS = 2
#: sentences of a long last message taken as views: a question comes first or last, around
#: instructions or a pasted text
HEAD_SENTENCES = 1
TAIL_SENTENCES = 3
#: characters of each view: an embedder reads a few dozen word pieces of it anyway
VIEW_CHARS = 1_000


@dataclass(frozen=True)
class Ask:
    """``text``: what documents are scored against (a lexical scorer reads it all); ``views``:
    other ways the conversation may be asking it (empty: ``text`` is the only one)."""

    text: str
    views: tuple[str, ...] = ()


def ask_of(request: Request) -> Ask:
    """The request's ask: ``Request.query`` as given, or one derived from its user turns."""
    if request.query is not None:
        return Ask(request.query)
    users = [m.text for m in request.messages if m.role == "user"]
    if not users:
        return Ask("")
    last = users[-1]
    earlier = [_clip(t) for t in users[-1 - EARLIER_TURNS : -1] if t.strip()]
    text = "\n".join([*earlier, last]) if earlier else last
    views: list[str] = []
    sentences = _sentences(last)
    if len(sentences) > 1:
        views += [last, *sentences]
    elif earlier:
        views.append(last)
    views += reversed(earlier)  # the most recent first
    unique = [v for v in dict.fromkeys(v[:VIEW_CHARS] for v in views) if v.strip()]
    return Ask(text, tuple(v for v in unique if v != text[:VIEW_CHARS]))


def _clip(turn: str) -> str:
    """An earlier turn as the ask reads it: its head and tail when it is long (a pasted text
    with the question before or after it), so that BM25's work stays bounded."""
    if len(turn) <= VIEW_CHARS:
        return turn
    half = VIEW_CHARS // 2
    return f"{turn[:half]}\n{turn[-half:]}"


def _sentences(text: str) -> list[str]:
    """The first and last sentences of ``text`` with a word in them (all when few)."""
    spans = [(a, b) for a, b in sentence_bounds(text) if any(c.isalnum() for c in text[a:b])]
    if len(spans) > HEAD_SENTENCES + TAIL_SENTENCES:
        spans = spans[:HEAD_SENTENCES] + spans[-TAIL_SENTENCES:]
    return [text[a:b] for a, b in spans]
