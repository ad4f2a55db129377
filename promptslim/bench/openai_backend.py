"""``openai:URL``: an OpenAI-compatible server as a benchmark backend; TTFT is the time to the
first non-empty streamed content delta, on the client clock. httpx is the ``bench`` extra's."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ..errors import BackendError, BackendUnavailable, ConfigError
from .backend_base import Measurement, ModelBackend, first_line

__all__ = ["OpenAIBackend", "chat_completions_url"]


def chat_completions_url(url: str) -> str:
    """The chat-completions endpoint for a base URL (``http://h:p``, ``.../v1`` or the full
    endpoint), as OpenAI clients resolve ``base_url``."""
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if not url.split("://", 1)[-1].count("/"):
        url += "/v1"
    return url + "/chat/completions"


class OpenAIBackend(ModelBackend):
    """An OpenAI-compatible server, streaming (httpx, imported on first use).

    TTFT is measured from just before the request is sent to the first chunk whose content
    delta is non-empty, on the client clock; the answer is the whole streamed text (first line
    kept for scoring). ``cached_tokens`` comes from ``usage.prompt_tokens_details`` when the
    server reports it (``stream_options.include_usage`` asks for it).
    """

    def __init__(
        self,
        url: str,
        *,
        model: str = "default",
        max_tokens: int = 24,
        timeout_s: float = 120.0,
        api_key: str | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"expected an http(s) URL, got {url!r}", field="model")
        try:
            import httpx
        except ImportError as exc:
            raise BackendUnavailable("httpx (for the openai backend)", extra="bench") from exc
        self.url = chat_completions_url(url)
        self.name = f"openai:{url}"
        self.model = model
        self.max_tokens = max_tokens
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "clock": "client"}

    def close(self) -> None:
        self._client.close()

    def measure(self, messages: Sequence[dict[str, Any]], *, answers: Sequence[str]) -> Measurement:
        import httpx

        body = {
            "model": self.model,
            "messages": list(messages),
            "stream": True,
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
            "stream_options": {"include_usage": True},
        }
        parts: list[str] = []
        ttft: float | None = None
        usage: dict[str, Any] = {}
        start = time.perf_counter()
        try:
            with self._client.stream("POST", self.url, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise BackendError(
                        f"HTTP {response.status_code}: {response.text[:200]}", backend=self.name
                    )
                for chunk in _sse_events(response.iter_lines()):
                    usage = chunk.get("usage") or usage
                    for choice in chunk.get("choices") or ():
                        piece = (choice.get("delta") or {}).get("content") or ""
                        if piece and ttft is None:
                            ttft = time.perf_counter() - start
                        parts.append(piece)
        except httpx.HTTPError as exc:
            raise BackendError(f"{type(exc).__name__}: {exc}", backend=self.name) from exc
        total = time.perf_counter() - start
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens")
        return Measurement(
            answer=first_line("".join(parts)),
            prompt_tokens=usage.get("prompt_tokens"),
            ttft_s=ttft,
            generate_s=total,
            cached_tokens=int(cached) if isinstance(cached, (int, float)) else None,
        )


def _sse_events(lines: Any) -> Any:
    """JSON objects of a server-sent-events stream (``data: {...}`` lines, until ``[DONE]``)."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            continue  # keep-alive comments and partial junk are not content
        if isinstance(event, dict):
            if "error" in event:
                raise BackendError(str(event["error"])[:200], backend="openai")
            yield event
