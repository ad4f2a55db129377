"""Prefix-cache models and a simulator that replays request streams through them.

Every model is a ``CacheModel``: ``observe(tokens) -> hit_tokens`` (lookup, then insert).

- ``BlockHashCache``: vLLM's chained block hashes (``block_size``, LRU ``capacity_blocks``)
- ``RadixCache``: SGLang's radix tree, longest token-prefix match (``page_size``, ``capacity_tokens``)
- ``OpenAIPromptCache``: exact prefix of >= 1,024 tokens, in 128-token steps
- ``AnthropicPromptCache``: up to four explicit ``cache_control`` breakpoints

``PrefixCacheSimulator`` / ``simulate`` replay a stream and report hit tokens, hit rate and
evictions, per request and in total. ``default_models()`` gives one of each, as ``lint`` uses.
"""

from __future__ import annotations

from .base import CacheModel as CacheModel
from .base import Tokens as Tokens
from .base import as_token_array as as_token_array
from .base import prefix_keys as prefix_keys
from .providers import AnthropicPromptCache as AnthropicPromptCache
from .providers import OpenAIPromptCache as OpenAIPromptCache
from .radix import RadixCache as RadixCache
from .simulator import PrefixCacheSimulator as PrefixCacheSimulator
from .simulator import RequestHits as RequestHits
from .simulator import SimulationResult as SimulationResult
from .simulator import request_tokens as request_tokens
from .simulator import simulate as simulate
from .vllm import BlockHashCache as BlockHashCache

__all__ = [
    "AnthropicPromptCache",
    "BlockHashCache",
    "CacheModel",
    "OpenAIPromptCache",
    "PrefixCacheSimulator",
    "RadixCache",
    "RequestHits",
    "SimulationResult",
    "Tokens",
    "as_token_array",
    "default_models",
    "prefix_keys",
    "request_tokens",
    "simulate",
]


def default_models(*, block_size: int = 16) -> dict[str, CacheModel]:
    """Fresh, unbounded models of each kind, keyed by their ``name``."""
    models: list[CacheModel] = [
        BlockHashCache(block_size=block_size),
        RadixCache(),
        OpenAIPromptCache(),
        AnthropicPromptCache(),
    ]
    return {m.name: m for m in models}
