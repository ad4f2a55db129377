"""TTFT added by ``promptslim serve`` (pipeline disabled), at 1 and 100 concurrent streams.

Three processes on 127.0.0.1: a seam upstream (this script with ``--seam PORT``: a Starlette
app whose streams have known timings: first chunk after ``--ttft-ms``, then ``--chunks`` more
every ``--itl-ms``), the proxy (``python -m promptslim serve --no-pipeline``), and the load
generator (this process: closed-loop workers on one pooled HTTP/1.1 client, httpx's own
transport: see ``new_client``).

Direct and proxied requests are measured side by side by the same client: at 1 stream they
alternate request by request (the order flipped each pair); at 100 streams, whole rounds of
100 concurrent streams alternate (a mixed round would be 50 + 50, not 100 concurrent).

TTFT: client clock, request sent → first content chunk received. ``added_ttft_pXX_ms`` is
the proxied TTFT percentile minus the direct one, at each concurrency; the top-level keys are
the one-stream figures. Also reported:

- ``relay_*``: the first chunk's trip from the moment it left the seam (a CLOCK_MONOTONIC
  stamp inside it) to the client, both paths;
- ``proxy_side_ms``: the proxy's own clock (its ``X-PromptSlim-Report`` figures; the header is
  sent on both paths, the seam ignores it): ``forward`` (request in the proxy's handler →
  upstream request sent) and ``first_relay`` (first upstream chunk in the proxy's hands →
  written to the client's socket). What the client sees beyond these two is HTTP parsing in
  the server and the httpx transport, the two extra loopback hops, and waiting for a CPU;
- ``cpu``: CPU ms per request of each process (``/proc``; Linux), how busy the whole machine
  was (other tenants included), and ``queueing_estimate_ms`` = concurrency × the proxy's CPU
  per request / cores. With every core busy, a closed loop's cycle time is the CPU work in
  flight divided by the cores (Little's law), so this is about what the proxy's own CPU work
  costs each stream in waiting, when client, seam and proxy share the cores. When the added
  TTFT at 100 streams is of that order, it is CPU queueing, not relay delay.

On a host with cores to spare, ``--workers N`` (proxy processes: ``serve --workers``),
``--seam-workers N`` and ``--clients N`` (load-generating processes for the 100-stream level,
each with its share of the streams, every round started together through a barrier) give each
side its own cores: one process of each saturates a core at 100 of these short streams (~1,600
requests a second). CPU figures then cover every process of a side.

Goals, at one stream (the top-level ``added_ttft_*`` keys): added_ttft_p50_ms <= 2,
added_ttft_p99_ms <= 5; errors == 0 at every level.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import emit, machine, parser
from proxy_report import level_summary, proxy_table
from proxy_seam import run_seam
from proxy_support import (
    CpuMeter,
    free_port,
    self_cpu_ms,
    stop,
    wait_ready,
)

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- load generation


BODY = {"model": "seam", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
BODY_BYTES = json.dumps(BODY).encode()
HEADERS = {"content-type": "application/json", "X-PromptSlim-Report": "1"}
TIMEOUTS = {"connect": 30.0, "read": 30.0, "write": 30.0, "pool": 30.0}


@dataclass
class Samples:
    """One path's measurements at one concurrency (ms)."""

    ttft: list[float] = field(default_factory=list)
    relay: list[float] = field(default_factory=list)
    forward: list[float] = field(default_factory=list)  # proxy clock, proxied path only
    first_relay: list[float] = field(default_factory=list)
    requests: int = 0
    errors: int = 0

    def merge(self, other: Samples) -> None:
        for name in ("ttft", "relay", "forward", "first_relay"):
            getattr(self, name).extend(getattr(other, name))
        self.requests += other.requests
        self.errors += other.errors


async def one(client: Any, url: str, into: Samples) -> None:
    """One streamed request; its TTFT, relay time and (proxied) the proxy's own figures."""
    import httpx

    into.requests += 1
    start = time.monotonic_ns()
    request = httpx.Request(
        "POST", url, content=BODY_BYTES, headers=HEADERS, extensions={"timeout": TIMEOUTS}
    )
    try:
        resp = await client.handle_async_request(request)
        try:
            if resp.status_code != 200:
                into.errors += 1
                return
            first: tuple[float, float] | None = None
            tail = b""
            async for chunk in resp.aiter_raw():
                if first is None:
                    now = time.monotonic_ns()
                    line = chunk.split(b"\n", 1)[0]
                    sent = json.loads(line[6:])["sent_ns"]
                    first = ((now - start) / 1e6, (now - sent) / 1e6)
                tail = tail[-4096:] + chunk
        finally:
            await resp.aclose()
    except Exception:  # noqa: BLE001  (any failure is an error to count)
        into.errors += 1
        return
    if first is None:
        into.errors += 1
        return
    into.ttft.append(first[0])
    into.relay.append(first[1])
    for line in tail.split(b"\n"):
        if b'"promptslim"' in line:  # the proxy's report event (absent on the direct path)
            timing = json.loads(line[6:])["promptslim"]["timing_ms"]
            if timing.get("forward") is not None and timing.get("first_relay") is not None:
                into.forward.append(timing["forward"])
                into.first_relay.append(timing["first_relay"])


async def closed_loop(client: Any, url: str, into: Samples, *, concurrency: int, n: int) -> None:
    """``concurrency`` workers, each starting its next request when its last one ends."""
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await one(client, url, into)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def new_client(streams: int) -> Any:
    """The load generator's client: httpx's pooled transport (httpcore), below httpx's client
    layer, which adds CPU per request that is the generator's, not the proxy's."""
    import httpx

    connections = 2 * streams + 8
    # idle connections dropped well before the servers' keep-alive (5 s): with equal times a
    # CPU-bound client reused connections just as the server closed them (reset: ReadError)
    limits = httpx.Limits(
        max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=1.0
    )
    return httpx.AsyncHTTPTransport(limits=limits)


async def run_rounds(
    client: Any,
    urls: dict[str, str],
    got: dict[str, Samples],
    *,
    conc: int,
    n: int,
    rounds: int,
    barrier: Any = None,
) -> None:
    """One concurrency level: ``rounds`` rounds alternating the paths. With ``barrier`` (one
    of several client processes), every process starts each path's round together."""
    for r in range(rounds):
        if conc == 1:
            for i in range(n):
                order = list(urls) if (r + i) % 2 == 0 else list(reversed(urls))
                for path in order:
                    await one(client, urls[path], got[path])
            continue
        order = list(urls) if r % 2 == 0 else list(reversed(urls))
        for path in order:
            if barrier is not None:
                await asyncio.to_thread(barrier.wait)
            await closed_loop(client, urls[path], got[path], concurrency=conc, n=n)


def client_process(
    urls: dict[str, str], conc: int, n: int, rounds: int, barrier: Any, results: Any
) -> None:
    """One of ``--clients`` load-generating processes: its share of a level's streams, in
    step with the others; puts its samples and the CPU its rounds used on ``results``."""

    async def go() -> tuple[dict[str, Samples], float]:
        client = new_client(conc)
        try:
            for url in urls.values():
                await one(client, url, Samples())
            got = {path: Samples() for path in urls}
            before = self_cpu_ms()
            await run_rounds(client, urls, got, conc=conc, n=n, rounds=rounds, barrier=barrier)
            return got, self_cpu_ms() - before
        finally:
            await client.aclose()

    got, cpu_ms = asyncio.run(go())
    results.put(({path: dataclasses.asdict(x) for path, x in got.items()}, cpu_ms))


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal whole shares."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def in_processes(
    urls: dict[str, str], conc: int, n: int, rounds: int, processes: int
) -> tuple[dict[str, Samples], float]:
    """A concurrency level run by ``processes`` client processes (spawned: each has its own
    interpreter and event loop); their samples merged, and the CPU they reported."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=client_process, args=(urls, c, m, rounds, barrier, results))
        for c, m in zip(shares(conc, processes), shares(n, processes), strict=True)
    ]
    for proc in procs:
        proc.start()
    got = {path: Samples() for path in urls}
    cpu_ms = 0.0
    try:
        for _ in procs:
            part, used = results.get(timeout=600)
            cpu_ms += used
            for path, fields in part.items():
                got[path].merge(Samples(**fields))
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return got, cpu_ms


async def measure(
    urls: dict[str, str],
    per_round: dict[int, int],
    rounds: int,
    seam: int,
    proxy: int,
    clients: int = 1,
) -> tuple[dict[int, dict[str, Samples]], dict[int, dict[str, Any]]]:
    """Both paths, interleaved, through one client; levels above one stream through
    ``clients`` processes when that is more than one."""
    data: dict[int, dict[str, Samples]] = {}
    cpu: dict[int, dict[str, Any]] = {}
    client = new_client(max(per_round))
    try:
        for url in urls.values():  # warm each path's connection and code
            await one(client, url, Samples())
        for conc, n in per_round.items():
            meter = CpuMeter(seam, proxy)
            used = 0.0
            if conc > 1 and clients > 1:
                got, used = await asyncio.to_thread(in_processes, urls, conc, n, rounds, clients)
            else:
                got = {path: Samples() for path in urls}
                await run_rounds(client, urls, got, conc=conc, n=n, rounds=rounds)
            data[conc] = got
            total = sum(s.requests for s in got.values())
            cpu[conc] = meter.report(
                requests=total,
                proxied=got["proxy"].requests,
                concurrency=conc,
                client_processes_ms=used,
            )
    finally:
        await client.aclose()
    return data, cpu


def parse_args() -> argparse.Namespace:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seam", type=int, metavar="PORT", help=argparse.SUPPRESS)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=None, help="alternating direct/proxy rounds")
    # on a host with cores to spare: one process of each kind saturates a core at 100 streams
    # (~1 ms of CPU per request each, ~1,600 requests/s), and then it, not the proxy's relay,
    # sets what the streams wait
    p.add_argument(
        "--workers", type=int, default=1, metavar="N", help="proxy processes (serve --workers)"
    )
    p.add_argument(
        "--seam-workers", type=int, default=1, metavar="N", help="seam upstream processes"
    )
    p.add_argument(
        "--clients",
        type=int,
        default=1,
        metavar="N",
        help="load-generating processes for the 100-stream level",
    )
    p.add_argument(
        "--upstream-keepalive",
        choices=("auto", "on", "off"),
        default="auto",
        help="the proxy's upstream connection reuse (serve --upstream-keepalive)",
    )
    p.add_argument("--upstream-spares", type=int, default=None, metavar="N",
                   help="upstream connections the proxy opens ahead (serve --upstream-spares)")  # fmt: skip
    args = p.parse_args()
    for name in ("workers", "seam_workers", "clients"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def run_both(
    args: argparse.Namespace, per_round: dict[int, int], rounds: int
) -> tuple[dict[int, dict[str, Samples]], dict[int, dict[str, Any]]]:
    """Start the seam and the proxy in front of it, measure both paths, stop both."""
    seam_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    seam_cmd = [sys.executable, __file__, "--seam", str(seam_port), "--ttft-ms", str(args.ttft_ms),
                "--chunks", str(args.chunks), "--itl-ms", str(args.itl_ms),
                "--seam-workers", str(args.seam_workers)]  # fmt: skip
    # admission limits far above the streams sent, in every worker (each admits its share)
    limit = str(256 * args.workers)
    proxy_cmd = [sys.executable, "-m", "promptslim", "serve", "--no-pipeline",
                 "--upstream", f"http://127.0.0.1:{seam_port}/v1", "--port", str(proxy_port),
                 "--max-concurrency", limit, "--max-queue", limit, "--log-level", "warning",
                 "--workers", str(args.workers),
                 "--upstream-keepalive", args.upstream_keepalive]  # fmt: skip
    if args.upstream_spares is not None:
        proxy_cmd += ["--upstream-spares", str(args.upstream_spares)]
    seam = subprocess.Popen(seam_cmd, env=env, cwd=ROOT)
    proxy = subprocess.Popen(proxy_cmd, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        wait_ready(f"http://127.0.0.1:{seam_port}/v1/models", seam)
        wait_ready(f"http://127.0.0.1:{proxy_port}/healthz", proxy)
        urls = {
            "direct": f"http://127.0.0.1:{seam_port}/v1/chat/completions",
            "proxy": f"http://127.0.0.1:{proxy_port}/v1/chat/completions",
        }
        return asyncio.run(
            measure(urls, per_round, rounds, seam.pid, proxy.pid, clients=args.clients)
        )
    finally:
        stop(proxy)
        stop(seam)


def main() -> None:
    args = parse_args()
    if args.seam:
        run_seam(
            args.seam, ttft_ms=args.ttft_ms, chunks=args.chunks, itl_ms=args.itl_ms,
            workers=args.seam_workers,
        )  # fmt: skip
        return
    # short rounds, many of them: both paths see the same machine load (others' jobs too)
    rounds = args.rounds or (4 if args.quick else 8)
    per_round = {1: 30 if args.quick else 75, 100: 150 if args.quick else 750}
    started = time.monotonic()
    data, cpu = run_both(args, per_round, rounds)
    by_conc = {str(conc): level_summary(paths, cpu[conc]) for conc, paths in data.items()}
    result = {
        "benchmark": "bench_proxy",
        "quick": args.quick,
        # the goals are the one-stream figures: at 100 streams on two shared cores the added
        # TTFT is CPU queueing (see ``cpu`` and ``queueing_estimate_ms`` per level)
        "added_ttft_p50_ms": by_conc["1"]["added_ttft_p50_ms"],
        "added_ttft_p99_ms": by_conc["1"]["added_ttft_p99_ms"],
        "errors": sum(c["errors"] for c in by_conc.values()),
        "by_concurrency": by_conc,
        "seam": {"ttft_ms": args.ttft_ms, "chunks": args.chunks, "itl_ms": args.itl_ms},
        "processes": {"proxy": args.workers, "seam": args.seam_workers, "clients": args.clients},
        "upstream_keepalive": args.upstream_keepalive,
        "rounds": rounds,
        "requests_per_round": per_round,
        "interleaving": {"1": "request by request", "100": "round by round"},
        "wall_s": time.monotonic() - started,
        "load_average": os.getloadavg(),
        "machine": machine(),
    }
    emit(result, args, proxy_table(by_conc))


if __name__ == "__main__":
    main()
