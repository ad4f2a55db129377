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

import json
import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BackendError, BackendUnavailable, ConfigError
from ..registry import Registry

__all__ = [
    "MODEL_BACKENDS",
    "HFBackend",
    "Measurement",
    "ModelBackend",
    "OpenAIBackend",
    "load_backend",
]


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
    def measure(self, messages: Sequence[dict[str, Any]], *, answers: Sequence[str]) -> Measurement: ...

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


def last_logits_only(model: Any) -> dict[str, int]:
    """The forward keyword that makes a causal LM compute logits for the last position only.

    A serving engine's prefill projects only the last hidden state onto the vocabulary (that
    is all the first generated token needs); projecting all of them adds ~20 % to SmolLM2's
    prefill FLOPs (49k-word vocabulary, 576-wide model) and would overstate what a shorter
    prompt saves. The keyword was renamed across transformers releases, and ``forward`` takes
    ``**kwargs``, so an unknown spelling would be silently ignored: check the signature.
    """
    import inspect

    params = inspect.signature(type(model).forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


def first_line(text: str) -> str:
    """The first non-empty line: a short answer, as the "Lost in the Middle" scorer takes it."""
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


# ---------------------------------------------------------------- hf


class HFBackend(ModelBackend):
    """A local causal LM through ``promptslim.backends.models.load_causal_lm``.

    Prefill: one forward pass over the chat-templated prompt under ``torch.inference_mode``,
    with logits for the last position only (as a serving engine's prefill), ``repeats`` times
    after one warm-up per backend, CUDA-synchronised on a GPU; the median.
    Answer: greedy decoding of at most ``max_new_tokens``, first line kept. Gold log-prob: one
    forward pass over prompt + answer tokens.
    """

    def __init__(
        self,
        name_or_path: str | None = None,
        *,
        device: str = "auto",
        repeats: int = 3,
        max_new_tokens: int = 24,
        logprob: bool = True,
    ) -> None:
        if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
            raise ConfigError(f"expected auto, cpu or cuda, got {device!r}", field="device")
        if repeats < 1:
            raise ConfigError("must be at least 1", field="repeats")
        from ..backends.models import load_causal_lm

        self.lm = load_causal_lm(
            None if name_or_path in (None, "", "default") else name_or_path,
            device=None if device == "auto" else device,
        )
        self.name = f"hf:{self.lm.name}"
        self.repeats = repeats
        self.max_new_tokens = max_new_tokens
        self.logprob = logprob
        self._warm = False
        self._last_logits = last_logits_only(self.lm.model)

    def describe(self) -> dict[str, Any]:
        import torch

        info: dict[str, Any] = {
            "backend": self.name,
            "device": self.lm.device,
            "dtype": str(next(self.lm.model.parameters()).dtype),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "repeats": self.repeats,
        }
        if self.lm.device.startswith("cuda"):
            info["gpu"] = torch.cuda.get_device_name(self.lm.device)
        return info

    # ---- pieces

    def prompt_ids(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        tok = self.lm.tokenizer
        chat = plain_messages(messages)
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
            return list(ids)
        # no template: a plain transcript ending where the answer starts
        text = "".join(f"{m['role']}: {m['content']}\n" for m in chat) + "assistant:"
        return list(tok.encode(text))

    def _sync(self) -> None:
        if self.lm.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(self.lm.device)

    def prefill_seconds(self, ids: Sequence[int]) -> float:
        import torch

        x = torch.tensor([list(ids)], device=self.lm.device)
        with torch.inference_mode():
            if not self._warm:
                # first call pays kernel selection and allocator growth: not prefill work
                self.lm.model(x[:, : min(len(ids), 64)])
                self._sync()
                self._warm = True
            times = []
            for _ in range(self.repeats):
                self._sync()
                start = time.perf_counter()
                self.lm.model(x, use_cache=True, **self._last_logits)
                self._sync()
                times.append(time.perf_counter() - start)
        return statistics.median(times)

    def generate(self, ids: Sequence[int]) -> tuple[str, float]:
        import torch

        tok = self.lm.tokenizer
        x = torch.tensor([list(ids)], device=self.lm.device)
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.lm.model.generate(
                x,
                attention_mask=torch.ones_like(x),
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
            )
        self._sync()
        elapsed = time.perf_counter() - start
        text = tok.decode(out[0, len(ids) :], skip_special_tokens=True)
        return first_line(text), elapsed

    def answer_logprob(self, ids: Sequence[int], answer: str) -> tuple[float, int]:
        """Sum of log P(answer token | prompt, earlier answer tokens), and the token count."""
        import torch

        answer_ids = list(self.lm.tokenizer.encode(answer, add_special_tokens=False))
        if not answer_ids:
            return 0.0, 0
        x = torch.tensor([list(ids) + answer_ids], device=self.lm.device)
        with torch.inference_mode():
            logits = self.lm.model(x).logits[0, len(ids) - 1 : -1].float()
            logp = torch.log_softmax(logits, dim=-1)
            target = torch.tensor(answer_ids, device=logp.device)
            total = logp.gather(1, target[:, None]).sum().item()
        return float(total), len(answer_ids)

    def _measure_sharing_cache(
        self, ids: Sequence[int], answer: str | None
    ) -> tuple[float, str, float, float | None, int | None] | None:
        """Prefill timed once per repeat; the last pass's KV cache then serves the gold
        log-prob (answer tokens fed on top, then cropped off) and greedy decoding, so a prompt
        is prefilled ``repeats`` times instead of ``repeats + 2``. None when the model's cache
        cannot be cropped (the caller falls back to separate passes)."""
        import torch

        model, tok = self.lm.model, self.lm.tokenizer
        x = torch.tensor([list(ids)], device=self.lm.device)
        times = []
        with torch.inference_mode():
            if not self._warm:
                model(x[:, : min(len(ids), 64)])
                self._sync()
                self._warm = True
            for _ in range(self.repeats):
                self._sync()
                start = time.perf_counter()
                out = model(x, use_cache=True, **self._last_logits)
                self._sync()
                times.append(time.perf_counter() - start)
            past = _croppable(out.past_key_values)
            if past is None:
                return None
            last_logits = out.logits[0, -1].float()
            logprob = n_answer = None
            if answer:
                answer_ids = list(tok.encode(answer, add_special_tokens=False))
                if answer_ids:
                    a = torch.tensor([answer_ids], device=self.lm.device)
                    later = model(a, past_key_values=past, use_cache=True).logits[0, :-1].float()
                    logits = torch.cat([last_logits[None], later], dim=0)
                    logp = torch.log_softmax(logits, dim=-1)
                    target = torch.tensor(answer_ids, device=logp.device)
                    logprob = float(logp.gather(1, target[:, None]).sum().item())
                    n_answer = len(answer_ids)
                    past.crop(len(ids))
            start = time.perf_counter()
            new: list[int] = []
            next_id = int(last_logits.argmax())
            stop = _stop_ids(tok, model)
            while len(new) < self.max_new_tokens and next_id not in stop:
                new.append(next_id)
                if "\n" in tok.decode(new, skip_special_tokens=True).strip():
                    break  # only the first line is scored
                step = model(
                    torch.tensor([[next_id]], device=self.lm.device), past_key_values=past, use_cache=True
                )
                next_id = int(step.logits[0, -1].argmax())
            self._sync()
            generate_s = times[-1] + time.perf_counter() - start
        text = first_line(tok.decode(new, skip_special_tokens=True))
        return statistics.median(times), text, generate_s, logprob, n_answer

    # ---- the interface

    def measure(self, messages: Sequence[dict[str, Any]], *, answers: Sequence[str]) -> Measurement:
        try:
            ids = self.prompt_ids(messages)
            gold = answers[0] if self.logprob and answers else None
            shared = self._measure_sharing_cache(ids, gold)
            if shared is not None:
                prefill, answer, generate_s, logprob, n = shared
            else:
                prefill = self.prefill_seconds(ids)
                answer, generate_s = self.generate(ids)
                logprob, n = self.answer_logprob(ids, gold) if gold else (None, None)
        except RuntimeError as exc:  # torch reports OOM and device errors as RuntimeError
            raise BackendError(str(exc), backend=self.name) from exc
        return Measurement(
            answer=answer,
            prompt_tokens=len(ids),
            prefill_s=prefill,
            generate_s=generate_s,
            gold_logprob=logprob,
            gold_tokens=n,
        )


def _croppable(past: Any) -> Any:
    """The KV cache as an object that can be cropped, or None. Some transformers releases
    return the legacy tuple of tensors when no cache object was passed in; converting it after
    the timed pass leaves the timed forward exactly as a plain call makes it."""
    if hasattr(past, "crop"):
        return past
    try:
        from transformers import DynamicCache
    except ImportError:
        return None
    if isinstance(past, (tuple, list)) and hasattr(DynamicCache, "from_legacy_cache"):
        return DynamicCache.from_legacy_cache(past)
    return None


def _stop_ids(tokenizer: Any, model: Any) -> set[int]:
    """Token ids that end an answer: the tokenizer's EOS and the generation config's."""
    ids = {tokenizer.eos_token_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, list) else [configured])
    return {i for i in ids if i is not None}


# ---------------------------------------------------------------- openai


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


# ---------------------------------------------------------------- lookup

#: backend classes by spec kind
MODEL_BACKENDS: Registry[type] = Registry(
    "model backend",
    {
        "hf": "promptslim.bench.backends:HFBackend",
        "openai": "promptslim.bench.backends:OpenAIBackend",
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


