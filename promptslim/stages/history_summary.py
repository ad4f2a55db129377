"""The history stage's rolling summary: one cached summariser call per new fold step.

Step ``j`` summarises chunk ``j`` together with the summary of the steps before it; each step
is cached under its chunk key (``history_keys``), so a fold costs one summariser call and the
rest are cache lookups. A configured summariser that is missing, fails or runs over its time
limit is replaced by the extractive one for that request (uncached, so the configured one is
tried again next time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..backends.shared_stats import note_computed
from ..backends.summarisers import SUMMARISERS, Summariser, SummaryCache, clip_to_tokens
from ..counters import TokenCounter
from ..counting import count_message
from ..errors import ConfigError
from ..messages import Message
from .base import StageLog, run_with_fallback
from .history_keys import _CHUNK_KEYS, _head_digest

__all__ = ["SUMMARY_HEADER", "RollingSummary", "build_summariser"]

SUMMARY_HEADER = "Summary of the earlier conversation:"


@dataclass(frozen=True)
class RollingSummary:
    """What a history stage summarises with: its summariser, the extractive fallback, the
    summary cache, and how a failing summariser is handled."""

    summariser: Summariser
    fallback: Summariser
    cache: SummaryCache
    role: str
    strict: bool
    time_limit_ms: float | None

    def message(
        self,
        messages: Sequence[Message],
        spans: list[list[int]],
        body_cap: int,
        reserve: int,
        counter: TokenCounter,
        log: StageLog,
    ) -> Message | None:
        """The summary message of ``spans`` (message indices per step), within ``reserve``
        tokens all told, or None when there is nothing to say."""
        head = f"{self.summariser.cache_id()}|{counter.name}|{body_cap}"
        keys = _CHUNK_KEYS.chain(messages, spans, _head_digest(head))
        text = self._text(messages, spans, keys, body_cap, counter, log)
        if not text:
            return None
        summary = Message(role=self.role, content=f"{SUMMARY_HEADER}\n{text}")  # type: ignore[arg-type]
        over = count_message(summary, counter) - reserve
        if over > 0:  # a BPE merge across lines can add a token or two; never go over budget
            text = clip_to_tokens(text, max(0, body_cap - over - 2), counter)
            if not text:
                return None
            summary = Message(role=self.role, content=f"{SUMMARY_HEADER}\n{text}")  # type: ignore[arg-type]
        return summary

    def _text(
        self,
        messages: Sequence[Message],
        spans: list[list[int]],
        keys: list[str],
        body_cap: int,
        counter: TokenCounter,
        log: StageLog,
    ) -> str | None:
        # the newest cached step, then roll forward from it
        text: str | None = None
        done = 0
        for j in range(len(keys) - 1, -1, -1):
            text = self.cache.get(keys[j])
            if text is not None:
                done = j + 1
                break
        log.details["summary_cached"] = done == len(keys)
        fell_back = False
        for j in range(done, len(keys)):
            chunk = [messages[i] for i in spans[j]]
            text, fell_back = self._step(chunk, text or None, body_cap, counter, log, fell_back)
            note_computed("summary", keys[j])  # work a shared cache could have saved
            if not fell_back:
                self.cache.set(keys[j], text)
        return text

    def _step(
        self,
        chunk: list[Message],
        previous: str | None,
        body_cap: int,
        counter: TokenCounter,
        log: StageLog,
        fell_back: bool,
    ) -> tuple[str, bool]:
        """One step's summary, and whether the fallback made it (or an earlier step's did)."""
        used_fallback = [fell_back]

        def primary() -> str:
            return self.summariser.summarise(
                chunk, max_tokens=body_cap, counter=counter, previous=previous
            )

        def fallback() -> str:
            used_fallback[0] = True
            return self.fallback.summarise(
                chunk, max_tokens=body_cap, counter=counter, previous=previous
            )

        if fell_back:
            return fallback(), True
        if self.summariser.name == self.fallback.name:
            return primary(), False
        text = run_with_fallback(
            primary,
            fallback,
            backend=f"{self.summariser.name} summariser",
            fallback_name="extractive",
            extra="lm",
            log=log,
            strict=self.strict,
            time_limit_ms=self.time_limit_ms,
        )
        if used_fallback[0]:
            log.details["summary_fallback"] = log.details["fallback"]["error"]
        return text, used_fallback[0]


def build_summariser(name: str | Summariser, options: dict[str, Any] | None) -> Summariser:
    """A summariser by its name in ``SUMMARISERS`` built with ``options``, or the one given."""
    if isinstance(name, Summariser):
        if options:
            raise ConfigError("only for a summariser given by name", field="summariser_options")
        return name
    if not isinstance(name, str):
        raise ConfigError("must be a summariser name or a Summariser", field="summariser")
    if options is not None and not isinstance(options, dict):
        raise ConfigError("must be a dict", field="summariser_options")
    cls = SUMMARISERS.get(name, field="summariser")  # UnknownName lists the known ones
    try:
        return cls(**(options or {}))
    except ConfigError as exc:
        raise ConfigError(
            exc.reason, field="summariser_options" + (f".{exc.field}" if exc.field else "")
        ) from exc
    except TypeError as exc:
        raise ConfigError(str(exc), field="summariser_options") from exc
