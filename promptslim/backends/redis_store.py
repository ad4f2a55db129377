"""Stores that replicas on many hosts share, in Redis: summaries, embeddings, tool outputs.

Each is the same small interface as its local counterpart, with a local store in front and
behind it: a read tries the local one, then Redis (filling the local one); a write goes to
both. Configs name them by URL::

    summary_cache = "redis://127.0.0.1:6379/0"                 # HistoryStage
    store = "redis://127.0.0.1:6379/0?tenant=acme&ttl=3600"   # ToolsStage
    PROMPTSLIM_EMBEDDING_CACHE=redis://127.0.0.1:6379/0       # every EmbeddingService

Query parameters (all optional; the rest of the URL is redis-py's ``from_url``): ``tenant``
(default ``default``), ``ttl`` (seconds an entry lives), ``max_value`` (bytes; a larger value
stays local), ``timeout_ms`` (each Redis call's socket timeout, default 50), ``prefix`` (of
every key, default ``ps``), ``secret_env`` (the environment variable holding the key secret,
default ``PROMPTSLIM_REDIS_SECRET``; never put a secret in a config).

Why each part is here:

- **Tenants apart.** A key in Redis is ``prefix:kind:HMAC-SHA256(tenant salt, key)``, the salt
  itself ``HMAC(secret, tenant)``: one tenant's request can never hit, and so never time-probe,
  another's entry, and the keys in Redis name neither the tenant nor the content.
- **Faults degrade, never fail.** Every call has a short socket timeout and no retries; a
  failure falls back to the local store, is counted (``shared_stats.STORE_STATS``), is noted for
  the request's report (``degraded_scope``), and takes Redis out of use for a backoff that
  doubles from 0.1 s to 5 s, so a Redis that is away costs one timeout per backoff, not one per
  request. Summaries and embeddings are functions of their input, so whatever a replica
  recomputes meanwhile is the same bytes (docs/architecture.md, invariant 6).
- **Bounded.** Values over ``max_value`` bytes are not sent; every entry has a TTL; the local
  stores are bounded as they are on their own. A Redis that is full (``maxmemory`` with
  ``noeviction``) refuses writes: counted as degraded, reads go on.
- **One connection pool per process** per URL (``RedisLink.get``): threads share it; a forked
  child builds its own.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import BackendUnavailable, ConfigError
from .shared_stats import STORE_STATS, note_degraded
from .summary_cache import LRUSummaryCache
from .tools.store import MemoryToolStore, ToolStore

__all__ = [
    "RedisLink",
    "RedisSummaryCache",
    "RedisToolStore",
    "RedisVectorCache",
    "parse_redis_url",
]

_log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_TIMEOUT_MS = 50.0
SECRET_ENV = "PROMPTSLIM_REDIS_SECRET"
_BACKOFF_MIN_S, _BACKOFF_MAX_S = 0.1, 5.0
_POOL_CONNECTIONS = 64  # per process: past it a call fails fast and the request degrades


@dataclass(frozen=True)
class RedisSpec:
    """A parsed ``redis://`` URL: the connection part and this project's options."""

    url: str
    tenant: str
    ttl_s: int
    max_value_bytes: int
    timeout_ms: float
    prefix: str
    secret_env: str


def _positive(value: str, name: str, field: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 < number < float("inf"):  # NaN fails both comparisons
        raise ConfigError(f"{name} must be a number > 0, got {value!r}", field=field)
    return number


def parse_redis_url(url: str, *, field: str, ttl_s: int, max_value_bytes: int) -> RedisSpec:
    """``url``'s parts; ``ttl_s`` and ``max_value_bytes`` are the defaults for this store."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix") or not (parts.netloc or parts.path):
        raise ConfigError(f"expected a redis:// URL, got {url!r}", field=field)
    ours = {"tenant", "ttl", "max_value", "timeout_ms", "prefix", "secret_env"}
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = {k: v for k, v in query if k in ours}
    rest = [(k, v) for k, v in query if k not in ours]
    tenant = options.get("tenant", "default")
    prefix = options.get("prefix", "ps")
    if not tenant or not prefix or ":" in prefix:
        raise ConfigError("tenant and prefix must be non-empty (a prefix without ':')", field=field)
    return RedisSpec(
        url=urlunsplit(parts._replace(query=urlencode(rest))),
        tenant=tenant,
        ttl_s=int(_positive(options["ttl"], "ttl", field)) if "ttl" in options else ttl_s,
        max_value_bytes=(
            int(_positive(options["max_value"], "max_value", field))
            if "max_value" in options
            else max_value_bytes
        ),
        timeout_ms=_positive(
            options.get("timeout_ms", str(DEFAULT_TIMEOUT_MS)), "timeout_ms", field
        ),
        prefix=prefix,
        secret_env=options.get("secret_env", SECRET_ENV),
    )


class _Missing:
    """What a Redis call that did not happen returns (Redis away, slow or refusing)."""


MISSING = _Missing()


class RedisLink:
    """One Redis URL in this process: its connection pool, and whether Redis is in use now.

    ``call(op)`` runs ``op(client)``; any failure returns ``MISSING`` after counting it, and a
    connection failure or timeout also takes Redis out of use for the backoff."""

    _links: ClassVar[dict[tuple[int, str, float], RedisLink]] = {}
    _links_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, url: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as exc:
            raise BackendUnavailable("redis (the shared Redis stores)", extra="redis") from exc
        self.url = url
        self.timeout_ms = timeout_ms
        timeout = timeout_ms / 1e3
        try:
            self.pool = redis.ConnectionPool.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),  # a retry would double the wait of a request
                max_connections=_POOL_CONNECTIONS,
            )
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL: {exc}", field="url") from exc
        self.client = redis.Redis(connection_pool=self.pool)
        self._errors: tuple[type[BaseException], ...] = (redis.exceptions.RedisError, OSError)
        self._refused = redis.exceptions.ResponseError
        self._down_until = 0.0
        self._backoff_s = 0.0
        self._warned = False
        # connect now, at config time, so a request does not pay for the connection (a Redis
        # that is away here only starts the backoff; it is never a config error)
        self.call(lambda c: c.ping(), what="ping", timed=False)

    @classmethod
    def get(cls, url: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> RedisLink:
        """The process's link for this URL (one connection pool per process)."""
        key = (os.getpid(), url, timeout_ms)
        found = cls._links.get(key)
        if found is None:
            with cls._links_lock:
                found = cls._links.get(key)
                if found is None:
                    found = cls._links[key] = cls(url, timeout_ms=timeout_ms)
        return found

    @property
    def available(self) -> bool:
        """False while a failure's backoff lasts."""
        return time.monotonic() >= self._down_until

    def call(self, op: Callable[[Any], T], *, what: str, timed: bool = True) -> T | _Missing:
        if time.monotonic() < self._down_until:
            note_degraded("redis unavailable (backing off)")
            return MISSING
        start = time.perf_counter()
        try:
            out = op(self.client)
        except self._refused as exc:  # full (OOM), read-only replica...: this call only
            self._fault(f"redis refused a {what}", exc, backoff=False)
            return MISSING
        except self._errors as exc:
            self._fault(f"redis unreachable on a {what}", exc, backoff=True)
            return MISSING
        if timed:
            STORE_STATS.latency((time.perf_counter() - start) * 1e3)
        self._backoff_s = 0.0
        return out

    def _fault(self, reason: str, exc: BaseException, *, backoff: bool) -> None:
        STORE_STATS.count("redis_errors")
        note_degraded(reason)
        if backoff:
            self._backoff_s = min(max(2 * self._backoff_s, _BACKOFF_MIN_S), _BACKOFF_MAX_S)
            self._down_until = time.monotonic() + self._backoff_s
        if not self._warned:  # once per link: a Redis that is away must not flood the log
            self._warned = True
            _log.warning("%s (%s: %s); using the local store", reason, type(exc).__name__, exc)

    def __repr__(self) -> str:
        return f"RedisLink({self.url!r}, timeout_ms={self.timeout_ms})"


class _Keys:
    """Redis keys for one kind of entry: ``prefix:kind:HMAC(tenant salt, key)``."""

    def __init__(self, spec: RedisSpec, kind: str) -> None:
        secret = os.environ.get(spec.secret_env, "promptslim").encode()
        self._salt = hmac.new(secret, b"tenant\0" + spec.tenant.encode(), hashlib.sha256).digest()
        self._head = f"{spec.prefix}:{kind}:"
        self._namespaces: dict[str, bytes] = {}

    def __call__(self, key: str | bytes, namespace: str = "") -> str:
        salt = self._salt
        if namespace:  # a namespace within the tenant (the tools stage's): salted again
            salt = self._namespaces.get(namespace) or self._salt_for(namespace)
        data = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key
        return self._head + hmac.new(salt, data, hashlib.sha256).hexdigest()[:40]

    def _salt_for(self, namespace: str) -> bytes:
        salt = hmac.new(self._salt, namespace.encode("utf-8", "surrogatepass"), hashlib.sha256)
        if len(self._namespaces) < 4096:  # bounded: namespaces come from requests
            self._namespaces[namespace] = salt.digest()
        return salt.digest()


class _RedisBacked:
    """What the three stores share: the spec, the link, the keys, the counting."""

    kind = ""

    def __init__(self, url: str, *, field: str, ttl_s: int, max_value_bytes: int) -> None:
        self.spec = parse_redis_url(url, field=field, ttl_s=ttl_s, max_value_bytes=max_value_bytes)
        self.link = RedisLink.get(self.spec.url, timeout_ms=self.spec.timeout_ms)
        self._key = _Keys(self.spec, self.kind)
        self.url = url

    def _found(self, value: object) -> bool:
        hit = isinstance(value, bytes)
        STORE_STATS.count("redis_hits" if hit else "redis_misses")
        return hit

    def _fits(self, data: bytes) -> bool:
        if len(data) > self.spec.max_value_bytes:
            STORE_STATS.count("redis_oversize")
            return False
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


class RedisSummaryCache(_RedisBacked):
    """A ``SummaryCache`` shared through Redis, with a per-process LRU of ``memory`` entries in
    front of it that also serves while Redis is away."""

    kind = "summary"

    def __init__(self, url: str, *, memory: int = 4096, ttl_s: int = 7 * 86400,
                 max_value_bytes: int = 64 * 1024) -> None:  # fmt: skip
        super().__init__(url, field="summary_cache", ttl_s=ttl_s, max_value_bytes=max_value_bytes)
        self.local = LRUSummaryCache(maxsize=max(memory, 1))

    def get(self, key: str) -> str | None:
        found = self.local.get(key)
        if found is not None:
            return found
        value = self.link.call(lambda c: c.get(self._key(key)), what="read")
        if not self._found(value):
            return None
        assert isinstance(value, bytes)
        text = value.decode("utf-8", "surrogatepass")
        self.local.set(key, text)
        return text

    def set(self, key: str, value: str) -> None:
        self.local.set(key, value)
        data = value.encode("utf-8", "surrogatepass")
        if self._fits(data):
            name, ttl = self._key(key), self.spec.ttl_s
            self.link.call(lambda c: c.set(name, data, ex=ttl), what="write")


class RedisToolStore(_RedisBacked, ToolStore):
    """A ``ToolStore`` shared through Redis, a ``MemoryToolStore`` of ``memory_bytes`` in
    front. The tools stage's namespace is salted in under the URL's tenant."""

    kind = "tool"

    def __init__(self, url: str, *, memory_bytes: int = 64 * 1024 * 1024, ttl_s: int = 86400,
                 max_value_bytes: int = 1024 * 1024) -> None:  # fmt: skip
        super().__init__(url, field="store", ttl_s=ttl_s, max_value_bytes=max_value_bytes)
        self.local = MemoryToolStore(max_bytes=memory_bytes)

    def get(self, namespace: str, key: str) -> bytes | None:
        found = self.local.get(namespace, key)
        if found is not None:
            return found
        value = self.link.call(lambda c: c.get(self._key(key, namespace)), what="read")
        if not self._found(value):
            return None
        assert isinstance(value, bytes)
        self.local.put(namespace, key, value)
        return value

    def put(self, namespace: str, key: str, value: bytes) -> None:
        self.local.put(namespace, key, value)
        if self._fits(value):
            name, ttl = self._key(key, namespace), self.spec.ttl_s
            # content-addressed: an existing entry already holds these bytes
            self.link.call(lambda c: c.set(name, bytes(value), ex=ttl, nx=True), what="write")


class RedisVectorCache(_RedisBacked):
    """Embedding vectors (float32 bytes) shared through Redis, by ``space`` (the model and its
    settings) and text digest. ``EmbeddingService`` keeps its own LRU in front."""

    kind = "vec"

    def __init__(
        self, url: str, *, ttl_s: int = 7 * 86400, max_value_bytes: int = 64 * 1024
    ) -> None:
        super().__init__(url, field="embedding_cache", ttl_s=ttl_s, max_value_bytes=max_value_bytes)

    def get_many(self, space: str, keys: Sequence[bytes]) -> list[bytes | None]:
        names = [self._key(space.encode() + b"\0" + k) for k in keys]
        values = self.link.call(lambda c: c.mget(names), what="read")
        if isinstance(values, _Missing):
            return [None] * len(keys)
        out = [v if isinstance(v, bytes) else None for v in values]
        hits = sum(v is not None for v in out)
        STORE_STATS.count("redis_hits", hits)
        STORE_STATS.count("redis_misses", len(out) - hits)
        return out

    def put_many(self, space: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        rows = [(self._key(space.encode() + b"\0" + k), v) for k, v in items if self._fits(v)]
        if not rows:
            return
        ttl = self.spec.ttl_s

        def write(client: Any) -> None:
            pipe = client.pipeline(transaction=False)  # one round trip for the batch
            for name, data in rows:
                pipe.set(name, data, ex=ttl)
            pipe.execute()

        self.link.call(write, what="write")
