"""The bounded-cache type every memo uses: bounded by entries and by size (invariant 10 of
docs/architecture.md)."""

from __future__ import annotations

import gc
import threading

import pytest

from promptslim import scripts
from promptslim import text as text_module
from promptslim.backends.tools.store import MemoryToolStore
from promptslim.counters import TiktokenCounter
from promptslim.memo import BoundedCache, clear_memos


def test_entries_bound_evicts_the_oldest_first() -> None:
    cache: BoundedCache[str, int] = BoundedCache(max_entries=3, max_size=1_000)
    for i in range(5):
        cache.put(f"k{i}", i, 1)
    assert list(cache) == ["k2", "k3", "k4"] and len(cache) == 3
    assert cache.get("k0") is None and cache.get("k4") == 4


def test_size_bound_holds_however_few_the_entries() -> None:
    cache: BoundedCache[str, str] = BoundedCache(max_entries=1_000, max_size=100)
    for i in range(10):
        cache.put(str(i), "v", 30)
    assert cache.size <= 100 and len(cache) == 3
    cache.put("huge", "v", 101)  # larger than the whole bound: not kept, nothing evicted
    assert "huge" not in cache and len(cache) == 3
    cache.put("9", "w", 60)  # replacing an entry recharges it
    assert cache.get("9") == "w" and cache.size <= 100


def test_clear_memos_empties_every_memo_but_stores_and_word_stems() -> None:
    memo: BoundedCache[str, int] = BoundedCache(max_entries=8, max_size=100, compute=len)
    kept: BoundedCache[str, int] = BoundedCache(max_entries=8, max_size=100, clears=False)
    memo("abc")
    kept.put("abc", 3, 4)
    scripts.document_script("Ein Straßenbahn-Depot in Zürich")
    text_module.analyse("The harbour bridge opened")
    store = MemoryToolStore()
    store.put("tool", "ref", b"x" * 100)
    clear_memos()  # as a process that never saw any request's text
    assert len(memo) == 0 and memo.size == 0 and kept.get("abc") == 3
    assert len(scripts.document_script) == 0
    assert text_module._stem.get("harbour") is not None  # a language's words stay known
    assert store.get("tool", "ref") == b"x" * 100  # a store's entries are data, not a memo


def test_a_memo_that_is_collected_leaves_the_registry() -> None:
    from promptslim import memo as memo_module

    before = len(memo_module._memos)
    cache: BoundedCache[str, int] = BoundedCache(max_entries=8, max_size=100)
    assert len(memo_module._memos) == before + 1
    del cache
    gc.collect()
    assert len(memo_module._memos) == before


def test_compute_memoises_and_counts_misses() -> None:
    calls: list[str] = []

    def compute(text: str) -> int:
        calls.append(text)
        return len(text)

    memo: BoundedCache[str, int] = BoundedCache(max_entries=8, max_size=100, compute=compute)
    assert memo("abc") == 3 and memo("abc") == 3 and memo["abcd"] == 4
    assert calls == ["abc", "abcd"]
    info = memo.cache_info()
    assert (info.misses, info.currsize, info.size) == (2, 2, len("abc") + 1 + len("abcd") + 1)
    memo.cache_clear()
    assert len(memo) == 0 and memo.size == 0
    with pytest.raises(KeyError):
        BoundedCache(max_entries=1, max_size=1)["missing"]


def test_discard_removes_only_the_entry_holding_that_value() -> None:
    cache: BoundedCache[str, list[int]] = BoundedCache(max_entries=4, max_size=4)
    first, second = [1], [1]
    cache.put("k", first, 1)
    cache.discard("k", second)  # equal, not the same object
    assert cache.get("k") is first
    cache.discard("k", first)
    assert "k" not in cache and cache.size == 0


def test_concurrent_writers_keep_both_bounds() -> None:
    cache: BoundedCache[str, int] = BoundedCache(max_entries=50, max_size=500)
    barrier = threading.Barrier(8)

    def write(t: int) -> None:
        barrier.wait()
        for i in range(2_000):
            cache.put(f"{t}-{i}", i, 1 + i % 20)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) <= 50 and cache.size <= 500
    assert cache.size == sum(1 + int(k.split("-")[1]) % 20 for k in cache)


def test_token_counter_memo_is_bounded_by_characters() -> None:
    # a memo bounded only by entries keeps every long document it counted alive; the
    # counter's is bounded by the characters its keys hold. Loosen the size bound (or drop
    # it) and this fails: ten 100k-character texts are 1 M characters, over the 250k bound
    counter = TiktokenCounter(cache_size=1_000, cache_chars=250_000)
    texts = [f"document {i} " + "lorem ipsum dolor sit amet " * 3_800 for i in range(10)]
    assert all(len(t) > 100_000 for t in texts)
    for text in texts:
        counter.count(text)
    info = counter.cache_info()
    assert info.size <= 250_000 and info.currsize == 2
    assert counter.count(texts[-1]) == len(counter.encode(texts[-1]))  # still right, and held
    assert counter.cache_info().misses == info.misses


def test_summary_cache_is_bounded_by_characters_and_keeps_recent_hits() -> None:
    from promptslim.backends.summarisers import LRUSummaryCache

    cache = LRUSummaryCache(maxsize=100, max_chars=1_000)
    for i in range(10):
        cache.set(f"k{i}", "s" * 400)
    assert len(cache) == 2  # 800 of the 1,000 characters; entries alone would allow 100
    cache.set("a", "x")
    cache.set("b", "y")
    assert cache.get("a") == "x"  # a hit makes it the newest
    for i in range(3):
        cache.set(f"n{i}", "z" * 300)
    assert cache.get("a") == "x" and cache.get("k8") is None


def test_prefix_stage_memos_are_bounded_caches() -> None:
    from promptslim.stages.prefix import PrefixStage

    stage = PrefixStage(cache_size=4)
    memos = (stage._memo, stage._message_memo, stage._fingerprint_memo, stage._tools_memo)
    assert all(isinstance(m, BoundedCache) and m.max_entries == 4 for m in memos)
    assert all(m.max_size <= 16_000_000 for m in memos)


def test_counting_a_document_keeps_no_copy_of_it_in_the_counter_memo() -> None:
    # a document's count is memoised by its own text (the memo holds the document's string,
    # which the document holds anyway); its rendered line, a copy as long, is not kept
    from promptslim.counting import _DOCUMENT_TOKENS, count_document
    from promptslim.types import Document

    counter = TiktokenCounter(cache_size=1_000, cache_chars=10_000_000)
    doc = Document(id="big", text="lorem ipsum dolor sit amet " * 40_000)
    n = count_document(doc, counter)
    assert n == counter.count(f"Document [10] {doc.text}\n")
    held = counter.cache_info().size
    assert count_document(Document(id="again", text=doc.text + "!"), counter) > 0
    assert counter.cache_info().size == held  # the second document cost the counter nothing
    assert _DOCUMENT_TOKENS.size <= _DOCUMENT_TOKENS.max_size <= 16_000_000


def test_bm25_term_counts_are_charged_their_distinct_terms() -> None:
    # a long document's term counts are one large dict: the memo charges each entry its
    # distinct terms, so its size bound holds whatever the documents' lengths
    from promptslim.backends.lexical import BM25Scorer

    BM25Scorer.clear_cache()
    assert BM25Scorer.cache_info().size == 0
    words = [f"term{i}x" for i in range(5_000)]
    long_text = " ".join(words) + " " + " ".join(words[:100])  # 5,000 distinct, some twice
    scores = BM25Scorer().score("term7x", [long_text, "a short unrelated passage"]).scores
    assert scores[0] > 0 == scores[1]
    info = BM25Scorer.cache_info()
    assert info.currsize == 2 and 5_000 < info.size <= 5_010  # 5,000 terms + the short one's
    assert info.max_size <= 2_000_000
    BM25Scorer().score("term7x", [long_text])
    assert BM25Scorer.cache_info().size == info.size  # the same text again: a hit, no charge
    BM25Scorer.clear_cache()
    assert BM25Scorer.cache_info().currsize == 0
