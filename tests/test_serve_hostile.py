"""``promptslim serve`` against hostile peers, on real sockets (127.0.0.1 only).

The proxy runs as a real ``promptslim serve`` process (stopped by its PID) with small limits, so
each bound is hit in seconds; its upstream is ``tests/hostile_upstream.py``, a misbehaving
HTTP/1.1 server. What is asserted is what a client or an operator would see: whose answer a
client got, the status and body, what reached the upstream, and the proxy's file descriptors,
memory and ``/metrics`` afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from promptslim.loadsim.processes import stop_process

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from .hostile_upstream import HUGE_BODY, HostileUpstream
from .llama_server import free_port

pytestmark = pytest.mark.slow

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
MAX_CONNECTIONS = 64
KEY = "hostile-test-key"


class ProxyProcess:
    def __init__(self, upstream: str, *extra: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        args = [
            sys.executable, "-m", "promptslim", "serve", "--upstream", upstream,
            "--port", str(self.port), "--timeout", "5", "--log-level", "warning",
            "--header-timeout", str(HEADER_TIMEOUT_S), "--body-timeout", str(BODY_TIMEOUT_S),
            "--max-connections", str(MAX_CONNECTIONS), "--keepalive", "2", *extra,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            args, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("promptslim serve did not start")
            time.sleep(0.1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def metrics(self, **headers: str) -> str:
        return httpx.get(self.url + "/metrics", headers=headers, timeout=5).text

    def stop(self) -> None:
        stop_process(self.proc, grace_s=15)


@pytest.fixture(scope="module")
def upstream() -> Iterator[HostileUpstream]:
    with HostileUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream: HostileUpstream) -> Iterator[ProxyProcess]:
    p = ProxyProcess(upstream.url, "--no-pipeline")
    try:
        yield p
    finally:
        p.stop()


def _body(token: str, *, stream: bool = False) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": token}]}


def _chat(proxy: ProxyProcess, token: str, mode: str = "ok", **kw: Any) -> Any:
    headers = {"X-Hostile": mode, **kw.pop("headers", {})}
    return httpx.post(
        proxy.url + "/v1/chat/completions", json=_body(token, stream=kw.pop("stream", False)),
        headers=headers, timeout=10, **kw,
    )  # fmt: skip


def _raw(port: int, data: bytes, *, wait_s: float = 5.0) -> bytes:
    """Send ``data`` on a fresh connection; everything read until the server closes it (or
    ``wait_s`` passes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        sock.sendall(data)
        got = b""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                part = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not part:
                break
            got += part
        return got


def _settle(proxy: ProxyProcess, at_most: int, *, within_s: float = 10.0) -> int:
    """Wait until the proxy holds at most ``at_most`` file descriptors; the last count."""
    deadline = time.monotonic() + within_s
    while (n := proxy.fds()) > at_most and time.monotonic() < deadline:
        time.sleep(0.1)
    return n


def _requests_total(metrics: str, status: int) -> int:
    found = re.search(
        rf'promptslim_requests_total{{route="chat",status="{status}"}} (\d+)', metrics
    )
    return int(found.group(1)) if found else 0


# ---------------------------------------------------------------- hostile upstream


async def _one(client: Any, url: str, token: str, mode: str) -> str:
    r = await client.post(url, json=_body(token), headers={"X-Hostile": mode})
    assert r.status_code == 200, r.text
    return str(r.json()["choices"][0]["message"]["content"])


def test_no_answer_reaches_another_client_after_desync_attempts(
    proxy: ProxyProcess, upstream: HostileUpstream
) -> None:
    async def run() -> list[tuple[str, str]]:
        gate = asyncio.Semaphore(8)
        clients = [httpx.AsyncClient(timeout=10) for _ in range(8)]

        async def one(i: int) -> tuple[str, str]:
            token = f"client-{i}"
            async with gate:  # every third request tries to smuggle a second response
                got = await _one(clients[i % 8], proxy.url + "/v1/chat/completions", token,
                                 "desync" if i % 3 == 0 else "ok")  # fmt: skip
            return token, got

        try:
            return await asyncio.gather(*(one(i) for i in range(1000)))
        finally:
            for c in clients:
                await c.aclose()

    answers = asyncio.run(run())
    assert all(got == f"answer for {token}" for token, got in answers)


def test_a_cookie_the_upstream_set_for_one_client_never_goes_up_with_another(
    proxy: ProxyProcess, upstream: HostileUpstream
) -> None:
    assert _chat(proxy, "alice", "set-cookie").status_code == 200
    for i in range(3):  # other clients, with no cookie of their own
        assert _chat(proxy, f"bob-{i}").status_code == 200
        assert "cookie" not in upstream.headers[-1]
    # a client's own cookie is the client's: it goes on as it came
    assert _chat(proxy, "carol", headers={"Cookie": "mine=1"}).status_code == 200
    assert upstream.headers[-1]["cookie"] == "mine=1"


def test_a_stream_cut_mid_event_ends_with_an_error_event_of_its_own(proxy: ProxyProcess) -> None:
    r = _chat(proxy, "cut", "mid-close", stream=True)
    assert r.status_code == 200
    assert b"partialdata" not in r.content
    events = [e for e in r.content.split(b"\n\n") if e.startswith(b'data: {"error"')]
    assert len(events) == 1
    assert json.loads(events[0][6:])["error"]["type"] == "upstream_error"


@pytest.mark.parametrize(
    ("mode", "stream"),
    [("bad-chunk", True), ("bare-lf", False), ("short", False), ("both", False),
     ("huge-header", False), ("huge-header", True), ("stall", True)],
)  # fmt: skip
def test_a_broken_upstream_gives_a_clean_answer_counted_as_sent(
    proxy: ProxyProcess, mode: str, stream: bool
) -> None:
    before = proxy.metrics()
    try:
        r = _chat(proxy, f"t-{mode}", mode, stream=stream)
        status, content = r.status_code, r.content
    except httpx.RemoteProtocolError:  # a plain body cut short: the connection closed early
        status, content = 502, b""
    after = proxy.metrics()
    assert status in (200, 502, 504)
    if status == 200 and stream:  # headers were gone: the failure is an event of its own
        assert b'\n\ndata: {"error"' in content or content.startswith(b'data: {"error"')
    elif status == 200:
        assert json.loads(content)["choices"][0]["message"]["content"] == f"answer for t-{mode}"
    else:
        assert content == b"" or "upstream" in json.loads(content)["error"]["type"]
    assert _requests_total(after, status) == _requests_total(before, status) + 1
    assert httpx.get(proxy.url + "/healthz", timeout=5).status_code == 200


def test_a_huge_upstream_body_is_relayed_not_held(proxy: ProxyProcess) -> None:
    start_rss = proxy.rss_mb()
    size = 0
    with httpx.stream("POST", proxy.url + "/v1/chat/completions", json=_body("big"),
                      headers={"X-Hostile": "huge-body"}, timeout=30) as r:  # fmt: skip
        assert r.status_code == 200
        for chunk in r.iter_raw():
            size += len(chunk)
    assert size == HUGE_BODY
    assert proxy.rss_mb() - start_rss < 64


# ---------------------------------------------------------------- hostile clients


def test_slowloris_connections_are_closed_and_capped(proxy: ProxyProcess) -> None:
    baseline = _settle(proxy, 0, within_s=0)
    socks = []
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        s.sendall(b"P")
        socks.append(s)
    time.sleep(0.3)  # the connections over the cap are closed on the proxy's next loop turns
    held = proxy.fds()
    closed = 0
    deadline = time.monotonic() + HEADER_TIMEOUT_S + 4
    for s in socks:  # one more header byte each, until the proxy closes them
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            s.sendall(b"O")
            closed += s.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            closed += 1  # closed by the cap at once: the proxy reset it
        except TimeoutError:
            pass  # still open: counted as not closed
        s.close()
    assert held <= baseline + MAX_CONNECTIONS + 8
    assert closed == 200
    assert _settle(proxy, baseline + 4) <= baseline + 4
    assert "header_timeout" in proxy.metrics() and "connection_cap" in proxy.metrics()
    assert _chat(proxy, "after").status_code == 200


@pytest.mark.parametrize(
    "headers",
    [b"X-Big: " + b"a" * (10 * 1024 * 1024) + b"\r\n", b"a: b\r\n" * 100_000],
    ids=["10MB-header", "100k-headers"],
)
def test_oversized_header_blocks_are_refused(proxy: ProxyProcess, headers: bytes) -> None:
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + headers
    try:
        got = _raw(proxy.port, request + b"Content-Length: 2\r\n\r\n{}")
    except (BrokenPipeError, ConnectionResetError):
        got = b""  # refused while still sending
    assert not got.startswith(b"HTTP/1.1 200")
    assert got == b"" or got.startswith(b"HTTP/1.1 400")
    assert _chat(proxy, "after").status_code == 200


def test_too_many_headers_get_431(proxy: ProxyProcess) -> None:
    many = b"".join(b"x-h%d: v\r\n" % i for i in range(150))
    got = _raw(proxy.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
    assert got.startswith(b"HTTP/1.1 431")


def test_a_body_sent_too_slowly_gets_408(proxy: ProxyProcess) -> None:
    start = time.monotonic()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
    got = _raw(proxy.port, head + b'{"model": "', wait_s=BODY_TIMEOUT_S + 5)
    assert got.startswith(b"HTTP/1.1 408")
    assert time.monotonic() - start < BODY_TIMEOUT_S + 4


@pytest.mark.parametrize(
    "path",
    ["/v1/models/..%2f..%2f..%2fetc%2fpasswd", "/v1/models/%2e%2e/%2e%2e/etc/passwd",
     "/v1/models/a/../../../etc/passwd", "/v1/models/..%5c..%5cetc%5cpasswd",
     "/v1/models/%252e%252e%252fetc%252fpasswd", "/v1/models/x%00y", "/v1/models//etc/passwd"],
)  # fmt: skip
def test_paths_that_leave_the_upstream_base_are_400(
    proxy: ProxyProcess, upstream: HostileUpstream, path: str
) -> None:
    seen = len(upstream.requests)
    got = _raw(proxy.port, f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s\r\n"
               "Connection: close\r\n\r\n".encode())  # fmt: skip
    assert got.startswith(b"HTTP/1.1 400"), got[:200]
    assert upstream.requests[seen:] == []


def test_a_model_id_with_slashes_is_forwarded_below_the_base(
    proxy: ProxyProcess, upstream: HostileUpstream
) -> None:
    seen = len(upstream.requests)
    httpx.get(proxy.url + "/v1/models/meta-llama/Llama-3.1-8B", timeout=5)
    assert upstream.requests[seen:] == ["GET /v1/models/meta-llama/Llama-3.1-8B HTTP/1.1"]


def test_hop_by_hop_headers_stop_at_the_proxy(
    proxy: ProxyProcess, upstream: HostileUpstream
) -> None:
    r = _chat(proxy, "hop", headers={
        "X-Hostile": "ok", "Connection": "keep-alive, X-Secret", "X-Secret": "1",
        "Keep-Alive": "timeout=5", "TE": "trailers", "Proxy-Authorization": "Basic x",
        "Authorization": "Bearer upstream-key",
    })  # fmt: skip
    assert r.status_code == 200
    sent = upstream.headers[-1]
    for name in ("x-secret", "keep-alive", "te", "proxy-authorization"):
        assert name not in sent
    assert sent["authorization"] == "Bearer upstream-key"


def test_pipelined_requests_and_http_1_0_are_answered_in_order(proxy: ProxyProcess) -> None:
    def post(token: str, version: str = "1.1") -> bytes:
        body = json.dumps(_body(token)).encode()
        return (f"POST /v1/chat/completions HTTP/{version}\r\nHost: x\r\nContent-Type: "
                f"application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body  # fmt: skip

    got = _raw(proxy.port, post("first") + post("second") + post("third", "1.0"))
    answers = re.findall(rb"answer for (\w+)", got)
    assert answers == [b"first", b"second", b"third"]


def test_a_client_that_leaves_cancels_its_upstream_request_and_counts_as_499(
    proxy: ProxyProcess, upstream: HostileUpstream
) -> None:
    before_closed, before = upstream.client_closed, proxy.metrics()
    body = json.dumps(_body("leaving")).encode()
    with socket.create_connection(("127.0.0.1", proxy.port)) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Hostile: hold\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip
        time.sleep(0.5)
    deadline = time.monotonic() + 3  # well before the proxy's 5 s upstream timeout
    while upstream.client_closed == before_closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert upstream.client_closed == before_closed + 1
    time.sleep(0.2)
    after = proxy.metrics()
    assert _requests_total(after, 499) == _requests_total(before, 499) + 1
    assert _requests_total(after, 500) == _requests_total(before, 500)


def test_a_trailing_slash_is_not_redirected_to_the_clients_host(proxy: ProxyProcess) -> None:
    got = _raw(proxy.port, b"POST /v1/chat/completions/ HTTP/1.1\r\nHost: evil.example\r\n"
               b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")  # fmt: skip
    assert not got.startswith(b"HTTP/1.1 3")
    assert b"evil.example" not in got


def test_a_thousand_bad_requests_leave_descriptors_and_memory_flat(proxy: ProxyProcess) -> None:
    bad = [
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{oops",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n[1]",
        b"GET /v1/models/..%2f..%2fetc HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"h%d: v\r\n" % i for i in range(120)) + b"\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n",
        b"BREW /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",  # a TLS hello on the plain port
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n"
        + b"[" * 20 + b"]" * 20,
    ]  # fmt: skip

    # each asks to close after its answer, so a burst does not wait out keep-alive
    bad = [b.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n", 1) for b in bad]

    def burst(n: int) -> None:
        for i in range(n):
            with contextlib.suppress(OSError):
                _raw(proxy.port, bad[i % len(bad)], wait_s=2)

    burst(200)  # warm: allocator pools and caches reach their working size
    fds, rss = _settle(proxy, 10**6, within_s=0), proxy.rss_mb()
    burst(1000)
    assert _settle(proxy, fds + 2) <= fds + 2
    assert proxy.rss_mb() - rss < 20
    assert _chat(proxy, "still-fine").status_code == 200


# ---------------------------------------------------------------- the pipeline's time budget


def test_past_its_time_budget_the_original_request_goes_on(upstream: HostileUpstream) -> None:
    p = ProxyProcess(upstream.url, "--no-warm-up", "--pipeline-timeout", "0.000001")
    try:
        body = _body("original words stay")
        r = httpx.post(p.url + "/v1/chat/completions", json=body,
                       headers={"X-PromptSlim-Report": "1"}, timeout=30)  # fmt: skip
        assert r.status_code == 200
        assert r.json()["promptslim"]["pipeline"] == "timeout"
        assert "promptslim_pipeline_timeouts_total 1" in p.metrics()
    finally:
        p.stop()


def test_metrics_ask_for_the_key_when_one_is_set(upstream: HostileUpstream) -> None:
    p = ProxyProcess(upstream.url, "--no-pipeline", "--api-key-env", "PS_KEY", env={"PS_KEY": KEY})
    try:
        assert httpx.get(p.url + "/metrics", timeout=5).status_code == 401
        assert "promptslim_requests_total" in p.metrics(**{"X-PromptSlim-Key": KEY})
        assert httpx.get(p.url + "/healthz", timeout=5).status_code == 200
    finally:
        p.stop()
