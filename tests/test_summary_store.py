"""SqliteSummaryCache: a real SQLite file shared by real processes; bad specs and a locked file."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from promptslim import Budget, ConfigError, HistoryStage, Pipeline, SqliteSummaryCache
from promptslim.backends.summary_store import summary_cache_from_spec
from promptslim.serve.server import _describable

from .test_history import chat, request

BUDGET = Budget(total=700)

# the same conversation in another process: the test module's own builder, imported there
# (``python -c`` run in the repository root imports ``tests`` from there)
_OTHER_PROCESS = """
import json
from promptslim import Budget, HistoryStage
from tests.test_history import chat, request
out = HistoryStage(summary_cache={spec!r}).run(request(chat(30)), Budget(total=700))
details = out.report.stages[0].details
print(json.dumps({{"cached": details["summary_cached"],
                  "messages": [m.to_openai() for m in out.request.messages]}}))
"""


def test_get_set_and_persistence(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    cache = SqliteSummaryCache(path)
    assert cache.get("k") is None
    cache.set("k", "Summary: Ana chose plan B.")
    cache.set("k", "Summary: Ana chose plan C.")  # replaced, not added
    assert cache.get("k") == "Summary: Ana chose plan C." and len(cache) == 1
    # a new instance with no memory in front reads it from the file
    again = SqliteSummaryCache(path, memory=0)
    assert again.get("k") == "Summary: Ana chose plan C." and again.get("other") is None


def test_another_process_reuses_the_summaries(tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'shared.db'}"
    proc = subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS.format(spec=spec)],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    there = json.loads(proc.stdout.strip().splitlines()[-1])
    assert there["cached"] is False  # it computed the summary and stored it
    here = HistoryStage(summary_cache=spec).run(request(chat(30)), BUDGET)
    assert here.report.stages[0].details["summary_cached"] is True
    assert [m.to_openai() for m in here.request.messages] == there["messages"]
    # the in-memory default of this process never saw it: with it, the summary is computed
    fresh = HistoryStage(summary_cache="memory").run(request(chat(30)), BUDGET)
    assert fresh.request.messages == here.request.messages


def test_config_round_trip_and_workers(tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'c.db'}"
    config = {"stages": [{"name": "history", "summary_cache": spec}]}
    pipe = Pipeline.from_config(config)
    assert pipe.to_config()["stages"][0]["summary_cache"] == spec
    assert _describable(pipe) is not None  # what serve --workers hands every worker
    assert isinstance(pipe.stages[0]._cache, SqliteSummaryCache)  # type: ignore[attr-defined]


def test_bounded_oldest_written_go_first(tmp_path: Path) -> None:
    cache = SqliteSummaryCache(tmp_path / "b.db", maxsize=10, memory=0)
    for i in range(50):
        cache.set(f"k{i}", f"v{i}")
    assert len(cache) == 10
    cache.set("k45", "v45 again")  # rewritten: now the newest (its old row leaves a gap)
    assert len(cache) <= 10
    assert cache.get("k0") is None and cache.get("k40") is None
    assert cache.get("k49") == "v49" and cache.get("k45") == "v45 again"


@pytest.mark.parametrize("spec", ["redis:localhost", "sqlite:", "lru", ""])
def test_bad_specs_name_the_field(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        HistoryStage(summary_cache=spec)
    assert info.value.field == "summary_cache"


def test_bad_paths_and_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        summary_cache_from_spec(f"sqlite:{tmp_path / 'missing' / 's.db'}")
    assert info.value.field == "summary_cache" and "missing" in str(info.value)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError) as info:
        SqliteSummaryCache(junk)
    assert info.value.field == "summary_cache" and "junk.db" in str(info.value)
    assert junk.read_bytes().startswith(b"this is not a database")  # left as it was
    for kw, field in [({"maxsize": 0}, "maxsize"), ({"memory": -1}, "memory"),
                      ({"timeout_ms": 0}, "timeout_ms")]:  # fmt: skip
        with pytest.raises(ConfigError) as info:
            SqliteSummaryCache(tmp_path / "ok.db", **kw)  # type: ignore[arg-type]
        assert info.value.field == field
    assert summary_cache_from_spec("memory") is None


def test_threads_share_one_cache(tmp_path: Path) -> None:
    # what this checks is correctness across threads, so no write may be skipped for time:
    # a loaded CI host once kept one waiting past the 50 ms default (the next test covers that)
    cache = SqliteSummaryCache(tmp_path / "t.db", memory=0, timeout_ms=10_000)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(100):
                cache.set(f"{t}-{i}", f"value {t} {i}")
                assert cache.get(f"{t}-{i}") == f"value {t} {i}"
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(cache) == 800


def test_a_locked_file_never_fails_a_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "l.db"
    cache = SqliteSummaryCache(path, memory=0, timeout_ms=20)
    cache.set("before", "kept")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process's long write: no one else may write
    try:
        caplog.set_level(logging.WARNING, logger="promptslim")
        start = time.perf_counter()
        cache.set("during", "lost")  # skipped after the timeout, not raised
        assert time.perf_counter() - start < 2
        assert cache.get("before") == "kept"  # WAL: readers are not blocked by the writer
        out = HistoryStage(summary_cache=cache).run(request(chat(30)), BUDGET)
        assert out.report.stages[0].details["summary_cached"] is False
        assert any(
            m.content and "Summary of the earlier" in str(m.content) for m in out.request.messages
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    warned = [r for r in caplog.records if "summary cache" in r.getMessage()]
    assert len(warned) == 1 and str(path) in warned[0].getMessage()  # once per cache
    assert cache.get("during") is None
    cache.set("after", "stored")  # the lock is gone: writes go through again
    assert SqliteSummaryCache(path, memory=0).get("after") == "stored"


def test_writers_queued_behind_a_locked_file_each_give_up_in_time(tmp_path: Path) -> None:
    # four threads write while another connection holds the file: each write waits at most
    # timeout_ms for its turn among this process's writers and timeout_ms for the file, so
    # none holds its request longer than that, whatever order the threads run in
    path = tmp_path / "q.db"
    timeout_s = 0.5
    cache = SqliteSummaryCache(path, memory=0, timeout_ms=timeout_s * 1e3)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    took: list[float] = []

    def write(i: int) -> None:
        start = time.perf_counter()
        cache.set(f"k{i}", "v")
        took.append(time.perf_counter() - start)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=10)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # at most 2 timeouts each; without the turn's own timeout the fourth would wait out the
    # three before it (4 timeouts). The bound between the two leaves a whole timeout of slack
    # for a loaded machine's scheduling.
    assert len(took) == 4 and max(took) < 3 * timeout_s
    assert all(cache.get(f"k{i}") is None for i in range(4))
