"""Where the originals of elided tool output wait for ``expand``: bytes by key, per namespace.

The interface is two methods, so a shared store (Redis, for the scale-out issue) is one more
class of the same shape::

    store.put("tenant-a", "ps1a2b3c4d5e6", b"...the elided items...")
    store.get("tenant-a", "ps1a2b3c4d5e6")  # -> bytes, or None when unknown or evicted

Keys are content hashes (``elision_id``), so a value never changes under its key: a put of a
key already held is a no-op in meaning, and a replica that computed the same elision stores
the same bytes. Namespaces keep tenants apart (one tenant cannot expand another's ids).

- ``MemoryToolStore``: in process, bounded by bytes (oldest written dropped first).
- ``SqliteToolStore``: one file every process of a host shares, bounded by bytes.

Neither fails a request: a store that cannot be written only makes a later ``expand`` miss.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from pathlib import Path

from ...errors import ConfigError
from ...memo import BoundedCache

__all__ = [
    "MemoryToolStore",
    "SqliteToolStore",
    "ToolStore",
    "default_tool_store",
    "tool_store_from_spec",
]

_log = logging.getLogger(__name__)

#: the default memory bound: 64 MiB of originals per process
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class ToolStore(ABC):
    """Bytes by (namespace, key). ``get`` returns None for an unknown or evicted key."""

    @abstractmethod
    def get(self, namespace: str, key: str) -> bytes | None: ...

    @abstractmethod
    def put(self, namespace: str, key: str, value: bytes) -> None: ...


def _check_bytes(max_bytes: object) -> int:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ConfigError(f"must be an int >= 1, got {max_bytes!r}", field="max_bytes")
    return max_bytes


class MemoryToolStore(ToolStore):
    """In-process store holding at most ``max_bytes`` of values (keys count too)."""

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = _check_bytes(max_bytes)
        self._data: BoundedCache[tuple[str, str], bytes] = BoundedCache(
            max_entries=1 << 30, max_size=self.max_bytes, clears=False
        )

    def get(self, namespace: str, key: str) -> bytes | None:
        return self._data.get((namespace, key))

    def put(self, namespace: str, key: str, value: bytes) -> None:
        if (namespace, key) in self._data:
            return  # content-addressed: the same key always holds the same bytes
        self._data.put((namespace, key), bytes(value), len(value) + len(key) + len(namespace))

    @property
    def size(self) -> int:
        """Bytes held."""
        return self._data.size

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"MemoryToolStore({self.size}/{self.max_bytes} bytes, {len(self)} entries)"


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS originals (namespace TEXT NOT NULL, key TEXT NOT NULL, "
    "value BLOB NOT NULL, PRIMARY KEY (namespace, key))"
)
# re-measuring the file's size costs a scan: do it every this many writes (so the file may
# run over its bound by at most that many values until the next check)
_PRUNE_EVERY = 32


class SqliteToolStore(ToolStore):
    """A SQLite file shared by every process on the host that opens it, holding about
    ``max_bytes`` of values at most (checked every 32 writes; the oldest rows go first).
    One connection per thread and process, WAL mode, ``timeout_ms`` per wait; a failed read
    is a miss and a failed write is skipped, with one logged warning per store."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = 1 << 30,
        timeout_ms: float = 50.0,
    ) -> None:
        self.path = Path(path)
        self.max_bytes = _check_bytes(max_bytes)
        if (
            isinstance(timeout_ms, bool)
            or not isinstance(timeout_ms, (int, float))
            or timeout_ms <= 0
        ):
            raise ConfigError("must be a number > 0", field="timeout_ms")
        self.timeout_ms = float(timeout_ms)
        self._local = threading.local()
        self._writes = 0
        self._lock = threading.Lock()
        self._warned = False
        if not self.path.parent.is_dir():
            raise ConfigError(f"no such directory: {self.path.parent}", field="store")
        try:
            self._connection()
        except sqlite3.Error as exc:
            raise ConfigError(
                f"cannot use {self.path} as a tool store: {exc}", field="store"
            ) from exc

    def _connection(self) -> sqlite3.Connection:
        local = self._local
        if getattr(local, "pid", None) != os.getpid():  # a new thread, or a fork
            conn = sqlite3.connect(self.path, timeout=self.timeout_ms / 1e3, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
            except sqlite3.Error:
                conn.close()
                raise
            local.conn, local.pid = conn, os.getpid()
        conn_: sqlite3.Connection = local.conn
        return conn_

    def _failed(self, action: str, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            _log.warning(
                "tool store %s: %s failed (%s); carrying on without it", self.path, action, exc
            )

    def get(self, namespace: str, key: str) -> bytes | None:
        try:
            row = (
                self._connection()
                .execute(
                    "SELECT value FROM originals WHERE namespace = ? AND key = ?", (namespace, key)
                )
                .fetchone()
            )
        except sqlite3.Error as exc:
            self._failed("a read", exc)
            return None
        return None if row is None else bytes(row[0])

    def put(self, namespace: str, key: str, value: bytes) -> None:
        try:
            conn = self._connection()
            conn.execute(
                "INSERT OR IGNORE INTO originals (namespace, key, value) VALUES (?, ?, ?)",
                (namespace, key, bytes(value)),
            )
            with self._lock:
                self._writes += 1
                due = self._writes % _PRUNE_EVERY == 0
            if due:
                self.prune()
        except sqlite3.Error as exc:
            self._failed("a write", exc)

    def prune(self) -> None:
        """Drop the oldest rows until the values fit in ``max_bytes``."""
        conn = self._connection()
        total = conn.execute("SELECT total(length(value)) FROM originals").fetchone()[0]
        if total <= self.max_bytes:
            return
        over = total - self.max_bytes
        dropped = 0
        rows = conn.execute("SELECT rowid, length(value) FROM originals ORDER BY rowid").fetchall()
        last = None
        for rowid, size in rows:
            if dropped >= over:
                break
            dropped += size
            last = rowid
        if last is not None:
            conn.execute("DELETE FROM originals WHERE rowid <= ?", (last,))

    def size(self) -> int:
        """Bytes of values in the file (every process's)."""
        return int(
            self._connection().execute("SELECT total(length(value)) FROM originals").fetchone()[0]
        )

    def __repr__(self) -> str:
        return f"SqliteToolStore({str(self.path)!r}, max_bytes={self.max_bytes})"


_default: MemoryToolStore | None = None
_default_lock = threading.Lock()


def default_tool_store() -> MemoryToolStore:
    """The process-wide memory store (what ``store="memory"`` names)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MemoryToolStore()
        return _default


def tool_store_from_spec(spec: str | ToolStore) -> ToolStore:
    """A store named by a config string: ``"memory"`` (the process-wide one),
    ``"memory:BYTES"`` (a new one with that bound) or ``"sqlite:PATH"``; a ToolStore as is."""
    if isinstance(spec, ToolStore):
        return spec
    if not isinstance(spec, str):
        raise ConfigError(
            f"expected a store name or a ToolStore, got {type(spec).__name__}", field="store"
        )
    kind, sep, rest = spec.partition(":")
    if kind == "memory":
        if not sep:
            return default_tool_store()
        if not rest.isdigit():
            raise ConfigError(f"'memory:' takes a byte count, got {rest!r}", field="store")
        return MemoryToolStore(max_bytes=int(rest))
    if kind == "sqlite" and sep and rest:
        return SqliteToolStore(os.path.expanduser(rest))
    if kind in ("redis", "rediss", "unix") and rest.startswith("//"):  # shared by replicas
        from ..redis_store import RedisToolStore

        return RedisToolStore(spec)
    raise ConfigError(
        f"expected 'memory', 'memory:BYTES', 'sqlite:PATH' or 'redis://...', got {spec!r}",
        field="store",
    )
