"""The Redis stores against a real redis-server (tests/redis_server.py): sharing between
replicas, tenants apart, bounds and TTLs, and faults (down, restarted, full) that degrade a
request instead of failing it, with byte-identical summaries throughout."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from promptslim import Budget, ConfigError, HistoryStage
from promptslim.backends.redis_store import (
    RedisSummaryCache,
    RedisToolStore,
    RedisVectorCache,
    parse_redis_url,
)
from promptslim.backends.shared_stats import STORE_STATS, degraded_scope
from promptslim.backends.summarisers import LRUSummaryCache
from promptslim.backends.summary_store import summary_cache_from_spec
from promptslim.backends.tools.store import tool_store_from_spec

from .redis_server import RedisServer, redis_server_available
from .test_history import chat, request

pytestmark = pytest.mark.skipif(
    not redis_server_available(),
    reason="redis-server is not installed (Debian: apt-get install redis-server; "
    "scripts/setup.sh does it where it can)",
)
redis = pytest.importorskip("redis", reason="redis-py missing: pip install 'promptslim[redis]'")

BUDGET = Budget(total=700)


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as srv:
        yield srv


def _count(name: str) -> int:
    return int(STORE_STATS.counts.get(name, 0))


def _messages(out: object) -> list[dict[str, object]]:
    return [m.to_openai() for m in out.request.messages]  # type: ignore[attr-defined]


def test_summaries_are_shared_between_replicas(server: RedisServer) -> None:
    url = f"{server.url}?tenant=share"
    first = HistoryStage(summary_cache=url).run(request(chat(30)), BUDGET)
    assert first.report.stages[0].details["summary_cached"] is False
    before = _count("computed_summary")
    # another replica: its own local cache (a new stage, a new LRU), the same Redis
    other = HistoryStage(summary_cache=url).run(request(chat(30)), BUDGET)
    assert other.report.stages[0].details["summary_cached"] is True
    assert _count("computed_summary") == before  # nothing computed again
    assert _messages(other) == _messages(first)
    # without Redis, a second replica computes it again, to the same bytes
    alone = HistoryStage(summary_cache=LRUSummaryCache()).run(request(chat(30)), BUDGET)
    assert _count("computed_summary") > before
    assert _messages(alone) == _messages(first)


def test_tenants_cannot_read_or_probe_each_other(server: RedisServer) -> None:
    a = RedisSummaryCache(f"{server.url}?tenant=alpha", memory=1)
    b = RedisSummaryCache(f"{server.url}?tenant=beta", memory=1)
    a.set("conversation-key", "Alpha's summary")
    assert RedisSummaryCache(f"{server.url}?tenant=alpha").get("conversation-key") == (
        "Alpha's summary"
    )
    assert b.get("conversation-key") is None  # a miss, as for a key nobody wrote
    names = [k.decode() for k in redis.Redis.from_url(server.url).keys("*")]
    assert names and all(n.startswith("ps:") for n in names)
    assert not any("alpha" in n or "conversation" in n for n in names)  # nothing to probe by


def test_values_are_bounded_and_expire(server: RedisServer) -> None:
    url = f"{server.url}?tenant=bounds&ttl=30&max_value=100&prefix=bnd"
    cache = RedisSummaryCache(url)
    oversize = _count("redis_oversize")
    cache.set("small", "fits")
    cache.set("big", "x" * 500)
    assert cache.get("big") == "x" * 500  # kept locally
    assert _count("redis_oversize") == oversize + 1
    client = redis.Redis.from_url(server.url)
    fresh = RedisSummaryCache(url)
    assert fresh.get("small") == "fits" and fresh.get("big") is None  # never sent to Redis
    ttls = [client.ttl(k) for k in client.keys("bnd:summary:*")]
    assert len(ttls) == 1 and 0 < ttls[0] <= 30


def test_tool_store_shares_originals_and_keeps_namespaces_apart(server: RedisServer) -> None:
    store = tool_store_from_spec(f"{server.url}?tenant=tools")
    assert isinstance(store, RedisToolStore)
    store.put("acme", "ps1a2b3c", b"the elided rows")
    other = RedisToolStore(f"{server.url}?tenant=tools")  # another replica
    assert other.get("acme", "ps1a2b3c") == b"the elided rows"
    assert other.get("globex", "ps1a2b3c") is None
    assert RedisToolStore(f"{server.url}?tenant=else").get("acme", "ps1a2b3c") is None


def test_embeddings_are_shared_by_model_and_settings(server: RedisServer) -> None:
    pytest.importorskip("sentence_transformers")
    from promptslim.backends import embeddings
    from promptslim.backends.embeddings import EmbeddingService, configure_embedding_cache

    texts = ["Redis keeps the vectors.", "A second passage about prefill."]
    configure_embedding_cache(f"{server.url}?tenant=vec")
    try:
        first = EmbeddingService(max_seq_length=64).embed(texts)
        before = _count("computed_embedding")
        again = EmbeddingService(max_seq_length=64).embed(texts)  # its own, empty LRU
        assert _count("computed_embedding") == before
        assert again.tobytes() == first.tobytes()
        EmbeddingService(max_seq_length=32).embed(texts)  # other settings: other vectors
        assert _count("computed_embedding") == before + 2
        assert isinstance(embeddings._shared_cache(), RedisVectorCache)
    finally:
        configure_embedding_cache(None)


def test_redis_down_degrades_and_recovers_with_identical_summaries() -> None:
    srv = RedisServer().start()
    try:
        url = f"{srv.url}?tenant=fault&timeout_ms=50"
        replicas = [HistoryStage(summary_cache=url), HistoryStage(summary_cache=url)]
        reference = HistoryStage(summary_cache=LRUSummaryCache())
        warned = False
        for turn, n in enumerate(range(12, 48, 2)):
            if turn == 6:
                srv.stop()  # mid-conversation
            if turn == 12:
                srv.start()
            out = replicas[turn % 2].run(request(chat(n)), BUDGET)  # turns alternate
            assert _messages(out) == _messages(reference.run(request(chat(n)), BUDGET))
            warnings = out.report.stages[0].warnings
            warned = warned or any("summary cache degraded" in w for w in warnings)
            if turn < 6:
                assert not any("degraded" in w for w in warnings)
        assert warned
        # reconnected after its backoff (at most 5 s): a write reaches Redis again
        cache = RedisSummaryCache(url)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and RedisSummaryCache(url, memory=1).get("back") is None:
            cache.set("back", "again")
            time.sleep(0.2)
        assert RedisSummaryCache(url, memory=1).get("back") == "again"
    finally:
        srv.stop()


def test_a_full_redis_refuses_writes_and_reads_go_on() -> None:
    with RedisServer("--maxmemory", "2mb", "--maxmemory-policy", "noeviction") as srv:
        cache = RedisSummaryCache(f"{srv.url}?tenant=full&max_value=300000")
        cache.set("first", "kept")
        errors = _count("redis_errors")
        with degraded_scope() as degraded:
            for i in range(40):  # 40 x 200 kB: past maxmemory, writes are refused (OOM)
                cache.set(f"k{i}", "y" * 200_000)
        assert _count("redis_errors") > errors
        assert any("refused" in reason for reason in degraded)
        assert RedisSummaryCache(f"{srv.url}?tenant=full").get("first") == "kept"


@pytest.mark.parametrize(
    "spec",
    ["redis://", "redis://h:1/0?ttl=0", "redis://h:1/0?timeout_ms=nan", "redis://h:1/0?tenant="],
)
def test_bad_urls_name_the_field(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        summary_cache_from_spec(spec)
    assert info.value.field == "summary_cache"


def test_url_options_are_ours_and_the_rest_is_redis_pys() -> None:
    spec = parse_redis_url(
        "redis://127.0.0.1:6379/2?tenant=t&ttl=60&health_check_interval=5",
        field="store", ttl_s=1, max_value_bytes=2,
    )  # fmt: skip
    assert (spec.tenant, spec.ttl_s, spec.max_value_bytes) == ("t", 60, 2)
    assert spec.url == "redis://127.0.0.1:6379/2?health_check_interval=5"


def test_a_slow_redis_times_out_and_the_request_goes_on() -> None:
    import threading

    from promptslim.backends.redis_store import RedisLink

    with RedisServer("--enable-debug-command", "yes") as srv:
        url = f"{srv.url}?tenant=slow&timeout_ms=50"
        cache = RedisSummaryCache(url, memory=1)
        assert RedisLink.get(srv.url, timeout_ms=50.0) is cache.link  # one pool per process
        cache.set("k", "before")
        cache.set("k2", "evicts k from the one-entry LRU")
        blocker = threading.Thread(
            target=lambda: redis.Redis.from_url(srv.url).execute_command("DEBUG", "SLEEP", "2")
        )
        blocker.start()
        time.sleep(0.2)  # the server is now asleep for two seconds
        with degraded_scope() as degraded:
            assert cache.get("k") is None  # timed out: a miss, not an exception
            assert cache.get("other") is None  # in its backoff: not even tried
        blocker.join()
        assert degraded and all("redis" in reason for reason in degraded)
