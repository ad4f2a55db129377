"""``builtin:rag-hi``: ``builtin:rag`` in Hindi. One gold document among same-kind distractors
that state the asked attribute with other values; the entities' names are made of Devanagari
syllables with vowel signs, so names differ in their vowel signs as much as in their letters
(a lexical analyser that cuts words at the signs cannot tell them apart). Deterministic for a
given ``random.Random``; no files needed."""

from __future__ import annotations

import random
from collections.abc import Callable

from .dataset_base import BenchItem
from .gen_rag import fact_sentences, one_gold_among, unique_names

__all__ = ["hi_random_name", "rag_hi_item"]

_HI_SYLLABLES = (
    "का", "ली", "रा", "मे", "सु", "नी", "तो", "वि", "धा", "रू", "के", "शी", "पु",
    "गो", "ना", "दे", "भा", "हि", "जो", "मि", "सो", "बे", "ति", "लो", "कृ", "प्र",
)  # fmt: skip
_HI_KINDS = ("नगर", "संग्रहालय", "कंपनी", "वेधशाला", "पुस्तकालय", "संघ")
_HI_INSTRUCTION = (
    "केवल नीचे दिए गए खोज परिणामों के आधार पर प्रश्न का उत्तर दें (कुछ परिणाम प्रश्न से असंबंधित हो सकते हैं)।"
)
_HI_COLOURS = ("लाल", "नीले", "हरे", "पीले", "बैंगनी", "नारंगी", "भूरे", "सुनहरे", "गुलाबी", "आसमानी")
#: attribute -> (fact sentence, question, value generator); {n} is the name
_HI_ATTRIBUTES: dict[str, tuple[str, str, Callable[[random.Random], str]]] = {
    "founded": (
        "{n} की स्थापना {v} में हुई थी।",
        "{n} की स्थापना किस वर्ष हुई थी?",
        lambda r: str(r.randint(1620, 1990)),
    ),
    "founder": (
        "{n} की स्थापना {v} ने की थी।",
        "{n} की स्थापना किसने की थी?",
        lambda r: f"{hi_random_name(r, 2)} {hi_random_name(r, 3)}",
    ),
    "colour": (
        "{n} का प्रतीक चिह्न {v} रंग का है।",
        "{n} का प्रतीक चिह्न किस रंग का है?",
        lambda r: r.choice(_HI_COLOURS),
    ),
    "count": (
        "{n} के {v} पंजीकृत सदस्य हैं।",
        "{n} के कितने पंजीकृत सदस्य हैं?",
        lambda r: str(r.randint(120, 9800)),
    ),
    "region": (
        "{n} {v} प्रांत में स्थित है।",
        "{n} किस प्रांत में स्थित है?",
        lambda r: hi_random_name(r, 2),
    ),
}
_HI_FILLER = (
    "कई क्षेत्रीय यात्रा पुस्तिकाओं में इसका उल्लेख मिलता है।",
    "हर वसंत में बहुत से पर्यटक इसे देखने आते हैं।",
    "स्थानीय अभिलेखों में इसका विस्तृत वर्णन है।",
    "कुछ विद्वानों ने इसके इतिहास का विशेष अध्ययन किया है।",
    "बाद के कई ग्रंथों में यही विवरण दोहराया गया है।",
)


def hi_random_name(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_HI_SYLLABLES) for _ in range(n))


def rag_hi_item(rng: random.Random, index: int, *, n_documents: int) -> BenchItem:
    """``builtin:rag-hi``: as ``rag_item``, in Hindi. Deterministic."""
    kind = rng.choice(_HI_KINDS)
    attr = rng.choice(sorted(_HI_ATTRIBUTES))
    names = unique_names(rng, n_documents, lambda: hi_random_name(rng, rng.randint(2, 3)))

    def write(name: str, facts: dict[str, str]) -> str:
        first = f"{name} एक {kind} है।"
        return " ".join([first, *fact_sentences(rng, name, facts, _HI_ATTRIBUTES, _HI_FILLER)])

    return one_gold_among(
        rng,
        f"rag-hi-{index}",
        _HI_ATTRIBUTES,
        attr,
        names,
        write=write,
        title=lambda name: name,
        question=lambda name: _HI_ATTRIBUTES[attr][1].format(n=name),
        instruction=_HI_INSTRUCTION,
    )
