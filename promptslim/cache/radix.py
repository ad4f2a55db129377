"""SGLang's RadixAttention cache as a model: longest token-prefix match, leaf-first LRU.

SGLang keeps computed prefixes in a radix tree and reuses the longest prefix of a new prompt
that is in the tree (at token granularity with ``page_size=1``, its default). Eviction frees
least-recently-used leaves first. This model is ``BlockHashCache`` with blocks of
``page_size`` tokens, itself a radix tree of whole blocks (see ``vllm.py``): the longest cached
prefix in whole pages, evicted least recently used first, deepest first. Capacity is in
tokens, like SGLang's token pool.
"""

from __future__ import annotations

from .vllm import BlockHashCache, _check_positive

__all__ = ["RadixCache"]


class RadixCache(BlockHashCache):
    """Longest-prefix match in pages of ``page_size`` tokens; ``capacity_tokens`` (None:
    unbounded) is rounded down to whole pages."""

    name = "sglang"

    def __init__(self, *, page_size: int = 1, capacity_tokens: int | None = None) -> None:
        _check_positive(page_size, "page_size")
        _check_positive(capacity_tokens, "capacity_tokens", optional=True)
        self.page_size = page_size
        self.capacity_tokens = capacity_tokens
        blocks = None if capacity_tokens is None else max(1, capacity_tokens // page_size)
        super().__init__(block_size=page_size, capacity_blocks=blocks)

    def __repr__(self) -> str:
        return f"RadixCache(page_size={self.page_size}, capacity_tokens={self.capacity_tokens})"
