"""Model-based summarisers: a local Hugging Face causal LM (``lm``) and any OpenAI-compatible
chat-completions endpoint (``openai``). Failures raise ``BackendError``; the history stage then
falls back to ``extractive`` and says so in its report."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from ..errors import BackendError, ConfigError, StageTimeout
from ..tokens import TokenCounter
from ..types import Message
from .summariser_base import (
    INSTRUCTION,
    Summariser,
    _tail_within,
    clip_to_tokens,
    render_transcript,
)

__all__ = ["LMSummariser", "OpenAISummariser"]


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
                chat, add_generation_prompt=True, return_tensors="pt", return_dict=False
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
