"""The interface every prefix-cache model implements, and prefix hashing.

A cache model answers one question per request: how many leading tokens of this prompt would
the serving engine (or provider) serve from its prefix cache? ``observe(tokens)`` answers it and
then records the prompt as cached, which is what an engine does when it runs the request::

    cache = BlockHashCache(block_size=16)
    cache.observe(first_prompt_tokens)   # 0: nothing cached yet
    cache.observe(second_prompt_tokens)  # leading tokens shared with the first, in whole blocks

``lookup`` and ``insert`` are the two halves, for callers that need them apart.

Prefix hashing: the key of a block-aligned prefix is a 64-bit universal hash of all its
tokens (see ``prefix_keys``), computed for every block boundary of a prompt in a few numpy
calls, no per-token or per-block Python loop. Two prefixes share a key only if they are equal
(up to a ~2**-47 chance per pair; a simulator needs no cryptographic hash). Because the key
covers the whole prefix, block ``i`` can only hit if blocks ``0..i-1`` match too, which is
exactly what vLLM's chained block hash gives. The Anthropic model keys its breakpoints this
way; ``BlockHashCache`` (and so the radix and OpenAI models) compares the tokens themselves in
a tree instead, which answers the same question without hashing (see ``vllm.py``), and keeps
``block_keys`` for callers that want the keys.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

__all__ = ["CacheModel", "TokenArray", "Tokens", "as_token_array", "prefix_keys"]

TokenArray: TypeAlias = npt.NDArray[np.uint64]
#: token ids: any sequence of ints, or a numpy integer array (the fast path: no conversion)
Tokens: TypeAlias = Sequence[int] | npt.NDArray[np.integer]

_SEED = 0x5EED_CAC4E
_CHUNK = 4096  # block positions generated at a time


def _odd_randoms(n: int, *key: int) -> TokenArray:
    rng = np.random.default_rng((_SEED, *key))
    odd: TokenArray = rng.integers(0, 2**64, size=n, dtype=np.uint64) | np.uint64(1)
    return odd


class _BlockHashParams:
    """Multipliers for one block size: ``offset`` per position inside a block, ``weight`` and
    ``salt`` per block position (grown on demand, deterministic, so keys agree everywhere)."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.offset = _odd_randoms(block_size, block_size, 0)
        self.weight: TokenArray = np.empty(0, dtype=np.uint64)
        self.salt: TokenArray = np.empty(0, dtype=np.uint64)

    def grow(self, blocks: int) -> None:
        have = len(self.weight)
        chunks = range(have // _CHUNK, (blocks + _CHUNK - 1) // _CHUNK)
        self.weight = np.concatenate(
            [self.weight, *(_odd_randoms(_CHUNK, self.block_size, 1, k) for k in chunks)]
        )
        self.salt = np.concatenate(
            [self.salt, *(_odd_randoms(_CHUNK, self.block_size, 2, k) for k in chunks)]
        )


_params: dict[int, _BlockHashParams] = {}


def as_token_array(tokens: Tokens) -> TokenArray:
    """Token ids as a uint64 array (a uint64 array is returned as it is)."""
    if isinstance(tokens, np.ndarray):
        if tokens.dtype == np.uint64:
            return tokens  # type: ignore[return-value]
        return tokens.astype(np.uint64)
    return np.fromiter(tokens, dtype=np.uint64, count=len(tokens))


def prefix_keys(tokens: Tokens, block_size: int) -> list[int]:
    """The key of each full-block prefix: ``keys[i]`` identifies ``tokens[:(i + 1) * block_size]``.

    ``keys[i] = sum over blocks b <= i of (h_b * weight_b + salt_b)`` (mod 2**64), where
    ``h_b`` is the block's tokens dotted with per-offset multipliers: one ``dot`` and one
    running sum in numpy, no per-block Python. The salt keeps an all-zero block from giving
    its prefix the same key as the shorter one. A trailing partial block has no key (engines
    cache full blocks only).
    """
    arr = as_token_array(tokens)
    blocks = len(arr) // block_size
    if blocks == 0:
        return []
    params = _params.get(block_size)
    if params is None:
        params = _params.setdefault(block_size, _BlockHashParams(block_size))
    if blocks > len(params.weight):
        params.grow(blocks)
    h = arr[: blocks * block_size].reshape(blocks, block_size).dot(params.offset)
    np.multiply(h, params.weight[:blocks], out=h)
    np.add(h, params.salt[:blocks], out=h)
    np.add.accumulate(h, out=h)  # np.cumsum costs several microseconds more per call
    return h.tolist()  # type: ignore[no-any-return]


def prefix_keys_at(tokens: Tokens, lengths: Sequence[int]) -> list[int]:
    """Keys of ``tokens[:L]`` for each ``L`` in ``lengths`` (each ``1 <= L <= len``), at token
    granularity (for breakpoints that fall anywhere). Not comparable with ``prefix_keys``."""
    if not lengths:
        return []
    arr = as_token_array(tokens)
    n = max(lengths)
    params = _params.get(1)
    if params is None:
        params = _params.setdefault(1, _BlockHashParams(1))
    if n > len(params.weight):
        params.grow(n)
    h = np.multiply(arr[:n], params.weight[:n])
    np.add(h, params.salt[:n], out=h)
    np.add.accumulate(h, out=h)
    return h[np.asarray(lengths, dtype=np.intp) - 1].tolist()  # type: ignore[no-any-return]


class CacheModel(ABC):
    """A prefix-cache model. Subclasses implement ``lookup`` and ``insert``.

    ``observe`` (lookup, then insert) is what a simulator calls once per request. ``evictions``
    counts cache entries (blocks, pages or provider entries) evicted so far. Not thread-safe:
    a model is one engine's cache, replayed in order.
    """

    #: short name used in reports ("vllm", "sglang", "openai", "anthropic")
    name: str = "cache"
    evictions: int

    @abstractmethod
    def lookup(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        """Leading tokens of ``tokens`` served from the cache now (the cache is not changed)."""

    @abstractmethod
    def insert(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> None:
        """Record ``tokens`` as computed, as the engine does after prefilling it."""

    def observe(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        """Hit tokens of this request, then the request is cached. ``breakpoints`` (token
        positions) matter only to models with explicit breakpoints (Anthropic)."""
        arr = as_token_array(tokens)
        hit = self.lookup(arr, breakpoints=breakpoints)
        self.insert(arr, breakpoints=breakpoints)
        return hit

    @abstractmethod
    def reset(self) -> None:
        """Empty the cache and zero the counters."""

    @abstractmethod
    def __len__(self) -> int:
        """Entries held now (blocks, pages or provider entries)."""
