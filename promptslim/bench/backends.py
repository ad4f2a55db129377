"""Model backends for the benchmark, behind one interface: given the messages that would be sent
and the gold answers, measure how long the model takes to start answering, what it answers,
and (where the model is local) how likely it finds the gold answer.

    hf:NAME_OR_PATH   a local transformers causal LM (``promptslim.backends.models``); prefill
                      time is one forward pass over the chat-templated prompt, measured
    openai:URL        an OpenAI-compatible server; TTFT is the time to the first non-empty
                      streamed content delta, on the client clock

``hf:default`` (or ``hf:``) is the packaged SmolLM2-135M-Instruct. Backends are looked up in
``MODEL_BACKENDS`` (a ``Registry``).
"""

from __future__ import annotations

from ..errors import ConfigError
from ..registry import Registry
from .backend_base import Measurement, ModelBackend, first_line, plain_messages
from .hf_backend import HFBackend, last_logits_only
from .openai_backend import OpenAIBackend, chat_completions_url

__all__ = [
    "MODEL_BACKENDS",
    "HFBackend",
    "Measurement",
    "ModelBackend",
    "OpenAIBackend",
    "chat_completions_url",
    "first_line",
    "last_logits_only",
    "load_backend",
    "plain_messages",
]


# ---------------------------------------------------------------- lookup

#: backend classes by spec kind
MODEL_BACKENDS: Registry[type] = Registry(
    "model backend",
    {
        "hf": "promptslim.bench.hf_backend:HFBackend",
        "openai": "promptslim.bench.openai_backend:OpenAIBackend",
    },
)


def load_backend(
    spec: str,
    *,
    device: str = "auto",
    repeats: int = 3,
    max_new_tokens: int = 24,
) -> ModelBackend:
    """The backend named by ``KIND:ARG`` (``hf:default``, ``hf:/path/to/model``,
    ``openai:http://127.0.0.1:8000/v1``)."""
    kind, sep, arg = spec.partition(":")
    if not sep:
        raise ConfigError(
            f"expected KIND:ARG (kinds: {', '.join(MODEL_BACKENDS.names())}), got {spec!r}",
            field="model",
        )
    cls = MODEL_BACKENDS.get(kind, field="model")
    if kind == "hf":
        return cls(arg or None, device=device, repeats=repeats, max_new_tokens=max_new_tokens)  # type: ignore[no-any-return]
    if kind == "openai":
        return cls(arg, max_tokens=max_new_tokens)  # type: ignore[no-any-return]
    return cls(arg)  # type: ignore[no-any-return]
