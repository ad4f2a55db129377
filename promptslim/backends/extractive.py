"""The extractive summariser, the history stage's default: no model. It keeps the most
salient sentences (names, numbers, identifiers, decisions, open questions) under a token cap,
deterministically."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import ConfigError
from ..memo import BoundedCache
from ..text import PATTERNS, may_match, sentence_bounds
from ..tokens import TokenCounter
from ..types import Message
from .summariser_base import Summariser, clip_to_tokens

__all__ = ["ExtractiveSummariser"]


# ---------------------------------------------------------------- extractive

_DECISION_STEMS: tuple[str, ...] = (
    "decid", "agree", "confirm", "approv", "chose", "choose", "will", "won't", "must", "plan",
    "deadline", "due", "budget", "priorit", "prefer", "requir", "need", "settled", "final",
    "remember", "important", "always", "never", "todo", "action",
)  # fmt: skip
_FILLER = re.compile(
    r"^(?:ok(?:ay)?|sure|thanks?(?: you)?|thank you|great|got it|sounds good|hi|hello|yes|no|"
    r"of course|you're welcome|no problem|"
    # Chinese acknowledgements: 好的, 谢谢, 收到, 没问题 ...
    r"好的?|嗯+|哦|行|对|是的|可以|谢谢(?:你|您)?|多谢|感谢|收到|明白了?|知道了|没问题|不客气|你好|您好)"
    r"[\W啊呀吧哈了]*$",
    re.IGNORECASE,
)
# Chinese decision words, matched as substrings (Chinese has no spaces to split words on)
_ZH_DECISIONS = re.compile(
    "决定|同意|确认|批准|选择|选定|定了|敲定|必须|务必|计划|截止|期限|预算|优先|偏好|需要|要求|"
    "最终|记住|重要|总是|永远|不要|待办|行动"
)
_LATIN_NAME = re.compile(r"(?<![A-Za-z])[A-Z][A-Za-z]+")
_CJK_CHAR = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


class ExtractiveSummariser(Summariser):
    """Salient sentences in their original order, under the token cap; no model.

    A sentence scores for what a later turn is likely to need: numbers and amounts, identifiers
    (URLs, ids, dates), names, decision words, and questions (a user's question may still be
    open). Long sentences pay for their length. The best sentences are taken greedily until the
    cap; ties go to the earlier sentence, so the output is deterministic. Sentences of the
    previous summary compete on the same terms, so a rolling summary keeps its best facts.
    """

    name = "extractive"

    def __init__(self, *, max_sentence_tokens: int = 60) -> None:
        if max_sentence_tokens < 1:
            raise ConfigError("must be >= 1", field="max_sentence_tokens")
        self.max_sentence_tokens = max_sentence_tokens

    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        candidates = self._candidates(messages, previous)
        # best first; the sort is stable, so ties keep their order: the earlier line first
        negated = [-score for score, _ in candidates]
        order = sorted(range(len(candidates)), key=negated.__getitem__)
        chosen: list[int] = []
        used = 0
        # a lower bound on a line's tokens, where the counter has one: once the summary is
        # nearly full most lines cannot fit, and this rules them out without encoding them
        # (counting was a third of a cold 200-message request's time)
        min_count = getattr(counter, "min_count", None)
        longest = self.max_sentence_tokens + 1
        for i in order:
            score, line = candidates[i]
            if score <= 0:
                break
            if min_count is not None and min_count(line) + 1 > min(longest, max_tokens - used):
                continue  # cannot fit: the exact count would say so too
            n = counter.count(line) + 1  # +1: the newline joining lines
            if n > longest or used + n > max_tokens:
                continue
            chosen.append(i)
            used += n
            if max_tokens - used < 4:
                break
        lines = [candidates[i][1] for i in sorted(chosen)]
        text = "\n".join(lines)
        # per-line counts can differ from the joined text's count by a token here and there;
        # where the counter knows the joined count from the lines' (counted above), the text
        # need not be encoded again to see that it fits (a sixth of the tokenising a cold
        # request does was this, once per summary step)
        joined_count = getattr(counter, "joined_count", None)
        if joined_count is not None:
            n = joined_count(lines)
            if n is not None and n <= max_tokens:
                return text
        return clip_to_tokens(text, max_tokens, counter)

    def _candidates(
        self, messages: Sequence[Message], previous: str | None
    ) -> list[tuple[float, str]]:
        out: list[tuple[float, str]] = []
        seen: set[str] = set()
        if previous:
            for line in previous.splitlines():
                line = line.strip()
                if line and line not in seen:
                    seen.add(line)
                    # a fact that survived earlier folds keeps a small edge over new chatter
                    out.append((_score(line.partition(": ")[2] or line, "") + 0.5, line))
        for m in messages:
            text = m.text
            if not text:
                continue
            for scored in _message_lines(m.role, text):
                if scored[1] not in seen:
                    seen.add(scored[1])
                    out.append(scored)
        return out


def _message_lines(role: str, text: str) -> tuple[tuple[float, str], ...]:
    """``_MESSAGE_LINES`` by the two strings (see there)."""
    return _MESSAGE_LINES((role, text))


def _lines_of(key: tuple[str, str]) -> tuple[tuple[float, str], ...]:
    """One message's sentences as ``(salience, "role: sentence")``, memoised by content: the
    same turns come back in every request of a conversation (and ``summarize`` re-summarises
    them at every step), so each message is split and scored once."""
    role, text = key
    out = []
    for a, b in sentence_bounds(text):
        words = text[a:b].split()
        sentence = " ".join(words)  # its own normal form: _score would split and join again
        out.append((_salience(sentence, sentence, words, role), f"{role}: {sentence}"))
    return tuple(out)


# each identifier kind runs only when a character it needs is present: the regexes are the
# shared ones from text.py, and most sentences contain none of these characters
_GATED_KINDS: tuple[tuple[str, str], ...] = (
    ("url", "://"), ("email", "@"), ("uuid", "-"), ("time", ":"), ("quoted", '"'), ("quoted", "“"),
)
# kinds whose matches hold no whitespace and need an ASCII digit: they run on the sentence's
# words that are not all letters, not on the whole sentence (see ``_salience``)
_WORD_KINDS = ("code_id", "hex_id")
_DIGIT = re.compile(r"\d")
_ASCII_DIGIT = re.compile("[0-9]")


def _stem_alternation(stems: Sequence[str]) -> str:
    """``stems`` as one alternation grouped by first letter (``a(?:gree|pprov)|c(?:hose)``), so
    the regex engine tries the few stems of one letter at a word, not all of them."""
    by_first: dict[str, list[str]] = {}
    for stem in stems:
        by_first.setdefault(stem[0], []).append(re.escape(stem[1:]))
    return "|".join(f"{re.escape(c)}(?:{'|'.join(rest)})" for c, rest in sorted(by_first.items()))


# in the words re-joined by single spaces after a leading one: a word that starts with a
# decision stem, and an ASCII capitalised word (the literal space lets the regex engine jump).
# A match is a space and a stem, which holds no space, so the count does not depend on which
# stem matches at a word: the grouping changes no count
_DECISION_WORD = re.compile(f" (?:{_stem_alternation(_DECISION_STEMS)})")
# a name or an acronym: a capital, then a lowercase letter (a name) or no lowercase letter to
# the end of the word (an acronym); for ASCII text, what ``w[1:2].islower() or w.isupper()``
# says of a capitalised word, without a Python test per word
_NAME_WORD = re.compile(r" [A-Z](?:[a-z]|[^\sa-z]*(?!\S))")


def _score(sentence: str, role: str) -> float:
    """``_SCORES`` by the two strings (see there)."""
    return _SCORES((sentence, role))


def _score_of(key: tuple[str, str]) -> float:
    return _score_plain(*key)


def _score_plain(sentence: str, role: str) -> float:
    """Salience of one sentence (memoised: a rolling summary re-scores its own lines)."""
    words = sentence.split()
    return _salience(sentence, " ".join(words), words, role)


def _salience(sentence: str, text: str, words: list[str], role: str) -> float:
    """``_score`` of ``sentence``, given its words (``sentence.split()``) and ``text``, those
    words joined by single spaces.

    Every regex scan costs about as much per character as the next (Python's engine), and the
    summariser scores every sentence of a cold conversation, so scans are gated or narrowed:
    each kind runs only when its cheap necessary condition holds, and the number, code and hex
    patterns run on the sentence's words that are not all letters. That changes no count:
    code and hex matches hold no whitespace and need an ASCII digit, so each lies in one such
    word, and the space between words bounds them as whitespace did; a number starts at a digit
    or currency sign, and a unit it takes across a space holds neither, so which words sit
    between two numbers never changes what matches (``test_score_matches_the_plain_formula``).
    """
    ascii_only = sentence.isascii()
    cjk = 0 if ascii_only else len(_CJK_CHAR.findall(sentence))
    # a CJK character carries about a word's worth of meaning: it counts double for length
    if len(sentence) + cjk < 12 or _FILLER.match(sentence):
        return 0.0
    score = 0.0
    identifiers = 0
    # every word that holds a digit (and those with punctuation): a short string to scan
    numeric = " ".join([w for w in words if not w.isalpha()])
    if (_ASCII_DIGIT if ascii_only else _DIGIT).search(numeric):
        score += 2.0 * min(3, len(PATTERNS["number_unit"].findall(numeric)))
        for kind in _WORD_KINDS:
            identifiers += len(PATTERNS[kind].findall(numeric))
        if identifiers < 2 and "-" in sentence:  # every ISO date has one
            identifiers += len(PATTERNS["iso_datetime"].findall(sentence))
        if identifiers < 2 and may_match("date", sentence):
            identifiers += len(PATTERNS["date"].findall(sentence))
    for kind, needs in _GATED_KINDS:
        if identifiers >= 2:  # the score counts two at most
            break
        if needs in sentence:
            identifiers += len(PATTERNS[kind].findall(sentence))
    score += 2.5 * min(2, identifiers)
    # a capitalised word after the first is likely a name; an all-caps word an acronym
    if ascii_only:  # every word but the first, each after a single space
        names = len(_NAME_WORD.findall(text, len(words[0]))) if words else 0
    else:
        names = sum(
            1 for w in words[1:] if w[:1].isupper() and (w[1:2].islower() or w.isupper())
        )
    if cjk:  # no spaces around Latin names in Chinese text: "从MySQL迁移到PostgreSQL"
        names += len(_LATIN_NAME.findall(sentence))
    score += 1.0 * min(3, names)
    # lower() never makes or removes whitespace, so these are the lowered sentence's words
    decisions = len(_DECISION_WORD.findall(" " + text.lower()))
    if cjk:
        decisions += len(_ZH_DECISIONS.findall(sentence))
    score += 1.5 * min(2, decisions)
    if sentence.rstrip().endswith(("?", "？")):
        score += 2.0 if role == "user" else 1.0
    if role == "tool":
        score += 0.5  # tool output is ground truth the assistant may refer back to
    # Chinese words are about two characters long: count them so long sentences still pay
    score -= max(0, len(words) + cjk // 2 - 25) * 0.05
    return score + 0.5  # every real sentence beats nothing


def _key_size(key: tuple[str, str], value: object) -> int:
    return len(key[0]) + len(key[1]) + 1


#: each message's scored lines, by (role, text): a conversation's turns come back with every
#: request. Bounded by entries and by the characters of text held
_MESSAGE_LINES: BoundedCache[tuple[str, str], tuple[tuple[float, str], ...]] = BoundedCache(
    max_entries=4096, max_size=8_000_000, compute=_lines_of, sizeof=_key_size
)
#: sentences' salience, by (sentence, role)
_SCORES: BoundedCache[tuple[str, str], float] = BoundedCache(
    max_entries=65_536, max_size=8_000_000, compute=_score_of, sizeof=_key_size
)
_message_lines.cache_clear = _MESSAGE_LINES.cache_clear  # type: ignore[attr-defined]
_score.cache_info = _SCORES.cache_info  # type: ignore[attr-defined]
_score.__wrapped__ = _score_plain  # type: ignore[attr-defined]  # the unmemoised function
