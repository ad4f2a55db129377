"""What a benchmark's model backend is: ``ModelBackend.measure`` turns the messages that would
be sent (and the gold answers) into a ``Measurement``; and the plain-text view of messages that
small models' chat templates take."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Measurement", "ModelBackend", "first_line", "plain_messages"]


@dataclass(frozen=True)
class Measurement:
    """What one prompt cost and produced. Times in seconds; ``None`` where a backend cannot
    know (a server gives no log-probabilities of a given answer; a local model has no TTFT)."""

    answer: str
    #: prompt tokens in the model's own tokenizer (the server's count for openai)
    prompt_tokens: int | None
    #: hf: median forward-pass time over the prompt
    prefill_s: float | None = None
    #: openai: request sent -> first non-empty content delta, client clock
    ttft_s: float | None = None
    #: time to produce the whole answer
    generate_s: float | None = None
    #: log P(first gold answer | prompt), summed over its tokens
    gold_logprob: float | None = None
    gold_tokens: int | None = None
    #: prompt tokens the server reports as served from its prefix cache
    cached_tokens: int | None = None

    @property
    def first_token_s(self) -> float | None:
        """The comparable start-up time: prefill for hf, TTFT for openai."""
        return self.prefill_s if self.prefill_s is not None else self.ttft_s


class ModelBackend(ABC):
    """One required method, ``measure``. ``messages`` is an OpenAI chat list, as sent.

    Usage::

        backend = load_backend("hf:default", device="cpu")
        m = backend.measure(messages, answers=["Paris"])
        m.prefill_s, m.answer, m.gold_logprob
    """

    name: str

    @abstractmethod
    def measure(
        self, messages: Sequence[dict[str, Any]], *, answers: Sequence[str]
    ) -> Measurement: ...

    def close(self) -> None:
        """Release connections; models stay cached by the loader."""

    def describe(self) -> dict[str, Any]:
        """What ran: for the summary's provenance."""
        return {"backend": self.name}


# ---------------------------------------------------------------- messages as a chat prompt


def plain_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages as ``{"role", "content": str}`` for a chat template: multi-part content joined,
    tool calls written out as text (small models' templates know no tool fields)."""
    out: list[dict[str, str]] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text") or "" for p in content if isinstance(p, dict))
        text = content or ""
        for call in m.get("tool_calls") or ():
            fn = call.get("function", {})
            text += f"\n[tool call {fn.get('name', '')}({fn.get('arguments', '')})]"
        out.append({"role": str(m.get("role", "user")), "content": text.strip()})
    return out


def first_line(text: str) -> str:
    """The first non-empty line: a short answer, as the "Lost in the Middle" scorer takes it."""
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""
