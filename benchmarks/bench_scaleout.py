"""Scale-out: N ``promptslim serve`` replicas sharing one Redis, against each on its own.

N = 1, 2 and 4 (``--quick``: 1 without Redis and 2, a shorter stream) ``promptslim serve``
processes on 127.0.0.1 (stand-ins for hosts, each with its own local caches) run one pipeline
config (history + retrieval + tools) whose summary cache and tool store are ``redis://`` URLs,
and whose embedding cache is Redis through ``PROMPTSLIM_EMBEDDING_CACHE`` — or, for the
baseline, the local stores only. A client sends a deterministic multi-turn stream (chats that
grow past their history budget, RAG documents drawn from one shared pool, agent turns with large
JSON tool results) one request at a time, round-robin over the replicas, so one conversation's
turns land on different replicas. The upstream is a seam in this process that answers with the
SHA-256 of the messages it received.

Keys:

- ``cold_share``: requests whose replica computed a summary step or an embedding that another
  replica had already computed (from each replica's event log: ``PROMPTSLIM_STATS_FILE``,
  written by ``promptslim.backends.shared_stats`` at exit, attributed by each request's
  send/receive window; the client is sequential, so the windows do not overlap).
- ``p99_pipeline_ms``: the proxy's own pipeline time (its report), cold pass and warm pass
  (the same stream again, each request on the next replica; with one replica every cache is
  warm then, so ``warm_p99_delta_ms_n1`` is what Redis adds to a warm request).
- ``redis_p99_ms``: Redis call latency on loopback from this process alone (``redis_loopback``:
  600-byte summaries, a write and a read each), and as the replicas saw it beside their
  pipelines (per run; it includes waiting for the interpreter lock and the CPU).
- ``identical``: every request's upstream prompt hash equals the N=1 local run's.
- the fault run (N=2 with Redis): Redis stopped a third of the way in and started again at two
  thirds; ``errors`` (non-200 answers) and ``degraded_share`` (requests that fell back).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_proxy import free_port, stop, wait_ready
from common import emit, machine, parser

from promptslim.stats import percentile
from tests.redis_server import RedisServer

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "invoice",
    "order",
    "shipment",
    "refund",
    "ticket",
    "cluster",
    "node",
    "region",
    "latency",
    "quota",
    "budget",
    "release",
    "patch",
    "rollback",
    "schema",
    "index",
    "replica",
]


# ---------------------------------------------------------------- the seam upstream


class _Seam(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
        out = json.dumps({"id": "c", "object": "chat.completion", "model": "seam", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": digest},
             "finish_reason": "stop"}]}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


def start_seam() -> tuple[ThreadingHTTPServer, int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Seam)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, int(server.server_address[1])


# ---------------------------------------------------------------- the stream


def _sentence(c: int, i: int) -> str:
    w = [WORDS[(c * 7 + i * 3 + k) % len(WORDS)] for k in range(14)]
    return f"Turn {i} of case {c}: {' '.join(w)}, id C{c}-{i:03d}, total {c * 100 + i} units."


def body(c: int, turn: int) -> dict[str, Any]:
    """Conversation ``c`` at ``turn``: chat that grows, an agent tool result every third
    turn, RAG documents from a pool every conversation shares."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a support agent."}]
    for i in range(turn):
        messages.append({"role": "user", "content": _sentence(c, i) + " " + _sentence(c + 1, i)})
        if i % 3 == 2:
            arguments = json.dumps({"case": c, "i": i})
            call = {"id": f"call{c}_{i}", "type": "function",
                    "function": {"name": "lookup", "arguments": arguments}}  # fmt: skip
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            rows = [{"id": k, "case": c, "status": WORDS[(k * i) % len(WORDS)], "amount": k * 3}
                    for k in range(60)]  # fmt: skip
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(rows)}
            )
        messages.append({"role": "assistant", "content": f"Noted {_sentence(c, i)}"})
    messages.append({"role": "user", "content": f"What is the status of case {c} now?"})
    docs = [" ".join(_sentence(d, k) for k in range(6)) for d in range(40)]
    picked = [docs[(c * 5 + turn * 3 + k) % len(docs)] for k in range(8)]
    return {"model": "seam", "messages": messages, "documents": picked}


def stream(conversations: int, turns: int) -> list[dict[str, Any]]:
    return [body(c, t) for t in range(2, turns + 2) for c in range(conversations)]


# ---------------------------------------------------------------- replicas


def config_file(directory: Path, redis_url: str | None) -> Path:
    stages: list[dict[str, Any]] = [{"name": "history"}, {"name": "retrieval"}, {"name": "tools"}]
    if redis_url:
        stages[0]["summary_cache"] = redis_url
        stages[2]["store"] = redis_url
    path = directory / ("redis.json" if redis_url else "local.json")
    path.write_text(json.dumps({"stages": stages}))
    return path


def start_replicas(n: int, cfg: Path, seam: int, redis_url: str | None, stats: Path) -> list[Any]:
    procs = []
    for i in range(n):
        port = free_port()
        env = dict(os.environ, PROMPTSLIM_STATS_FILE=str(stats / f"r{i}"))
        env.pop("PROMPTSLIM_EMBEDDING_CACHE", None)
        if redis_url:
            env["PROMPTSLIM_EMBEDDING_CACHE"] = redis_url
        cmd = [sys.executable, "-m", "promptslim", "serve", "--upstream",
               f"http://127.0.0.1:{seam}/v1", "--port", str(port), "--config", str(cfg),
               "--budget", "900", "--log-level", "warning", "--pipeline-timeout", "10"]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        procs.append((proc, port, i))
    for proc, port, _ in procs:
        wait_ready(f"http://127.0.0.1:{port}/healthz", proc, timeout_s=180)
    return procs


def events_of(stats: Path) -> dict[int, list[tuple[str, str, float]]]:
    out: dict[int, list[tuple[str, str, float]]] = {}
    for path in stats.glob("r*.*.json"):
        replica = int(path.name[1:].split(".")[0])
        data = json.loads(path.read_text())
        out[replica] = [tuple(e) for e in data["events"]]  # type: ignore[misc]
        out.setdefault(-1 - replica, []).append(("stats", json.dumps(data["stats"]), 0.0))
    return out


# ---------------------------------------------------------------- one run


def run(n: int, requests: list[dict[str, Any]], *, redis: RedisServer | None, seam: int,
        fault: bool = False) -> dict[str, Any]:  # fmt: skip
    import httpx

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        url = f"{redis.url}?tenant=bench" if redis else None
        procs = start_replicas(n, config_file(directory, url), seam, url, directory)
        windows: list[tuple[int, float, float]] = []
        pipeline_ms: list[list[float]] = [[], []]
        hashes: list[str] = []
        errors = 0
        try:
            with httpx.Client(timeout=60) as client:
                for pass_ in (0, 1):
                    for i, req in enumerate(requests):
                        if fault and pass_ == 0 and redis and i == len(requests) // 3:
                            redis.stop()
                        if fault and pass_ == 0 and redis and i == 2 * len(requests) // 3:
                            redis.start()
                        proc, port, replica = procs[(i + pass_) % n]
                        t0 = time.time()
                        r = client.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=req,
                                        headers={"X-PromptSlim-Report": "1"})  # fmt: skip
                        windows.append((replica, t0, time.time()))
                        if r.status_code != 200:
                            errors += 1
                            hashes.append("error")
                            continue
                        data = r.json()
                        pipeline_ms[pass_].append(
                            float(data["promptslim"]["timing_ms"]["pipeline"])
                        )
                        if pass_ == 0:
                            hashes.append(data["choices"][0]["message"]["content"])
        finally:
            for proc, _, _ in procs:  # SIGINT: uvicorn re-raises SIGTERM, which skips atexit
                proc.send_signal(signal.SIGINT)
            for proc, _, _ in procs:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    stop(proc)
        events = events_of(directory)
    return summarise(n, windows[: len(requests)], events, pipeline_ms, hashes, errors)


def summarise(n: int, windows: list[tuple[int, float, float]], events: dict[int, Any],
              pipeline_ms: list[list[float]], hashes: list[str],
              errors: int) -> dict[str, Any]:  # fmt: skip
    first: dict[str, int] = {}  # work key -> the replica that computed it first
    timeline = sorted((t, r, kind, key) for r, evs in events.items() if r >= 0
                      for kind, key, t in evs if kind.startswith("computed_"))  # fmt: skip
    cold = degraded = 0
    cursor = 0
    degraded_times = sorted((t, r) for r, evs in events.items() if r >= 0
                            for kind, _, t in evs if kind == "degraded")  # fmt: skip
    for replica, t0, t1 in windows:
        was_cold = False
        while cursor < len(timeline) and timeline[cursor][0] <= t1:
            t, r, _, key = timeline[cursor]
            cursor += 1
            owner = first.setdefault(key, r)
            if t >= t0 and owner != r:
                was_cold = True
        cold += was_cold
        degraded += any(t0 <= t <= t1 and r == replica for t, r in degraded_times)
    redis_p99 = [json.loads(evs[0][1]).get("redis_p99_ms") for r, evs in events.items() if r < 0]
    redis_p99 = [v for v in redis_p99 if v is not None]
    total = len(windows)
    return {
        "replicas": n,
        "requests": total,
        "cold_share": cold / total,
        "p99_pipeline_ms": percentile(pipeline_ms[0], 99) if pipeline_ms[0] else None,
        "warm_p99_pipeline_ms": percentile(pipeline_ms[1], 99) if pipeline_ms[1] else None,
        "redis_p99_ms": max(redis_p99) if redis_p99 else None,
        "errors": errors,
        "degraded_share": degraded / total,
        "hashes": hashes,
    }


def loopback_latency(redis: RedisServer, n: int) -> dict[str, float]:
    """Redis calls from this process alone (no pipeline beside them): the round trip itself."""
    from promptslim.backends.redis_store import RedisSummaryCache
    from promptslim.backends.shared_stats import STORE_STATS

    STORE_STATS.reset()
    cache = RedisSummaryCache(f"{redis.url}?tenant=loopback", memory=1)
    value = "s" * 600  # about a summary's size
    for i in range(n):
        cache.set(f"k{i}", value)
        cache.get(f"k{i - 1}")  # not the one in the one-entry LRU: a Redis read
    stats = STORE_STATS.snapshot()
    return {"p50_ms": stats["redis_p50_ms"], "p99_ms": stats["redis_p99_ms"], "calls": 2 * n}


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    conversations, turns = (5, 3) if args.quick else (12, 10)
    sizes = (1, 2) if args.quick else (1, 2, 4)
    requests = stream(conversations, turns)
    seam_server, seam = start_seam()
    redis = RedisServer().start()
    rows: dict[str, Any] = {}
    try:
        loopback = loopback_latency(redis, 500 if args.quick else 5000)
        for n in sizes:
            for name, store in (("local", None), ("redis", redis)):
                if args.quick and n == 1 and store is not None:
                    continue  # under two minutes: one replica shares with no one
                if store is not None:
                    redis.stop()
                    redis.start()  # empty: each run starts cold
                rows[f"{name}_n{n}"] = run(n, requests, redis=store, seam=seam)
        redis.stop()
        redis.start()
        rows["fault_n2"] = run(2, requests, redis=redis, seam=seam, fault=True)
    finally:
        redis.stop()
        seam_server.shutdown()
    reference = rows["local_n1"]["hashes"]
    result: dict[str, Any] = {"benchmark": "scaleout", "quick": args.quick, "machine": machine(),
                              "conversations": conversations, "turns": turns,
                              "redis_loopback": loopback}  # fmt: skip
    for key, row in rows.items():
        row["identical"] = row.pop("hashes") == reference
        result[key] = row
    top = sizes[-1]
    local4, redis4 = rows[f"local_n{top}"], rows[f"redis_n{top}"]
    result["goals"] = {
        "cold_share_ratio_top": redis4["cold_share"] / local4["cold_share"]
        if local4["cold_share"]
        else None,
        "fault_errors": rows["fault_n2"]["errors"],
        "redis_p99_ms": loopback["p99_ms"],
        "redis_p99_ms_in_replicas": max((r["redis_p99_ms"] or 0.0) for r in rows.values()),
        # one replica, every cache warm: what Redis adds to a warm request (not in --quick)
        "warm_p99_delta_ms_n1": rows["redis_n1"]["warm_p99_pipeline_ms"]
        - rows["local_n1"]["warm_p99_pipeline_ms"]
        if "redis_n1" in rows
        else None,
        "identical": all(r["identical"] for r in rows.values()),
        "top_replicas": top,
    }
    head = "| run | cold_share | p99 ms | warm p99 ms | redis p99 ms | errors | degraded | same |"
    table = [head,
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for key, r in rows.items():
        table.append(f"| {key} | {r['cold_share']:.3f} | {r['p99_pipeline_ms']:.1f} | "
                     f"{r['warm_p99_pipeline_ms']:.1f} | {r['redis_p99_ms'] or 0:.2f} | "
                     f"{r['errors']} | {r['degraded_share']:.2f} | {r['identical']} |")  # fmt: skip
    emit(result, args, "\n".join(table))


if __name__ == "__main__":
    main()
