"""``hf:NAME_OR_PATH``: a local transformers causal LM as a benchmark backend; prefill time is
one forward pass over the chat-templated prompt, measured. torch and transformers are the
``bench`` extra's, imported where used (the model loader says what is missing)."""

from __future__ import annotations

import inspect
import statistics
import time
from collections.abc import Sequence
from typing import Any

from ..backends.hf_compat import cache_keyword, crop_to, output_cache
from ..backends.models import load_causal_lm
from ..errors import BackendError, ConfigError
from .backend_base import Measurement, ModelBackend, first_line, plain_messages

__all__ = ["HFBackend", "last_logits_only"]


def last_logits_only(model: Any) -> dict[str, int]:
    """The forward keyword that makes a causal LM compute logits for the last position only.

    A serving engine's prefill projects only the last hidden state onto the vocabulary (that
    is all the first generated token needs); projecting all of them adds ~20 % to SmolLM2's
    prefill FLOPs (49k-word vocabulary, 576-wide model) and would overstate what a shorter
    prompt saves. The keyword was renamed across transformers releases, and ``forward`` takes
    ``**kwargs``, so an unknown spelling would be silently ignored: check the signature.
    """
    params = inspect.signature(type(model).forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


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
            ids = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=False)
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
        cache_kw = cache_keyword(model)
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
            past = _croppable(output_cache(out))
            if past is None:
                return None
            last_logits = out.logits[0, -1].float()
            logprob = n_answer = None
            if answer:
                answer_ids = list(tok.encode(answer, add_special_tokens=False))
                if answer_ids:
                    a = torch.tensor([answer_ids], device=self.lm.device)
                    later = model(a, **{cache_kw: past}, use_cache=True).logits[0, :-1].float()
                    logits = torch.cat([last_logits[None], later], dim=0)
                    logp = torch.log_softmax(logits, dim=-1)
                    target = torch.tensor(answer_ids, device=logp.device)
                    logprob = float(logp.gather(1, target[:, None]).sum().item())
                    n_answer = len(answer_ids)
                    crop_to(past, len(ids))
            start = time.perf_counter()
            new: list[int] = []
            next_id = int(last_logits.argmax())
            stop = _stop_ids(tok, model)
            while len(new) < self.max_new_tokens and next_id not in stop:
                new.append(next_id)
                if "\n" in tok.decode(new, skip_special_tokens=True).strip():
                    break  # only the first line is scored
                step = model(
                    torch.tensor([[next_id]], device=self.lm.device),
                    **{cache_kw: past},
                    use_cache=True,
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
