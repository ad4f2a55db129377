"""Which natural language a text is written in, and whether a question and its documents are
written in different ones: where a stage that ranks texts by shared terms, or by a model that
reads one language, has nothing to rank them by.

Languages are told by py3langid (a naive Bayes model over byte n-grams that ships inside the
package: nothing is downloaded), among ``LANGUAGES``: the widely written ones. Told among all
the languages it knows, an English question now and then reads as Nigerian Pidgin or Javanese.
Its probabilities stay low on a few keywords ("python asyncio gather": 0.30), where fastText's
compressed model, faster, told Esperanto at 0.60. A text's script
(``scripts.dominant_script``: CJK, Latin, other) is read first: a question in another script
than its documents differs from them however short it is; within one script, both must be
told with a probability of at least ``MIN_CONFIDENCE``. A short question ("Sinead") is told
with none, and is taken to be in its documents' language.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .memo import BoundedCache
from .scripts import CJK_CHAR_WEIGHT, document_script

__all__ = [
    "LANGUAGES",
    "MIN_CONFIDENCE",
    "LanguagePair",
    "language_of",
    "languages_differ",
    "main_script",
]

#: ISO 639-1 codes of the languages a text is told among
LANGUAGES: tuple[str, ...] = (
    "ar", "bg", "bn", "ca", "cs", "da", "de", "el", "en", "es", "et", "fa", "fi", "fr", "he",
    "hi", "hr", "hu", "id", "it", "ja", "ko", "lt", "lv", "ms", "nl", "no", "pl", "pt", "ro",
    "ru", "sk", "sl", "sr", "sv", "ta", "th", "tr", "uk", "ur", "vi", "zh",
)  # fmt: skip

#: the probability both texts' languages must be told with before they are said to differ
MIN_CONFIDENCE = 0.7
#: characters of the documents read: their language is in their opening lines as much as in all
SAMPLE_CHARS = 400
#: the least of each document read (fewer documents then): a shorter piece tells too little
SHARE_CHARS = 100


@dataclass(frozen=True)
class LanguagePair:
    """A question's language and its documents' (ISO 639 codes; a script's name, ``cjk``,
    ``latin`` or ``other``, where the language was not told)."""

    query: str
    documents: str


@functools.cache
def _identifier() -> Any | None:
    """promptslim's own py3langid identifier, told among ``LANGUAGES`` (None when py3langid is
    not installed), loaded on first use: about half a second, which ``Pipeline.warm_up`` takes
    off the first request. Two threads that both meet it first may both load it, and one of
    the two identical identifiers is kept."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        return None
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


def language_of(text: str) -> tuple[str, float] | None:
    """The language ``text`` is most likely written in and its probability; None when
    py3langid is not installed (``languages_differ`` then compares scripts only)."""
    identifier = _identifier()
    if identifier is None:
        return None
    if not text.isascii():  # a lone surrogate cannot be encoded to the bytes it reads: a "?"
        text = text.encode("utf-8", "replace").decode("utf-8")
    code, probability = identifier.classify(text)
    return str(code), float(probability)


def languages_differ(query: str, documents: Sequence[str]) -> LanguagePair | None:
    """The question's language and the documents' when they differ (by script, or both told
    with ``MIN_CONFIDENCE``); None when they agree or either is not told. The documents are
    read from a sample: the opening ``SAMPLE_CHARS`` of them in turn, in a share of each. The
    sample's language is told only where it can matter: a question in its documents' script
    whose language is not told is taken to be theirs."""
    main, texts = main_script(documents)
    sample = _sample(texts)
    scripts = document_script(query), main
    if "" in scripts:  # no letters: nothing to tell
        return None
    asked = _told(query)
    if scripts[0] == scripts[1] and (asked is None or asked[1] < MIN_CONFIDENCE):
        return None
    given = _told(sample)
    if scripts[0] != scripts[1]:
        return LanguagePair(asked[0] if asked else scripts[0], given[0] if given else scripts[1])
    if given is None or given[1] < MIN_CONFIDENCE or asked is None or given[0] == asked[0]:
        return None
    return LanguagePair(asked[0], given[0])


#: a text's told language, memoised: a request's documents (their sample) and its question
#: recur across requests. Bounded by entries and by the characters of text held
_told: BoundedCache[str, tuple[str, float] | None] = BoundedCache(
    max_entries=4_096, max_size=4_000_000, compute=language_of
)


def main_script(documents: Sequence[str]) -> tuple[str, list[str]]:
    """The script most of the documents' text is in (each document's own, memoised, weighed by
    its length, a CJK character as ``CJK_CHAR_WEIGHT`` letters), and the documents in it: a set
    that mixes languages is read by its main one, so two English passages and a Chinese one
    are English documents."""
    scripts = [(document_script(d), d) for d in documents if d.strip()]
    weight: dict[str, int] = {}
    for script, text in scripts:
        if script:
            weight[script] = weight.get(script, 0) + len(text) * (
                CJK_CHAR_WEIGHT if script == "cjk" else 1
            )
    if not weight:
        return "", []
    main = max(sorted(weight), key=weight.__getitem__)
    return main, [text for script, text in scripts if script == main]


def _sample(documents: Sequence[str]) -> str:
    """Up to ``SAMPLE_CHARS`` of the documents, an equal share from the start of each (one
    long document does not speak for the rest)."""
    texts = [d for d in documents if d.strip()]
    if not texts:
        return ""
    share = max(SHARE_CHARS, SAMPLE_CHARS // len(texts))
    return "\n".join(d[:share] for d in texts)[:SAMPLE_CHARS]
