"""Scripts beyond Latin and CJK: words that carry combining marks (Devanagari's vowel signs,
Arabic and Hebrew vowel points), scripts written without spaces between words (Thai, whose
sentences end at a space), and sentence enders other than . ! ? (the danda, the Arabic
question mark, the Urdu full stop). Python's ``re`` counts no combining mark as a word
character, so before these fixes "राजधानी" analysed as "र", "जध", "न" and BM25 could not tell
one Hindi name from another made of the same letters."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptslim import Budget, CompressStage, Document, Pipeline, Request, RetrievalStage
from promptslim.bench.datasets import load_dataset
from promptslim.text import _WORD, _unicode_words, analyse, split_sentences


def _sentences(text: str) -> list[str]:
    return [text[s.start : s.end] for s in split_sentences(text)]


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("भारत की राजधानी नई दिल्ली है", ["भारत", "की", "राजधानी", "नई", "दिल्ली", "है"]),
        ("நான் சென்னையில் வசிக்கிறேன்", ["நான்", "சென்னையில்", "வசிக்கிறேன்"]),
        ("আমি বাংলায় গান গাই", ["আমি", "বাংলায়", "গান", "গাই"]),
    ],
)
def test_words_keep_the_vowel_signs_that_make_their_letters(text: str, terms: list[str]) -> None:
    assert analyse(text) == terms


@pytest.mark.parametrize(
    ("marked", "plain"),
    [
        ("كَتَبَ الطالبُ الدرسَ", "كتب الطالب الدرس"),  # Arabic vowel points
        ("شـــكرا", "شكرا"),  # tatweel
        ("שָׁלוֹם עוֹלָם", "שלום עולם"),  # Hebrew points
        ("Со́фия — столи́ца", "София — столица"),  # Russian stress marks
        ("cafe\u0301 de\u0301ja\u0300", "café déjà"),  # decomposed accents
        ("می\u200cخواهم", "میخواهم"),  # a zero-width non-joiner inside a Persian word
    ],
)
def test_optional_marks_do_not_change_a_words_terms(marked: str, plain: str) -> None:
    assert analyse(marked) == analyse(plain)
    assert all(len(t) > 1 for t in analyse(marked))  # no word left in pieces


def test_a_nukta_makes_another_letter_and_stays() -> None:
    assert analyse("ज़मीन") != analyse("जमीन")


def test_thai_runs_become_bigrams_that_a_question_shares_with_its_document() -> None:
    document = set(analyse("ประเทศไทยมีประชากรประมาณ 70 ล้านคน"))
    question = analyse("ประชากรของไทย")
    assert {"ไท", "ทย", "ปร", "ชา"} <= set(question)
    assert len(set(question) & document) >= 5
    assert "70" in document


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_has_the_same_words_either_way(text: str) -> None:
    assert _unicode_words().findall(text) == _WORD.findall(text)


@given(
    st.text(
        alphabet=st.characters(
            whitelist_categories=("Lu", "Ll", "Lo", "Nd", "Po", "Zs"), max_codepoint=0xFFFF
        )
    )
)
def test_text_without_marks_has_the_words_re_finds(text: str) -> None:
    """Only the marks (and joiners) change which words are found: letters, digits,
    punctuation and spaces of any script split as ``re`` splits them."""
    text = unicodedata.normalize("NFC", text)
    if any(unicodedata.category(c).startswith("M") for c in text):
        return  # NFC may leave a mark from a composed character's decomposition
    assert _unicode_words().findall(text) == _WORD.findall(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "भारत की राजधानी नई दिल्ली है। दिल्ली बड़ी है॥ यहाँ स्मारक हैं।",
            ["भारत की राजधानी नई दिल्ली है।", "दिल्ली बड़ी है॥", "यहाँ स्मारक हैं।"],
        ),
        ("هل هذا صحيح؟ نعم، هذا صحيح.", ["هل هذا صحيح؟", "نعم، هذا صحيح."]),
        ("یہ پاکستان ہے۔ لاہور بڑا شہر ہے۔", ["یہ پاکستان ہے۔", "لاہور بڑا شہر ہے۔"]),
        ("ሰላም ነው። እንዴት ነህ?", ["ሰላም ነው።", "እንዴት ነህ?"]),
        ("१।२ है", ["१।२ है"]),  # no whitespace after it: not an end, as with "3.5"
        (  # Thai ends a sentence with a space; a space before a number does not end one
            "ประเทศไทยมีประชากรประมาณ 70 ล้านคน กรุงเทพมหานครเป็นเมืองหลวง",
            ["ประเทศไทยมีประชากรประมาณ 70 ล้านคน", "กรุงเทพมหานครเป็นเมืองหลวง"],
        ),
    ],
)
def test_other_scripts_sentence_enders_end_a_sentence(text: str, expected: list[str]) -> None:
    assert _sentences(text) == expected


def test_hindi_retrieval_keeps_the_document_that_names_the_entity() -> None:
    """``builtin:rag-hi``: eight documents about entities whose names share their letters and
    differ in their vowel signs; the question names one. Cut into pieces at the signs, BM25
    kept the gold document first in 12 of these 20 items."""
    stage = RetrievalStage(scorer="bm25", max_k=1, min_k=1)
    pipeline = Pipeline([stage])
    items = load_dataset("builtin:rag-hi", limit=20).items
    kept = 0
    for item in items:
        result = pipeline.run(item.request)
        gold = item.request.documents[item.metadata["gold_index"]].id
        kept += [d.id for d in result.request.documents] == [gold]
    assert kept == len(items)


def test_hindi_documents_are_cut_at_the_danda_when_compressed() -> None:
    """The extractive compressor keeps whole sentences: with no danda boundary a Hindi
    document was one sentence, kept whole or dropped."""
    facts = [f"तथ्य संख्या {i} यहाँ लिखा है।" for i in range(12)]
    request = Request(
        messages=[{"role": "user", "content": "तथ्य संख्या 7 क्या है?"}],
        documents=[Document(id="d0", text=" ".join(facts))],
    )
    result = Pipeline([CompressStage(compressor="extractive")]).run(request, Budget(documents=60))
    text = result.request.documents[0].text
    assert "तथ्य संख्या 7 यहाँ लिखा है।" in text
    assert len(text) < len(" ".join(facts)) / 2
