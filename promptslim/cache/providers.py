"""Provider prompt caches as models: OpenAI's automatic prefix cache, Anthropic's breakpoints.

**OpenAI** (what this model implements): prompts of ``min_tokens`` (1,024) tokens or more are
cached automatically; a later prompt hits on the longest exact prefix it shares with a cached
one, counted in ``increment`` (128) token steps from the start, so ``cached_tokens`` is 0 or
one of 1,024, 1,152, 1,280, ... Prompts shorter than ``min_tokens`` are neither served from nor
written to the cache. Not modelled: the 5-10 minute idle expiry and routing by
``prompt_cache_key`` (a replay is one key on one machine); ``capacity_blocks`` bounds the
cache in 128-token blocks, LRU, instead.

**Anthropic**: the caller marks up to four breakpoints (``cache_control`` on a content block);
the prefix up to each breakpoint is written as one entry, if it has at least ``min_tokens``
tokens (1,024 for Sonnet/Opus; 2,048 for Haiku). A later prompt hits the longest prefix that
ends at one of its own breakpoints, or at a position an earlier request wrote (Anthropic's
automatic look-back to earlier block boundaries), and equals a written entry exactly. Here a
breakpoint is a token count: the prefix ``tokens[:b]`` is cached. Without breakpoints the whole
prompt is one breakpoint. ``capacity_entries`` bounds the entries, LRU (None: unbounded; the
5-minute TTL is not modelled).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from ..errors import ConfigError, InvalidRequest
from .base import CacheModel, Tokens, as_token_array, prefix_keys_at
from .vllm import BlockHashCache, _check_positive

__all__ = ["AnthropicPromptCache", "OpenAIPromptCache"]


class OpenAIPromptCache(CacheModel):
    """OpenAI's rule: exact prefix, >= ``min_tokens``, in ``increment``-token steps."""

    name = "openai"

    def __init__(
        self, *, min_tokens: int = 1024, increment: int = 128, capacity_blocks: int | None = None
    ) -> None:
        _check_positive(min_tokens, "min_tokens")
        _check_positive(increment, "increment")
        if min_tokens % increment:
            raise ConfigError("must be a multiple of increment", field="min_tokens")
        self.min_tokens = min_tokens
        self.increment = increment
        self.capacity_blocks = capacity_blocks
        self._blocks = BlockHashCache(block_size=increment, capacity_blocks=capacity_blocks)

    def lookup(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        if len(tokens) < self.min_tokens:
            return 0
        hit = self._blocks.lookup(tokens)
        return hit if hit >= self.min_tokens else 0

    def insert(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> None:
        if len(tokens) >= self.min_tokens:
            self._blocks.insert(tokens)

    def observe(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        if len(tokens) < self.min_tokens:
            return 0
        hit = self._blocks.observe(tokens)
        return hit if hit >= self.min_tokens else 0

    @property
    def evictions(self) -> int:  # type: ignore[override]
        return self._blocks.evictions

    def reset(self) -> None:
        self._blocks.reset()

    def __len__(self) -> int:
        return len(self._blocks)

    def __repr__(self) -> str:
        return (
            f"OpenAIPromptCache(min_tokens={self.min_tokens}, increment={self.increment}, "
            f"capacity_blocks={self.capacity_blocks})"
        )


class AnthropicPromptCache(CacheModel):
    """Anthropic's explicit breakpoints: at most ``max_breakpoints`` cached prefixes per prompt."""

    name = "anthropic"

    def __init__(
        self,
        *,
        min_tokens: int = 1024,
        max_breakpoints: int = 4,
        capacity_entries: int | None = None,
    ) -> None:
        _check_positive(min_tokens, "min_tokens")
        _check_positive(max_breakpoints, "max_breakpoints")
        _check_positive(capacity_entries, "capacity_entries", optional=True)
        self.min_tokens = min_tokens
        self.max_breakpoints = max_breakpoints
        self.capacity_entries = capacity_entries
        self.reset()

    def lookup(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> int:
        arr = as_token_array(tokens)
        points = self._breakpoints(len(arr), breakpoints)
        if not points:
            return 0
        last = points[-1]
        candidates = sorted(
            {p for p in (*points, *self._written) if self.min_tokens <= p <= last}, reverse=True
        )
        for length, key in zip(candidates, prefix_keys_at(arr, candidates)):
            if key in self._entries:
                return length
        return 0

    def insert(self, tokens: Tokens, *, breakpoints: Sequence[int] | None = None) -> None:
        arr = as_token_array(tokens)
        points = [p for p in self._breakpoints(len(arr), breakpoints) if p >= self.min_tokens]
        entries = self._entries
        for length, key in zip(points, prefix_keys_at(arr, points)):
            entries[key] = None
            entries.move_to_end(key)
            self._written.add(length)
        cap = self.capacity_entries
        while cap is not None and len(entries) > cap:
            entries.popitem(last=False)
            self.evictions += 1

    def reset(self) -> None:
        self._entries: OrderedDict[int, None] = OrderedDict()
        self._written: set[int] = set()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (
            f"AnthropicPromptCache(min_tokens={self.min_tokens}, "
            f"max_breakpoints={self.max_breakpoints}, capacity_entries={self.capacity_entries})"
        )

    def _breakpoints(self, n: int, breakpoints: Sequence[int] | None) -> list[int]:
        if breakpoints is None:
            return [n] if n else []
        if len(breakpoints) > self.max_breakpoints:
            raise InvalidRequest(
                f"at most {self.max_breakpoints} cache_control breakpoints, got {len(breakpoints)}",
                field="breakpoints",
            )
        for b in breakpoints:
            if not isinstance(b, int) or not 1 <= b <= n:
                raise InvalidRequest(f"breakpoint {b!r} outside 1..{n}", field="breakpoints")
        return sorted(set(breakpoints))
