"""vLLM's automatic prefix caching as a model: full blocks, chained hashes, LRU eviction.

vLLM splits a prompt into blocks of ``block_size`` tokens (16 by default) and keys each full
block by a hash of its tokens *and the previous block's hash*, so a block can only hit when
every block before it hit too; a trailing partial block is never cached. Freed blocks are
evicted least-recently-used first and, among blocks freed together, the last block of a
sequence first (vLLM frees a request's blocks in reverse order). That order keeps the cached
set prefix-closed (a block is only cached while its parent is).

Because the cached set is prefix-closed it is a tree, and the model stores it as one: a radix
tree whose edges are runs of whole blocks, held as the tokens' uint64 bytes. Comparing bytes
is exact, so this gives what a chain of block hashes gives without hashing anything (and
without hash collisions). A request walks the tree with one dict lookup and one
``bytes.startswith`` per node, and its new blocks become one new edge: the work per request
grows with the nodes on its path, not with its blocks, which is what makes replaying 2k-token
prompts cheap (a Python set of block hashes spent most of its time hashing and storing them one
by one). The price is memory: 8 bytes per cached token. Recency is per node: every block of an
edge was last used by the same request (edges are split where a request stops or turns off),
so the least recent, deepest block is always the last block of the leaf with the oldest clock,
and eviction trims leaves from a heap, many blocks per step.

Not modelled: blocks pinned by running requests (requests are replayed one after another) and
vLLM's rule that a full hit still recomputes the last token.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import count

import numpy as np

from ..errors import ConfigError
from .base import CacheModel, Tokens, as_token_array, prefix_keys

__all__ = ["BlockHashCache"]

_TOKEN = 8  # bytes per token (uint64)


def _check_positive(value: object, field: str, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"expected a positive integer, got {value!r}", field=field)


class _Node:
    """One edge of the tree: ``edge`` is the tokens of a run of whole blocks, as bytes;
    ``children`` maps the first block of each child's edge to the child; ``clock`` is the request
    that last used the edge (LRU only). A node cut off the tree has ``parent`` None, as the root
    does; the root is never in the eviction heap."""

    __slots__ = ("children", "clock", "edge", "parent")

    def __init__(self, edge: bytes, parent: _Node | None, clock: int) -> None:
        self.edge = edge
        self.parent = parent
        self.children: dict[bytes, _Node] = {}
        self.clock = clock


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
        self._block_bytes = block_size * _TOKEN
        self.reset()

    # ---- the CacheModel interface

    def block_keys(self, tokens: Tokens) -> list[int]:
        """The chained key of each full block of ``tokens``."""
        return prefix_keys(tokens, self.block_size)

    def lookup(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        return self._walk(self._blocks_of(tokens))[2] // _TOKEN

    def insert(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> None:
        data = self._blocks_of(tokens)
        self._add(data, *self._walk(data))

    def observe(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        data = self._blocks_of(tokens)  # walked once for both halves
        node, used, matched = self._walk(data)
        self._add(data, node, used, matched)
        return matched // _TOKEN

    def reset(self) -> None:
        self._root = _Node(b"", None, 0)
        self._blocks = 0  # cached blocks
        self._nodes = 0
        # LRU: (clock, tick, leaf) entries; stale ones (the leaf was used again, grew a child
        # or was removed) are skipped when they come up
        self._heap: list[tuple[int, int, _Node]] = []
        self._tick = count()
        self._clock = 0
        self.evictions = 0

    def __len__(self) -> int:
        return self._blocks

    def __repr__(self) -> str:
        return (
            f"BlockHashCache(block_size={self.block_size}, capacity_blocks={self.capacity_blocks})"
        )

    # ---- private

    def _blocks_of(self, tokens: Tokens) -> bytes:
        """The prompt's full blocks as bytes (a trailing partial block is never cached)."""
        arr = as_token_array(tokens)
        return arr[: len(arr) // self.block_size * self.block_size].tobytes()

    def _walk(self, data: bytes) -> tuple[_Node, int, int]:
        """How far ``data`` (a prompt's full blocks) is cached: the deepest node it reaches,
        the bytes of that node's edge it matches, and the bytes of ``data`` matched in all
        (all three in whole blocks)."""
        node, step = self._root, self._block_bytes
        matched, end = 0, len(data)
        while matched < end:
            child = node.children.get(data[matched : matched + step])
            if child is None:
                break
            edge = child.edge
            if data.startswith(edge, matched):
                node = child
                matched += len(edge)
                continue
            # the prompt ends or turns off inside this edge: count the whole blocks that match
            n = min(len(edge), end - matched) // _TOKEN
            same = np.frombuffer(edge, np.uint64, n) == np.frombuffer(data, np.uint64, n, matched)
            i = int(same.argmin())
            used = (n if same[i] else i // self.block_size * self.block_size) * _TOKEN
            return child, used, matched + used
        return node, len(node.edge), matched

    def _add(self, data: bytes, node: _Node, used: int, matched: int) -> None:
        """Cache the prompt whose walk ended ``used`` bytes into ``node``'s edge."""
        cap = self.capacity_blocks
        if cap is None:  # nothing is evicted, so recency does not matter
            if matched < len(data):
                if used < len(node.edge):
                    node = self._split(node, used)
                self._grow(node, data, matched)
            return
        self._clock += 1
        clock = self._clock
        if used < len(node.edge):  # the prompt used only the first part of this edge
            node = self._split(node, used)
        if matched < len(data):
            node = self._grow(node, data, matched)
        end, root = node, self._root
        while node is not root:
            node.clock = clock
            node = node.parent  # type: ignore[assignment]
        if end is not root and not end.children:
            heapq.heappush(self._heap, (clock, next(self._tick), end))
        if self._blocks > cap:
            self._evict(cap)
        if len(self._heap) > 2 * self._nodes + 1024:
            self._compact()

    def _grow(self, node: _Node, data: bytes, matched: int) -> _Node:
        """Hang the uncached rest of ``data`` under ``node``; returns the node that ends it."""
        rest = data[matched:]
        self._blocks += len(rest) // self._block_bytes
        if not node.children and node is not self._root:
            node.edge += rest  # a leaf used to its end: extending it keeps the path short
            return node
        leaf = _Node(rest, node, node.clock)
        node.children[rest[: self._block_bytes]] = leaf
        self._nodes += 1
        return leaf

    def _split(self, node: _Node, used: int) -> _Node:
        """Cut ``node``'s edge after ``used`` bytes; the new head node takes the first part.
        ``node`` keeps the rest, its children, its clock and its heap entries."""
        parent = node.parent
        assert parent is not None
        edge = node.edge
        head = _Node(edge[:used], parent, node.clock)
        step = self._block_bytes
        parent.children[edge[:step]] = head
        node.edge = edge[used:]
        node.parent = head
        head.children[node.edge[:step]] = node
        self._nodes += 1
        return head

    def _evict(self, cap: int) -> None:
        # the least recent, deepest block is the last block of the leaf with the oldest clock
        # (a child is never used later than its parent, and one request ends in one leaf)
        heap, root, step = self._heap, self._root, self._block_bytes
        excess = self._blocks - cap
        self._blocks = cap
        self.evictions += excess
        while excess > 0:
            clock, _, leaf = heap[0]
            if leaf.parent is None or leaf.children or leaf.clock != clock:
                heapq.heappop(heap)
                continue
            size = len(leaf.edge) // step
            if size > excess:  # the deepest blocks go first; the leaf stays the oldest
                leaf.edge = leaf.edge[: (size - excess) * step]
                return
            heapq.heappop(heap)
            parent = leaf.parent
            del parent.children[leaf.edge[:step]]
            leaf.parent = None
            self._nodes -= 1
            excess -= size
            if parent is not root and not parent.children:
                heapq.heappush(heap, (parent.clock, next(self._tick), parent))

    def _compact(self) -> None:
        # every use of a leaf pushes an entry; drop the stale ones to keep memory bounded
        live: dict[int, tuple[int, int, _Node]] = {}
        for entry in self._heap:
            clock, _, leaf = entry
            if leaf.parent is not None and not leaf.children and leaf.clock == clock:
                live[id(leaf)] = entry
        self._heap = list(live.values())
        heapq.heapify(self._heap)
