"""Cache models against hand-computed cases, and the simulator's bookkeeping."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.cache import (
    AnthropicPromptCache,
    BlockHashCache,
    OpenAIPromptCache,
    PrefixCacheSimulator,
    RadixCache,
    default_models,
    prefix_keys,
    simulate,
)
from promptslim.errors import ConfigError, InvalidRequest

# ---------------------------------------------------------------- vLLM block-hash chain


def test_ten_shared_tokens_with_block_size_4_hit_8() -> None:
    cache = BlockHashCache(block_size=4)
    shared = list(range(10))
    assert cache.observe(shared + [100, 101, 102]) == 0
    assert cache.observe(shared + [200, 201, 202]) == 8


def test_change_at_token_17_with_block_16_hits_16() -> None:
    cache = BlockHashCache(block_size=16)
    first = list(range(64))
    second = list(first)
    second[16] = 9999  # the 17th token
    cache.observe(first)
    assert cache.observe(second) == 16
    assert cache.observe(first) == 64


def test_one_changed_token_invalidates_every_later_block() -> None:
    cache = BlockHashCache(block_size=4)
    cache.observe(list(range(16)))
    changed = list(range(16))
    changed[5] = 77  # block 1 differs; blocks 2 and 3 are equal but must not hit
    assert cache.observe(changed) == 4


def test_partial_block_is_never_cached() -> None:
    cache = BlockHashCache(block_size=16)
    cache.observe(list(range(15)))
    assert cache.observe(list(range(15))) == 0
    assert len(cache) == 0


def test_all_zero_blocks_do_not_alias_shorter_prefixes() -> None:
    cache = BlockHashCache(block_size=4)
    cache.observe([0] * 4)
    assert cache.observe([0] * 12) == 4  # only the first block was ever cached


def test_lru_evicts_least_recent_deepest_first() -> None:
    cache = BlockHashCache(block_size=2, capacity_blocks=4)
    a, b = [1, 2, 3, 4], [5, 6, 7, 8]
    cache.observe(a)  # 2 blocks
    cache.observe(b)  # 4 blocks: full
    cache.observe(a)  # a is now the most recent
    cache.observe([9, 10])  # one block over: evicts b's last block
    assert cache.evictions == 1
    assert cache.lookup(a) == 4
    assert cache.lookup(b) == 2  # b's first block is still there
    cache.observe([11, 12, 13, 14])  # two more out: b's first block, then a's last
    assert cache.evictions == 3
    assert cache.lookup(b) == 0
    assert cache.lookup(a) == 2


def test_lru_stays_exact_across_queue_compaction() -> None:
    cache = BlockHashCache(block_size=1, capacity_blocks=3)
    hot = [1, 2]
    for i in range(6000):  # hits pile up stale queue entries; compaction must keep order
        cache.observe(hot)
    cache.observe([7])
    cache.observe([8])  # evicts hot's deepest block, not its root
    assert cache.lookup(hot) == 1
    assert len(cache) == 3


@given(st.lists(st.lists(st.integers(0, 5), min_size=0, max_size=24), max_size=12))
def test_unbounded_hits_equal_longest_common_block_prefix(prompts: list[list[int]]) -> None:
    block = 4
    cache = BlockHashCache(block_size=block)
    for i, p in enumerate(prompts):
        best = 0
        for q in prompts[:i]:
            n = 0
            while n < min(len(p), len(q)) and p[n] == q[n]:
                n += 1
            best = max(best, n // block * block)
        assert cache.observe(p) == best


class ReferenceBlockCache:
    """vLLM's rule written the obvious way, to check the tree against: every cached block is
    its whole token prefix (a tuple) with its last use, ``(request, -depth)``; a lookup counts
    leading blocks until the first one not cached; eviction drops the smallest stamp (least
    recently used, deepest first) one block at a time."""

    def __init__(self, block_size: int, capacity_blocks: int | None) -> None:
        self.block_size = block_size
        self.capacity_blocks = capacity_blocks
        self.stamps: dict[tuple[int, ...], tuple[int, int]] = {}
        self.clock = 0
        self.evictions = 0

    def lookup(self, tokens: Sequence[int]) -> int:
        b, hit = self.block_size, 0
        while (hit + 1) * b <= len(tokens) and tuple(tokens[: (hit + 1) * b]) in self.stamps:
            hit += 1
        return hit * b

    def insert(self, tokens: Sequence[int]) -> None:
        self.clock += 1
        for depth in range(len(tokens) // self.block_size):
            prefix = tuple(tokens[: (depth + 1) * self.block_size])
            self.stamps[prefix] = (self.clock, -depth)
        while self.capacity_blocks is not None and len(self.stamps) > self.capacity_blocks:
            del self.stamps[min(self.stamps, key=self.stamps.__getitem__)]
            self.evictions += 1

    def observe(self, tokens: Sequence[int]) -> int:
        hit = self.lookup(tokens)
        self.insert(tokens)
        return hit


def _replay_both(
    cache: BlockHashCache,
    ref: ReferenceBlockCache,
    ops: list[tuple[str, list[int]]],
    *,
    probe_every: int = 1,
) -> None:
    seen: dict[tuple[int, ...], list[int]] = {}
    for step, (op, tokens) in enumerate(ops):
        if op == "insert":
            cache.insert(tokens)
            ref.insert(tokens)
        else:
            got = getattr(cache, op)(np.array(tokens, dtype=np.uint64) if step % 2 else tokens)
            assert got == getattr(ref, op)(tokens), (step, op)
        assert cache.evictions == ref.evictions, step
        assert len(cache) == len(ref.stamps), step
        seen[tuple(tokens)] = tokens
        if step % probe_every == 0:
            # every cached block is a prefix of a prompt seen so far, so equal lookups of all
            # of them mean the same blocks are cached (not just as many)
            for prompt in seen.values():
                assert cache.lookup(prompt) == ref.lookup(prompt), (step, prompt)


@st.composite
def _request_streams(draw: st.DrawFn) -> list[tuple[str, list[int]]]:
    """Requests that share prefixes the way real streams do: each one continues, cuts short or
    turns off from an earlier one, or is new; with lookups and inserts as the load simulator
    calls them, not only ``observe``."""
    ops: list[tuple[str, list[int]]] = []
    for _ in range(draw(st.integers(1, 30))):
        tail = draw(st.lists(st.integers(0, 2), max_size=8))
        if ops and draw(st.integers(0, 3)) > 0:  # mostly built on an earlier prompt
            base = draw(st.sampled_from(ops))[1]
            tokens = base[: draw(st.integers(0, len(base)))] + tail
        else:
            tokens = tail
        ops.append((draw(st.sampled_from(["observe", "observe", "lookup", "insert"])), tokens))
    return ops


@settings(max_examples=300, deadline=None)
@given(
    _request_streams(),
    st.integers(1, 3),
    st.one_of(st.none(), st.integers(1, 12)),
)
def test_tree_matches_the_reference_on_random_streams(
    ops: list[tuple[str, list[int]]], block_size: int, capacity: int | None
) -> None:
    _replay_both(
        BlockHashCache(block_size=block_size, capacity_blocks=capacity),
        ReferenceBlockCache(block_size, capacity),
        ops,
    )


def test_a_prompt_that_stops_inside_a_cached_run_refreshes_only_what_it_used() -> None:
    cache = BlockHashCache(block_size=1, capacity_blocks=3)
    cache.observe([1, 2])
    cache.observe([3])
    cache.observe([1])  # uses block [1] again, not [1, 2]
    cache.observe([4])  # one over: [1, 2]'s last block is now the least recent
    assert cache.evictions == 1
    assert cache.lookup([1, 2]) == 1
    assert cache.lookup([3]) == 1


@pytest.mark.parametrize("capacity", [None, 40, 150])
def test_tree_matches_the_reference_on_chat_like_streams(capacity: int | None) -> None:
    # bigger prompts than hypothesis draws: a few system prompts, conversations that grow a
    # turn at a time, and one-off requests, interleaved, so edges split, grow and get evicted
    rng = np.random.default_rng(7)
    systems = [rng.integers(0, 50, 40).tolist() for _ in range(3)]
    chats: list[list[int]] = []
    ops: list[tuple[str, list[int]]] = []
    for _ in range(300):
        roll = rng.random()
        if roll < 0.5 and chats:
            chat = chats[int(rng.integers(len(chats)))]
            chat += rng.integers(0, 50, int(rng.integers(1, 30))).tolist()
            tokens = list(chat)
        elif roll < 0.8:
            chats.append(systems[int(rng.integers(3))] + rng.integers(0, 50, 20).tolist())
            tokens = list(chats[-1])
        else:
            tokens = rng.integers(0, 4, int(rng.integers(0, 60))).tolist()
        ops.append(("observe" if rng.random() < 0.8 else "lookup", tokens))
    _replay_both(
        BlockHashCache(block_size=8, capacity_blocks=capacity),
        ReferenceBlockCache(8, capacity),
        ops,
        probe_every=25,
    )


def test_radix_matches_the_reference_at_token_granularity() -> None:
    rng = np.random.default_rng(3)
    base = rng.integers(0, 5, 30).tolist()
    ops = [("observe", base[: int(rng.integers(31))] + rng.integers(0, 5, 8).tolist())]
    for _ in range(200):
        prev = ops[int(rng.integers(len(ops)))][1]
        ops.append(("observe", prev[: int(rng.integers(len(prev) + 1))] + [int(rng.integers(5))]))
    _replay_both(RadixCache(capacity_tokens=60), ReferenceBlockCache(1, 60), ops, probe_every=10)


def test_lists_and_arrays_give_the_same_keys() -> None:
    tokens = list(range(1000, 1064))
    assert prefix_keys(tokens, 16) == prefix_keys(np.array(tokens, dtype=np.int64), 16)
    assert len(set(prefix_keys(tokens, 16))) == 4


def test_bad_config_names_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        BlockHashCache(block_size=0)
    assert err.value.field == "block_size"
    with pytest.raises(ConfigError) as err:
        BlockHashCache(capacity_blocks=-1)
    assert err.value.field == "capacity_blocks"


def test_wide_token_ids_are_matched_exactly() -> None:
    # synthetic ids (load simulation streams) can be wide: 2**32 must not alias 0
    cache = BlockHashCache(block_size=4)
    assert cache.observe([2**63 + 5] * 8) == 0 and cache.observe([2**63 + 5] * 8) == 8
    assert cache.lookup([0] * 8) == 0 and cache.observe([2**32] * 8) == 0
    assert cache.lookup([2**32] * 4 + [0] * 4) == 4


# ---------------------------------------------------------------- SGLang radix


def test_radix_matches_at_token_granularity() -> None:
    cache = RadixCache()
    cache.observe([1, 2, 3, 4, 5])
    assert cache.observe([1, 2, 3, 9]) == 3
    assert cache.observe([1, 2, 3, 9, 10]) == 4


def test_radix_capacity_in_tokens() -> None:
    cache = RadixCache(capacity_tokens=4)
    cache.observe([1, 2, 3])
    cache.observe([4, 5, 6])  # evicts the 2 least recent, deepest first
    assert cache.lookup([1, 2, 3]) == 1
    assert cache.evictions == 2


# ---------------------------------------------------------------- OpenAI


def test_openai_needs_1024_tokens_then_counts_in_128_steps() -> None:
    cache = OpenAIPromptCache()
    short = list(range(1000))
    cache.observe(short)
    assert cache.observe(short) == 0  # under 1,024 tokens: never cached
    prompt = list(range(1300))
    assert cache.observe(prompt) == 0
    assert cache.observe(prompt) == 1280  # 1,024 + 2 * 128; the last 20 tokens are not counted
    variant = prompt[:1100] + [-1 + 5000] * 200
    assert cache.observe(variant) == 1024
    early = prompt[:1000] + [7] * 300  # shares 1,000 tokens: under the minimum
    assert cache.observe(early) == 0


def test_openai_rejects_misaligned_minimum() -> None:
    with pytest.raises(ConfigError) as err:
        OpenAIPromptCache(min_tokens=1000, increment=128)
    assert err.value.field == "min_tokens"


# ---------------------------------------------------------------- Anthropic


def test_anthropic_hits_at_breakpoints_only() -> None:
    cache = AnthropicPromptCache(min_tokens=100)
    system = list(range(300))
    first = system + [1] * 50
    second = system + [2] * 50
    assert cache.observe(first, breakpoints=[300]) == 0
    assert cache.observe(second, breakpoints=[300]) == 300
    # no breakpoint on the shared prefix and none written there: the whole prompt is the
    # only breakpoint and it differs, but 300 was written before, so look-back finds it
    assert cache.observe(system + [3] * 50) == 300


def test_anthropic_breakpoint_rules() -> None:
    cache = AnthropicPromptCache(min_tokens=100)
    tokens = list(range(500))
    with pytest.raises(InvalidRequest) as err:
        cache.observe(tokens, breakpoints=[100, 200, 300, 400, 500])
    assert err.value.field == "breakpoints"
    with pytest.raises(InvalidRequest):
        cache.observe(tokens, breakpoints=[501])
    cache.observe(tokens, breakpoints=[50, 200, 400])  # 50 is under the minimum: not written
    assert len(cache) == 2
    changed = tokens[:250] + [9] * 250
    assert cache.observe(changed, breakpoints=[450]) == 200
    assert cache.lookup(tokens[:60] + [8] * 100, breakpoints=[160]) == 0


# ---------------------------------------------------------------- simulator


def test_simulator_reports_per_request_and_totals() -> None:
    sim = PrefixCacheSimulator(BlockHashCache(block_size=4, capacity_blocks=3))
    result = sim.replay([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 9, 9, 9], [5, 5, 5, 5]])
    assert [r.hit_tokens for r in result.per_request] == [0, 4, 0]
    assert result.prompt_tokens == 20 and result.hit_tokens == 4
    assert result.hit_rate == pytest.approx(0.2)
    assert result.evictions == 1  # only [5..8], untouched since the first request
    assert result.as_dict()["hit_rate"] == pytest.approx(0.2)


def test_simulate_runs_each_model_on_the_same_stream() -> None:
    system = list(range(2048))
    stream = [system + [i] * 64 for i in range(5)]
    results = simulate(stream, default_models())
    assert set(results) == {"vllm", "sglang", "openai", "anthropic"}
    assert results["vllm"].hit_tokens == 4 * 2048
    assert results["sglang"].hit_tokens == 4 * 2048
    assert results["openai"].hit_tokens == 4 * 2048
    assert results["anthropic"].hit_tokens == 0  # one breakpoint at the (varying) end
    bp = simulate(stream, {"a": AnthropicPromptCache()}, breakpoints=[[2048]] * 5)
    assert bp["a"].hit_tokens == 4 * 2048


def test_request_tokens_marks_the_stable_prefix() -> None:
    from promptslim.cache import request_tokens
    from promptslim.tokens import get_counter
    from promptslim.types import Request

    counter = get_counter()
    request = Request.from_openai(
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
            ],
            "tools": [{"type": "function", "function": {"name": "f"}}],
        }
    )
    tokens, prefix_len = request_tokens(request, counter)
    tools_len = len(counter.encode('[{"type": "function", "function": {"name": "f"}}]'))
    system_len = len(counter.encode("<|system|>\nBe brief.\n"))
    assert prefix_len == tools_len + system_len
    assert tokens[prefix_len:] == counter.encode("<|user|>\nhi\n")
