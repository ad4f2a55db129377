"""vLLM's automatic prefix caching as a model: full blocks, chained hashes, LRU eviction.

vLLM splits a prompt into blocks of ``block_size`` tokens (16 by default) and keys each full
block by a hash of its tokens *and the previous block's hash*, so a block can only hit when
every block before it hit too; a trailing partial block is never cached. Freed blocks are
evicted least-recently-used first and, among blocks freed together, the last block of a
sequence first (vLLM frees a request's blocks in reverse order). That order keeps the cached
set prefix-closed (a block is only cached while its parent is), which lets a lookup
binary-search the first miss instead of probing every block.

Not modelled: blocks pinned by running requests (requests are replayed one after another) and
vLLM's rule that a full hit still recomputes the last token.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ..errors import ConfigError
from .base import CacheModel, Tokens, prefix_keys

__all__ = ["BlockHashCache"]

# stamp = (request clock << _DEPTH_SHIFT) | (2**_DEPTH_SHIFT - 1 - depth): ordering by stamp
# is "least recently used first, deepest block first among blocks used together"
_DEPTH_SHIFT = 32
_DEPTH_TOP = 1 << _DEPTH_SHIFT


def _check_positive(value: object, field: str, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"expected a positive integer, got {value!r}", field=field)


class BlockHashCache(CacheModel):
    """vLLM-style block-hash chain with an LRU pool of ``capacity_blocks`` (None: unbounded).

    ``observe(tokens)`` returns the hit tokens (a multiple of ``block_size``) and caches the
    prompt's full blocks.
    """

    name = "vllm"

    def __init__(self, *, block_size: int = 16, capacity_blocks: int | None = None) -> None:
        _check_positive(block_size, "block_size")
        _check_positive(capacity_blocks, "capacity_blocks", optional=True)
        self.block_size = block_size
        self.capacity_blocks = capacity_blocks
        self.reset()

    # ---- the CacheModel interface

    def block_keys(self, tokens: Tokens) -> list[int]:
        """The chained key of each full block of ``tokens``."""
        return prefix_keys(tokens, self.block_size)

    def lookup(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        return self._hit_blocks(self.block_keys(tokens)) * self.block_size

    def insert(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> None:
        self._touch(self.block_keys(tokens))

    def observe(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        keys = prefix_keys(tokens, self.block_size)  # hashed once for both halves
        hit = self._hit_blocks(keys)
        self._touch(keys, known=hit)
        return hit * self.block_size

    def reset(self) -> None:
        self._seen: set[int] = set()  # unbounded: no recency to keep
        self._stamps: dict[int, int] = {}
        # eviction order: (keys deepest-first, their stamps) per touch, oldest touch first;
        # entries whose stamp is stale (the block was touched again later) are skipped
        self._queue: deque[tuple[Sequence[int], Sequence[int]]] = deque()
        self._queue_pos = 0
        self._queued = 0
        self._clock = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._seen) + len(self._stamps)

    def __repr__(self) -> str:
        return (
            f"BlockHashCache(block_size={self.block_size}, capacity_blocks={self.capacity_blocks})"
        )

    # ---- private

    def _hit_blocks(self, keys: Sequence[int]) -> int:
        # the cached set is prefix-closed (see the module docstring): binary-search the first miss
        cached: set[int] | dict[int, int] = (
            self._seen if self.capacity_blocks is None else self._stamps
        )
        lo, hi = 0, len(keys)
        while lo < hi:
            mid = (lo + hi) // 2
            if keys[mid] in cached:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _touch(self, keys: list[int], *, known: int = 0) -> None:
        n = len(keys)
        if not n:
            return
        cap = self.capacity_blocks
        if cap is None:
            # nothing is ever evicted, so recency does not matter: a set of the new blocks
            self._seen.update(keys[known:] if known else keys)
            return
        self._clock += 1
        base = self._clock << _DEPTH_SHIFT
        stamps = range(base + _DEPTH_TOP - n, base + _DEPTH_TOP)
        deepest_first = keys[::-1]
        self._stamps.update(zip(deepest_first, stamps))
        self._queue.append((deepest_first, stamps))
        self._queued += n
        if len(self._stamps) > cap:
            self._evict(cap)
        if self._queued > 4 * cap + 4096:
            self._compact()

    def _evict(self, cap: int) -> None:
        stamps, queue = self._stamps, self._queue
        pos = self._queue_pos
        excess = len(stamps) - cap
        while excess > 0:
            keys, when = queue[0]
            end = len(keys)
            while pos < end and excess > 0:
                key = keys[pos]
                if stamps.get(key) == when[pos]:
                    del stamps[key]
                    excess -= 1
                    self.evictions += 1
                pos += 1
            if pos == end:
                queue.popleft()
                self._queued -= end
                pos = 0
        self._queue_pos = pos

    def _compact(self) -> None:
        # hits re-stamp blocks without evicting anything, so stale queue entries pile up;
        # rebuild the queue from the live stamps (one sort) to keep memory bounded
        live = sorted(self._stamps.items(), key=lambda kv: kv[1])
        self._queue = deque([([k for k, _ in live], [s for _, s in live])])
        self._queue_pos = 0
        self._queued = len(live)
