"""Summarisers for the history stage, behind one interface, looked up by name in ``SUMMARISERS``.

- ``extractive`` (default): no model. Picks the most salient sentences (names, numbers,
  identifiers, decisions, open questions) under a token cap. Deterministic and fast.
- ``lm``: a local Hugging Face causal LM through ``load_causal_lm`` (default: the packaged
  SmolLM2-135M-Instruct; any local path or GGUF file). Greedy decoding, so deterministic.
- ``openai``: any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp, OpenAI...),
  called with the standard library and a timeout. Failures raise ``BackendError``; the history
  stage then falls back to ``extractive`` and says so in its report.

A summariser turns a span of messages (plus, for a rolling summary, the previous summary's text)
into text of at most ``max_tokens`` tokens in the request's counter::

    text = SUMMARISERS.get("extractive")().summarise(messages, max_tokens=200, counter=counter)

Summaries are cached by the history stage through ``SummaryCache`` (``get``/``set`` of strings
by key): ``LRUSummaryCache`` in memory by default; ``SqliteSummaryCache`` (``summary_store``)
shares one file between the processes of a host; anything with the same two methods (a Redis
client wrapper, say) can be shared further.
"""

from __future__ import annotations

import json
import os
import re
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..errors import BackendError, ConfigError, StageTimeout
from ..registry import Registry
from ..text import PATTERNS, may_match, sentence_bounds, split_sentences
from ..tokens import TokenCounter
from ..types import Message

__all__ = [
    "SUMMARISERS",
    "ExtractiveSummariser",
    "LMSummariser",
    "LRUSummaryCache",
    "OpenAISummariser",
    "Summariser",
    "SummaryCache",
    "clip_to_tokens",
    "render_transcript",
]

#: what the model-based summarisers are asked to do (kept short: small models follow short asks)
INSTRUCTION = (
    "Summarise the conversation below in a few short sentences. Keep every name, number, "
    "identifier, decision and open question. Write only the summary."
)


# ---------------------------------------------------------------- interface


class Summariser(ABC):
    """Turns messages into a summary of at most ``max_tokens`` tokens (in ``counter``).

    ``previous`` is the text of the summary these messages follow (a rolling summary); the
    result must cover both. Implementations are deterministic for the same input and settings,
    raise ``BackendError`` when their backend fails at run time, and keep every setting as an
    explicit keyword argument of ``__init__`` stored under the same name (``cache_id`` reads
    them back, so two differently configured summarisers never share cached summaries).
    """

    name: ClassVar[str]

    @abstractmethod
    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str: ...

    def get_params(self) -> dict[str, Any]:
        return {p: getattr(self, p) for p in _init_params(type(self))}

    def cache_id(self) -> str:
        """Identifies the summariser and the settings that change its output."""
        params = self.get_params()
        values = tuple(params.values())
        types = tuple(map(type, values))
        if _SCALARS.issuperset(types):  # immutable: memoised (it runs on every request)
            return _scalar_cache_id(self.name, tuple(params), values, types)
        return _cache_id(self.name, params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.get_params() == other.get_params()  # type: ignore[attr-defined,unused-ignore]

    __hash__ = None  # type: ignore[assignment]


def _cache_id(name: str, params: dict[str, Any]) -> str:
    return f"{name}:{json.dumps(params, sort_keys=True, default=str)}"


_SCALARS = frozenset({str, int, float, bool, type(None)})


@lru_cache(maxsize=256)
def _scalar_cache_id(
    name: str, keys: tuple[str, ...], values: tuple[Any, ...], types: tuple[type, ...]
) -> str:
    """``_cache_id`` by the settings' names, values and the values' types (``True == 1`` as a
    key, but JSON writes them apart)."""
    return _cache_id(name, dict(zip(keys, values, strict=True)))


@cache
def _init_params(cls: type[Summariser]) -> tuple[str, ...]:
    """The keyword names of ``cls.__init__`` (read once per class: ``cache_id`` runs on every
    request that summarises, and ``inspect.signature`` costs more than the rest of it)."""
    import inspect

    return tuple(p for p in inspect.signature(cls.__init__).parameters if p != "self")


# ---------------------------------------------------------------- cache


@runtime_checkable
class SummaryCache(Protocol):
    """Where summaries are kept, by key. A shared store (Redis...) needs only these two."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


class LRUSummaryCache:
    """A bounded, thread-safe in-memory LRU of summaries (the default cache)."""

    def __init__(self, *, maxsize: int = 4096) -> None:
        if maxsize < 1:
            raise ConfigError("must be >= 1", field="maxsize")
        self.maxsize = maxsize
        self._data: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def set(self, key: str, value: str) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"LRUSummaryCache(maxsize={self.maxsize})"


# ---------------------------------------------------------------- shared helpers


def render_transcript(messages: Sequence[Message]) -> list[str]:
    """One line per message, ``role: text``; tool calls shown by name (their JSON arguments are
    rarely worth summary space)."""
    lines: list[str] = []
    for m in messages:
        text = " ".join(m.text.split())
        if m.tool_calls:
            calls = ", ".join(c.function.name for c in m.tool_calls)
            text = f"{text} [called {calls}]".strip()
        if text:
            lines.append(f"{m.role}: {text}")
    return lines


def clip_to_tokens(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` cut at a sentence boundary so it fits ``max_tokens`` (models may run long)."""
    if counter.count(text) <= max_tokens:
        return text
    kept = ""
    for span in split_sentences(text):
        candidate = text[: span.end]
        if counter.count(candidate) > max_tokens:
            break
        kept = candidate
    return kept.strip()


def _tail_within(lines: Sequence[str], max_tokens: int, counter: TokenCounter) -> list[str]:
    """The newest lines that fit ``max_tokens`` (older context lives in the previous summary)."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        n = counter.count(line) + 1
        if used + n > max_tokens:
            break
        kept.append(line)
        used += n
    return kept[::-1]


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


@lru_cache(maxsize=4096)
def _message_lines(role: str, text: str) -> tuple[tuple[float, str], ...]:
    """One message's sentences as ``(salience, "role: sentence")``, memoised by content: the
    same turns come back in every request of a conversation (and ``summarize`` re-summarises
    them at every step), so each message is split and scored once."""
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


@lru_cache(maxsize=65_536)
def _score(sentence: str, role: str) -> float:
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


# ---------------------------------------------------------------- local LM


class LMSummariser(Summariser):
    """Summarises with a local causal LM (greedy decoding) loaded by ``load_causal_lm``.

    ``model``: None for the packaged SmolLM2-135M-Instruct, else a local HF folder, a cached
    name or a ``.gguf`` file. The transcript is cut to its newest ``max_input_tokens`` (older
    context is carried by ``previous``), so a small model's context is never exceeded.
    """

    name = "lm"

    def __init__(
        self,
        *,
        model: str | None = None,
        device: str | None = None,
        max_input_tokens: int = 1536,
        max_new_tokens: int = 160,
    ) -> None:
        if max_input_tokens < 16:
            raise ConfigError("must be >= 16", field="max_input_tokens")
        if max_new_tokens < 1:
            raise ConfigError("must be >= 1", field="max_new_tokens")
        self.model = model
        self.device = device
        self.max_input_tokens = max_input_tokens
        self.max_new_tokens = max_new_tokens

    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        from .models import load_causal_lm

        lm = load_causal_lm(self.model, device=self.device)
        prompt = _prompt_text(messages, previous, self.max_input_tokens, counter)
        try:
            import torch

            chat = [
                {"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": prompt},
            ]
            ids = lm.tokenizer.apply_chat_template(
                chat, add_generation_prompt=True, return_tensors="pt"
            ).to(lm.device)
            with torch.no_grad():
                out = lm.model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=min(self.max_new_tokens, max(1, max_tokens)),
                    do_sample=False,
                    pad_token_id=lm.tokenizer.pad_token_id,
                )
            text = lm.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
        except (RuntimeError, ValueError) as exc:
            raise BackendError(f"generation failed: {type(exc).__name__}", backend="lm") from exc
        return clip_to_tokens(" ".join(text.split()), max_tokens, counter)


def _prompt_text(
    messages: Sequence[Message], previous: str | None, max_input_tokens: int, counter: TokenCounter
) -> str:
    lines = _tail_within(render_transcript(messages), max_input_tokens, counter)
    head = f"Summary so far:\n{previous}\n\nConversation since then:\n" if previous else ""
    return head + "\n".join(lines)


# ---------------------------------------------------------------- OpenAI-compatible endpoint


class OpenAISummariser(Summariser):
    """Summarises through an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` ends in ``/v1`` (``http://127.0.0.1:8000/v1``). The API key is read from the
    environment variable named by ``api_key_env`` (never stored, so it never shows in a repr or
    a report). ``timeout_s`` bounds connecting and each read. Any failure — refused, timed out,
    an HTTP error, an unreadable body — raises ``BackendError`` (``StageTimeout`` for timeouts),
    which the history stage turns into an extractive fallback.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 10.0,
        max_input_tokens: int = 3000,
        max_new_tokens: int = 200,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError("must start with http:// or https://", field="base_url")
        if timeout_s <= 0:
            raise ConfigError("must be > 0", field="timeout_s")
        if max_input_tokens < 16:
            raise ConfigError("must be >= 16", field="max_input_tokens")
        if max_new_tokens < 1:
            raise ConfigError("must be >= 1", field="max_new_tokens")
        self.base_url = base_url
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_input_tokens = max_input_tokens
        self.max_new_tokens = max_new_tokens

    def cache_id(self) -> str:
        # the timeout does not change the summary, so it must not split the cache
        params = {k: v for k, v in self.get_params().items() if k != "timeout_s"}
        return f"{self.name}:{json.dumps(params, sort_keys=True)}"

    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        import urllib.error
        import urllib.request

        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": INSTRUCTION},
                {
                    "role": "user",
                    "content": _prompt_text(messages, previous, self.max_input_tokens, counter),
                },
            ],
            "max_tokens": min(self.max_new_tokens, max(1, max_tokens)),
            "temperature": 0,
            "stream": False,
        }
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(
            self.base_url.rstrip("/") + "/chat/completions",
            data=json.dumps(body).encode("utf-8"),
            headers=headers,
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                data = json.loads(resp.read().decode("utf-8"))
            text = data["choices"][0]["message"]["content"] or ""
        except TimeoutError as exc:  # socket.timeout is TimeoutError since 3.10
            raise StageTimeout("openai summariser", limit_ms=self.timeout_s * 1e3) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise StageTimeout("openai summariser", limit_ms=self.timeout_s * 1e3) from exc
            raise BackendError(f"request failed: {exc.reason}", backend="openai summariser") from exc
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise BackendError(
                f"bad response: {type(exc).__name__}", backend="openai summariser"
            ) from exc
        return clip_to_tokens(" ".join(str(text).split()), max_tokens, counter)


# ---------------------------------------------------------------- registry

#: Summariser classes by name; ``HistoryStage(summariser="lm")`` looks them up here.
SUMMARISERS: Registry[type[Summariser]] = Registry("summariser")
SUMMARISERS.register("extractive", ExtractiveSummariser)
SUMMARISERS.register("lm", LMSummariser)
SUMMARISERS.register("openai", OpenAISummariser)
