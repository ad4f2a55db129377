"""What differs between the transformers releases promptslim runs on, in one place.

The project runs on current transformers (5.x); the llmlingua backend runs in an environment
of its own with transformers 4.47.1 (llmlingua 0.2.2 crashes on anything newer). The model
code is shared by both, so every call whose spelling changed between them goes through here:

- the dtype keyword of ``from_pretrained``: ``torch_dtype`` until 4.55, ``dtype`` from 4.56
  (5.x warns on the old name and 4.4x ignores the new one, silently);
- the KV cache keyword of ``forward`` and its output field: ``past_key_values`` in 4.x,
  ``cache`` in 5.x (the old name is deprecated there, to be removed);
- KV cache objects: 4.x converts to and from per-layer ``(key, value)`` tuples
  (``to_legacy_cache`` / ``from_legacy_cache``); 5.x dropped both and keeps ``layers``;
- cropping a KV cache: 4.x's ``crop(n)`` keeps the first ``n`` tokens, 5.x's refuses a positive
  ``n``; both take a negative one as the number of tokens to remove;
- ``rope_theta``: a config attribute in 4.x, ``config.rope_parameters["rope_theta"]`` in 5.x.

Nothing here imports transformers at module import time.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

__all__ = [
    "cache_keyword",
    "crop_to",
    "dtype_keyword",
    "kv_layers",
    "make_dynamic_cache",
    "output_cache",
    "rope_theta",
    "transformers_version",
]


def transformers_version() -> tuple[int, int]:
    """The installed transformers' (major, minor)."""
    major, minor, *_ = version("transformers").split(".")
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def dtype_keyword(dtype: Any) -> dict[str, Any]:
    """``from_pretrained``'s dtype argument, spelt as the installed release reads it."""
    return {"dtype" if transformers_version() >= (4, 56) else "torch_dtype": dtype}


def cache_keyword(module: Any) -> str:
    """The name ``module.forward`` takes the KV cache by. ``forward`` also takes ``**kwargs``,
    so a wrong spelling could be dropped without a word: read the signature."""
    params = inspect.signature(type(module).forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def output_cache(output: Any) -> Any:
    """The KV cache a forward pass returned (``cache`` in 5.x, ``past_key_values`` before)."""
    found = getattr(output, "cache", None)
    return found if found is not None else getattr(output, "past_key_values", None)


def kv_layers(cache: Any) -> tuple[tuple[Any, Any], ...]:
    """A KV cache as per-layer ``(key, value)`` tensors, whichever form it came in."""
    if hasattr(cache, "to_legacy_cache"):  # 4.x cache objects
        return tuple((k, v) for k, v, *_ in cache.to_legacy_cache())
    if hasattr(cache, "layers"):  # 5.x: a list of layer objects
        return tuple((layer.keys, layer.values) for layer in cache.layers)
    return tuple((k, v) for k, v, *_ in cache)  # already legacy tuples


def make_dynamic_cache(layers: Sequence[tuple[Any, Any]]) -> Any:
    """A ``DynamicCache`` holding ``layers`` (per-layer key and value tensors)."""
    from transformers import DynamicCache

    if hasattr(DynamicCache, "from_legacy_cache"):
        return DynamicCache.from_legacy_cache(tuple(layers))
    return DynamicCache(tuple(layers))


def crop_to(cache: Any, length: int) -> None:
    """Crop a KV cache back to its first ``length`` tokens, in place."""
    extra = int(cache.get_seq_length()) - length
    if extra > 0:  # crop(0) would empty a 4.x cache: crop only when there is something to drop
        cache.crop(-extra)


def rope_theta(config: Any) -> float | None:
    """The RoPE base frequency of a model config, or None when it has none."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and params.get("rope_theta") is not None:
        return float(params["rope_theta"])
    value = getattr(config, "rope_theta", None)
    return None if value is None else float(value)
