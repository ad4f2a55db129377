"""TTFT added by ``promptslim serve`` (pipeline disabled), at 1 and 100 concurrent streams.

Three processes on 127.0.0.1: a seam upstream (this script with ``--seam PORT``: a Starlette
app whose streams have known timings: first chunk after ``--ttft-ms``, then ``--chunks`` more
every ``--itl-ms``), the proxy (``python -m promptslim serve --no-pipeline``), and the load
generator (this process: closed-loop httpx clients). The same requests go straight to the
seam and through the proxy, in alternating rounds so both paths see the same machine load.

TTFT: client clock, request sent → first content chunk received. ``added_ttft_pXX_ms`` is
the proxied TTFT percentile minus the direct one, at each concurrency; the top-level keys are
the worse of the two concurrencies. Also reported: ``relay_*``, the first chunk's trip from the
moment it left the seam (a CLOCK_MONOTONIC stamp inside it) to the client, both paths.

Goals (issue 12): added_ttft_p50_ms <= 1, added_ttft_p99_ms <= 5, errors == 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from common import emit, machine, parser, summary

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- the seam upstream


def run_seam(port: int, *, ttft_ms: float, chunks: int, itl_ms: float) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    def sse(text: str) -> bytes:
        obj = {"id": "c", "object": "chat.completion.chunk", "model": "seam",
               "choices": [{"index": 0, "delta": {"content": text}}], "sent_ns": time.monotonic_ns()}  # fmt: skip
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    async def stream() -> Any:
        await asyncio.sleep(ttft_ms / 1e3)
        yield sse("Hello")
        for i in range(chunks):
            await asyncio.sleep(itl_ms / 1e3)
            yield sse(f" t{i}")
        yield b"data: [DONE]\n\n"

    async def chat(request: Request) -> Response:
        await request.body()
        return StreamingResponse(stream(), media_type="text/event-stream")

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "seam"}]})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                            Route("/v1/models", models)])  # fmt: skip
    uvicorn.run(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, backlog=4096
    )


# ---------------------------------------------------------------- load generation


BODY = {"model": "seam", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def one(client: Any, url: str) -> tuple[float, float] | None:
    start = time.monotonic_ns()
    try:
        async with client.stream("POST", url, json=BODY) as resp:
            if resp.status_code != 200:
                return None
            first: tuple[float, float] | None = None
            async for chunk in resp.aiter_raw():
                if first is None:
                    now = time.monotonic_ns()
                    line = chunk.split(b"\n", 1)[0]
                    sent = json.loads(line[6:])["sent_ns"]
                    first = ((now - start) / 1e6, (now - sent) / 1e6)
            return first
    except Exception:  # noqa: BLE001  (any failure is an error to count)
        return None


async def run_load(url: str, *, concurrency: int, requests: int) -> dict[str, Any]:
    import httpx

    limits = httpx.Limits(
        max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8
    )
    ttft: list[float] = []
    relay: list[float] = []
    errors = 0
    remaining = requests
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        await one(client, url)  # warm the connection pool path

        async def worker() -> None:
            nonlocal remaining, errors
            while remaining > 0:
                remaining -= 1
                got = await one(client, url)
                if got is None:
                    errors += 1
                else:
                    ttft.append(got[0])
                    relay.append(got[1])

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"ttft": ttft, "relay": relay, "errors": errors}


# ---------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout_s} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process we started, by its PID only."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seam", type=int, metavar="PORT", help=argparse_hidden())
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=None, help="alternating direct/proxy rounds")
    args = p.parse_args()
    if args.seam:
        run_seam(args.seam, ttft_ms=args.ttft_ms, chunks=args.chunks, itl_ms=args.itl_ms)
        return
    rounds = args.rounds or (2 if args.quick else 4)
    per_round = {1: 60 if args.quick else 150, 100: 400 if args.quick else 1500}

    seam_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    seam_cmd = [sys.executable, __file__, "--seam", str(seam_port), "--ttft-ms", str(args.ttft_ms),
                "--chunks", str(args.chunks), "--itl-ms", str(args.itl_ms)]  # fmt: skip
    proxy_cmd = [sys.executable, "-m", "promptslim", "serve", "--no-pipeline",
                 "--upstream", f"http://127.0.0.1:{seam_port}/v1", "--port", str(proxy_port),
                 "--max-concurrency", "256", "--max-queue", "256", "--log-level", "warning"]  # fmt: skip
    seam = subprocess.Popen(seam_cmd, env=env, cwd=ROOT)
    proxy = subprocess.Popen(proxy_cmd, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    started = time.monotonic()
    try:
        wait_ready(f"http://127.0.0.1:{seam_port}/v1/models", seam)
        wait_ready(f"http://127.0.0.1:{proxy_port}/healthz", proxy)
        urls = {
            "direct": f"http://127.0.0.1:{seam_port}/v1/chat/completions",
            "proxy": f"http://127.0.0.1:{proxy_port}/v1/chat/completions",
        }
        data: dict[int, dict[str, dict[str, Any]]] = {}
        for conc, n in per_round.items():
            data[conc] = {k: {"ttft": [], "relay": [], "errors": 0} for k in urls}
            for _ in range(rounds):
                for path, url in urls.items():
                    got = asyncio.run(run_load(url, concurrency=conc, requests=n))
                    acc = data[conc][path]
                    acc["ttft"] += got["ttft"]
                    acc["relay"] += got["relay"]
                    acc["errors"] += got["errors"]
    finally:
        stop(proxy)
        stop(seam)

    by_conc: dict[str, Any] = {}
    for conc, paths in data.items():
        d, x = summary(paths["direct"]["ttft"]), summary(paths["proxy"]["ttft"])
        by_conc[str(conc)] = {
            "added_ttft_p50_ms": x["p50"] - d["p50"],
            "added_ttft_p99_ms": x["p99"] - d["p99"],
            "ttft_direct_ms": d,
            "ttft_proxy_ms": x,
            "relay_direct_ms": summary(paths["direct"]["relay"]),
            "relay_proxy_ms": summary(paths["proxy"]["relay"]),
            "errors": paths["direct"]["errors"] + paths["proxy"]["errors"],
        }
    result = {
        "benchmark": "bench_proxy",
        "quick": args.quick,
        "added_ttft_p50_ms": max(c["added_ttft_p50_ms"] for c in by_conc.values()),
        "added_ttft_p99_ms": max(c["added_ttft_p99_ms"] for c in by_conc.values()),
        "errors": sum(c["errors"] for c in by_conc.values()),
        "goals": {"added_ttft_p50_ms": 1.0, "added_ttft_p99_ms": 5.0, "errors": 0},
        "by_concurrency": by_conc,
        "seam": {"ttft_ms": args.ttft_ms, "chunks": args.chunks, "itl_ms": args.itl_ms},
        "rounds": rounds,
        "requests_per_round": per_round,
        "wall_s": time.monotonic() - started,
        "load_average": os.getloadavg(),
        "machine": machine(),
    }
    lines = ["conc  path    TTFT p50    p99   relay p50    p99   (ms, client clock)"]
    for conc, c in by_conc.items():
        for path in ("direct", "proxy"):
            t, r = c[f"ttft_{path}_ms"], c[f"relay_{path}_ms"]
            lines.append(
                f"{conc:>4}  {path:<6} {t['p50']:8.2f} {t['p99']:7.2f} {r['p50']:10.2f} {r['p99']:7.2f}"
            )
        lines.append(
            f"{conc:>4}  added  {c['added_ttft_p50_ms']:8.2f} {c['added_ttft_p99_ms']:7.2f}   errors {c['errors']}"
        )
    emit(result, args, "\n".join(lines))


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
