"""A summary cache that processes share: SQLite on the local disk.

The history stage's default cache is an in-memory LRU, one per process. Under ``promptslim
serve --workers N`` a conversation's requests land on any worker, so each worker computed the
same rolling summary again on its first request of that conversation (a cold request: about
50 ms for 200 messages on this project's 2-core VM, against about 1 ms warm), and a restart
forgot them all. ``SqliteSummaryCache`` keeps them in one file that every process on the host
opens; an in-memory LRU in front serves repeats without touching the file.

Configs name it by a string, so a pipeline that uses it still round-trips through
``to_config`` (which ``serve --workers`` needs)::

    HistoryStage(summary_cache="sqlite:/var/cache/promptslim/summaries.db")
    {"name": "history", "summary_cache": "sqlite:/var/cache/promptslim/summaries.db"}

The cache never fails a request: a locked or broken file reads as a miss and a write that
cannot be made is skipped (the summary is then computed again later), with one logged warning
per cache. Summaries are small (a few hundred tokens), so the file stays small; it holds at most
``maxsize`` rows, dropping the oldest written first.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

from ..errors import ConfigError
from .summarisers import LRUSummaryCache, SummaryCache

__all__ = ["SqliteSummaryCache", "summary_cache_from_spec"]

_log = logging.getLogger(__name__)

_SCHEMA = "CREATE TABLE IF NOT EXISTS summaries (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


class SqliteSummaryCache:
    """Summaries in a SQLite file shared by every process that opens it, behind a per-process
    in-memory LRU of ``memory`` entries (0: none).

    One connection per thread and process (SQLite connections must not cross either), in WAL
    mode so that readers never wait for a writer. ``timeout_ms`` bounds each of a write's two
    waits, for this process's other writers and then for another process's write lock, before
    the write is skipped: this sits on a request's path. A key is a hash of the summarised
    turns and the summariser's settings, so its value never changes: the memory in front
    cannot go stale."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        maxsize: int = 100_000,
        memory: int = 4096,
        timeout_ms: float = 50.0,
    ) -> None:
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ConfigError("must be an int >= 1", field="maxsize")
        if not isinstance(memory, int) or memory < 0:
            raise ConfigError("must be an int >= 0", field="memory")
        if (
            isinstance(timeout_ms, bool)
            or not isinstance(timeout_ms, (int, float))
            or timeout_ms <= 0
        ):
            raise ConfigError("must be a number > 0", field="timeout_ms")
        self.path = Path(path)
        self.maxsize = maxsize
        self.timeout_ms = float(timeout_ms)
        self._memory = LRUSummaryCache(maxsize=memory) if memory else None
        self._local = threading.local()
        # Threads of one process take turns on a lock of their own, not in SQLite's busy
        # handler: that one polls with growing sleeps, so under load a waiter can sleep through
        # every moment the file was free and give up (seen in CI: 8 threads, a skipped write).
        # One lock per process id: a fork must not inherit a lock another thread held.
        self._write_locks: dict[int, threading.Lock] = {}
        self._warned = False
        if not self.path.parent.is_dir():
            raise ConfigError(f"no such directory: {self.path.parent}", field="summary_cache")
        try:  # fail at construction, with the path, not on the first request
            self._connection()
        except sqlite3.Error as exc:
            raise ConfigError(
                f"cannot use {self.path} as a SQLite summary cache: {exc}", field="summary_cache"
            ) from exc

    def _connection(self) -> sqlite3.Connection:
        local = self._local
        pid = os.getpid()
        if getattr(local, "pid", None) != pid:  # a new thread, or a fork of this process
            conn = sqlite3.connect(self.path, timeout=self.timeout_ms / 1e3, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # a lost summary is only recomputed
                conn.execute(_SCHEMA)
            except sqlite3.Error:
                conn.close()
                raise
            local.conn, local.pid = conn, pid
        conn_: sqlite3.Connection = local.conn
        return conn_

    def _failed(self, action: str, exc: sqlite3.Error | str) -> None:
        if not self._warned:
            self._warned = True
            _log.warning(
                "summary cache %s: %s failed (%s); carrying on without it for that request",
                self.path,
                action,
                exc,
            )

    def get(self, key: str) -> str | None:
        if self._memory is not None and (found := self._memory.get(key)) is not None:
            return found
        try:
            row = (
                self._connection()
                .execute("SELECT value FROM summaries WHERE key = ?", (key,))
                .fetchone()
            )
        except sqlite3.Error as exc:
            self._failed("a read", exc)
            return None
        if row is None:
            return None
        value: str = row[0]
        if self._memory is not None:
            self._memory.set(key, value)
        return value

    def set(self, key: str, value: str) -> None:
        if self._memory is not None:
            self._memory.set(key, value)
        lock = self._write_locks.setdefault(os.getpid(), threading.Lock())
        if not lock.acquire(timeout=self.timeout_ms / 1e3):
            self._failed("a write", f"other threads held the write turn for {self.timeout_ms} ms")
            return
        try:
            conn = self._connection()
            # a replaced row gets a new, highest rowid: rowid order is write order
            rowid = conn.execute(
                "INSERT OR REPLACE INTO summaries (key, value) VALUES (?, ?)", (key, value)
            ).lastrowid
            if rowid is not None and rowid > self.maxsize:
                conn.execute("DELETE FROM summaries WHERE rowid <= ?", (rowid - self.maxsize,))
        except sqlite3.Error as exc:
            self._failed("a write", exc)
        finally:
            lock.release()

    def __len__(self) -> int:
        """Rows in the file (every process's)."""
        row = self._connection().execute("SELECT count(*) FROM summaries").fetchone()
        return int(row[0])

    def __repr__(self) -> str:
        return f"SqliteSummaryCache({str(self.path)!r}, maxsize={self.maxsize})"


def summary_cache_from_spec(spec: str) -> SummaryCache | None:
    """A summary cache named by a config string: ``"memory"`` (None: the process-wide
    in-memory LRU), ``"sqlite:PATH"`` or ``"redis://..."`` (``RedisSummaryCache``: shared by
    replicas on many hosts). Anything else is a ``ConfigError`` on ``summary_cache``."""
    if spec == "memory":
        return None
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from .redis_store import RedisSummaryCache

        return RedisSummaryCache(spec)
    kind, sep, rest = spec.partition(":")
    if kind == "sqlite" and sep:
        if not rest:
            raise ConfigError("'sqlite:' needs a file path after it", field="summary_cache")
        return SqliteSummaryCache(os.path.expanduser(rest))
    raise ConfigError(
        f"expected 'memory', 'sqlite:PATH', 'redis://...' or a SummaryCache object, got {spec!r}",
        field="summary_cache",
    )
