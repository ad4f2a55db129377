"""``promptslim serve``: the streaming proxy.

Two upstreams, for two purposes:

- the real llama-cpp-python server on SmolLM2 (``tests/llama_server.py``): end to end, a
  slimmed prompt reaches a real model and its answer comes back, streamed and not;
- a small in-test Starlette app with known chunk timings and scripted failures: a seam for
  measuring the proxy's own behaviour (relay latency, 429, 504, error mapping), not a stand-in
  for a model server.

Every server runs on 127.0.0.1, in a thread of this process (uvicorn, its own event loop) or,
for the CLI test, as a subprocess stopped by its PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from promptslim import Budget, Pipeline, Request, Result
from promptslim.serve import ServeConfig, create_app

from .conftest import assert_missing_extra
from .llama_server import free_port, llama_server  # noqa: F401

# ---------------------------------------------------------------- servers in threads


class ThreadServer:
    """uvicorn serving ``app`` on 127.0.0.1 in a daemon thread; bounded start and stop."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False,
            lifespan="on", timeout_graceful_shutdown=2,
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:  # noqa: PYI034
        self.thread.start()
        # start-up includes the pipeline's warm-up: the first one in a process loads models
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class Seam:
    """The in-test upstream. ``X-Seam`` picks the behaviour; it records what it received."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )

    async def models(self, request: HTTPRequest) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "seam", "object": "model"}]})

    async def chat(self, request: HTTPRequest) -> Response:
        raw = await request.body()
        self.bodies.append(raw)
        self.headers.append(dict(request.headers))
        mode = request.headers.get("x-seam", "ok")
        if mode == "500":
            error = {"message": "engine crashed: out of KV cache", "type": "server_error"}
            return JSONResponse({"error": error}, status_code=500)
        if mode == "400":
            error = {"message": "temperature must be <= 2", "type": "invalid_request_error",
                     "param": "temperature", "code": None}  # fmt: skip
            return JSONResponse({"error": error}, status_code=400)
        if mode == "hang":
            await asyncio.sleep(3.0)
        if mode == "hold":
            await asyncio.sleep(float(request.headers.get("x-seam-delay", "0.5")))
        body = json.loads(raw)
        if body.get("stream"):
            gap = float(request.headers.get("x-seam-gap", "0.05"))
            return StreamingResponse(
                self._stream(gap, stall=mode == "stall"), media_type="text/event-stream"
            )
        message = {"role": "assistant", "content": "Hello world"}
        return JSONResponse({
            "id": "c1", "object": "chat.completion", "model": "seam",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        })  # fmt: skip

    async def _stream(self, gap: float, *, stall: bool) -> AsyncIterator[bytes]:
        # the first chunk carries the moment it left (CLOCK_MONOTONIC: one clock per machine)
        yield _sse(
            {
                "choices": [{"index": 0, "delta": {"content": "Hello"}}],
                "sent_ns": time.monotonic_ns(),
            }
        )
        await asyncio.sleep(3.0 if stall else gap)
        yield _sse(
            {
                "choices": [{"index": 0, "delta": {"content": " world"}}],
                "sent_ns": time.monotonic_ns(),
            }
        )
        yield b"data: [DONE]\n\n"


def _sse(obj: dict[str, Any]) -> bytes:
    obj = {"id": "c1", "object": "chat.completion.chunk", "model": "seam", **obj}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _events(raw: bytes) -> list[Any]:
    out: list[Any] = []
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


BODY = {"model": "seam", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def seam() -> Iterator[tuple[Seam, str]]:
    s = Seam()
    with ThreadServer(s.app) as server:
        yield s, server.url + "/v1"


@contextlib.contextmanager
def proxy(
    upstream: str, *, pipeline: Pipeline | None = None, default: bool = True, **options: Any
) -> Iterator[tuple[str, Any]]:
    """A proxy on the seam; yields its base URL and its Proxy object (for its admission)."""
    if pipeline is None and default:
        pipeline = Pipeline.default()
    options.setdefault("upstream_timeout_s", 5.0)
    app = create_app(ServeConfig(upstream=upstream, **options), pipeline=pipeline)
    with ThreadServer(app) as server:
        yield server.url, app.state.proxy


@pytest.fixture(scope="module")
def default_proxy(seam: tuple[Seam, str]) -> Iterator[str]:
    with proxy(seam[1]) as (url, _):
        yield url


# ---------------------------------------------------------------- relay


async def _first_chunk_relay_ms(client: Any, base: str, *, gap_s: float) -> float:
    """ms from the seam's first chunk leaving it to its arrival here; checks it did not wait
    for the second chunk (produced ``gap_s`` later)."""
    start = time.monotonic_ns()
    body = {**BODY, "stream": True}
    headers = {"x-seam-gap": str(gap_s)}
    async with client.stream(
        "POST", base + "/chat/completions", json=body, headers=headers
    ) as resp:
        assert resp.status_code == 200
        assert resp.headers.get("content-encoding") is None
        async for chunk in resp.aiter_raw():
            arrived = time.monotonic_ns()
            first = _events(chunk)[0]
            break
    assert first["choices"][0]["delta"]["content"] == "Hello"
    assert (arrived - start) / 1e9 < gap_s * 0.8  # well before the second chunk existed
    return float((arrived - first["sent_ns"]) / 1e6)


@pytest.mark.asyncio
async def test_first_chunk_relayed_without_waiting_for_the_second(
    seam: tuple[Seam, str], default_proxy: str
) -> None:
    # The goal: the first content chunk reaches the client within 2 ms of leaving the
    # upstream. The client's own read is in both paths, so the proxy's share is what is held
    # to 2 ms: the median through the proxy minus the median straight from the upstream,
    # interleaved so both see the same machine load. On the shared 2-core test machine (load
    # ~7) other processes preempt ours for milliseconds; that only ever adds time, so a round
    # is retried (at most 3) and the quietest round is the one judged.
    rounds: list[float] = []
    async with httpx.AsyncClient(timeout=10) as client:
        await client.post(default_proxy + "/v1/chat/completions", json=BODY)  # warm: tokenizer
        for _ in range(3):
            direct, proxied = [], []
            for _ in range(20):
                direct.append(await _first_chunk_relay_ms(client, seam[1], gap_s=0.2))
                proxied.append(
                    await _first_chunk_relay_ms(client, default_proxy + "/v1", gap_s=0.2)
                )
            rounds.append(statistics.median(proxied) - statistics.median(direct))
            if rounds[-1] <= 2.0:
                break
    added = min(rounds)
    assert added <= 2.0, rounds


@pytest.mark.asyncio
async def test_stream_end_to_end_with_timing_report(default_proxy: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        resp = await client.post(
            default_proxy + "/v1/chat/completions",
            json={**BODY, "stream": True},
            headers={"X-PromptSlim-Report": "1"},
        )
    assert resp.status_code == 200
    timing = resp.headers["server-timing"]
    assert "pipeline;dur=" in timing and "upstream-ttfb;dur=" in timing
    assert "forward;dur=" in timing  # the proxy's own time before the upstream saw it
    assert "stage-" in timing  # one entry per stage of the default pipeline
    events = _events(resp.content)
    assert events[-1] == "[DONE]"
    text = "".join(e["choices"][0]["delta"]["content"] for e in events[:-2])
    assert text == "Hello world"
    report = events[-2]
    assert report["choices"] == [] and report["object"] == "chat.completion.chunk"
    ms = report["promptslim"]["timing_ms"]
    assert ms["first_chunk"] is not None and ms["upstream"] >= ms["upstream_ttfb"] > 0
    # the proxy's own share of the first token's way, on its clock: before the upstream saw
    # the request (here including the default pipeline), and the first chunk's relay
    assert 0 < ms["forward"] < ms["first_chunk"]
    assert ms["pipeline"] <= ms["forward"]
    assert 0 < ms["first_relay"] < ms["upstream"]
    assert report["promptslim"]["request_id"] == resp.headers["x-request-id"]


@pytest.mark.asyncio
async def test_non_stream_report_and_server_timing(default_proxy: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        plain = await client.post(default_proxy + "/v1/chat/completions", json=BODY)
        asked = await client.post(
            default_proxy + "/v1/chat/completions", json=BODY, headers={"X-PromptSlim-Report": "1"}
        )
    assert plain.status_code == 200 and "promptslim" not in plain.json()
    assert plain.json()["choices"][0]["message"]["content"] == "Hello world"
    assert "upstream;dur=" in plain.headers["server-timing"]
    report = asked.json()["promptslim"]
    assert report["pipeline"] == "ok" and report["tokens_in"] == report["tokens_out"] > 0


@pytest.mark.asyncio
async def test_models_proxied_and_health_and_metrics(default_proxy: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        models = await client.get(default_proxy + "/v1/models")
        health = await client.get(default_proxy + "/healthz")
        await client.post(default_proxy + "/v1/chat/completions", json=BODY)
        metrics = await client.get(default_proxy + "/metrics")
    assert models.json()["data"][0]["id"] == "seam"
    assert health.json()["status"] == "ok"
    text = metrics.text
    assert 'promptslim_requests_total{route="chat",status="200"}' in text
    assert 'promptslim_pipeline_seconds_bucket{le="+Inf"}' in text
    assert 'stage="pipeline"' not in text  # the whole run has its own histogram
    assert 'promptslim_stage_seconds_bucket{le="1.5",stage="history"}' in text  # SLO buckets
    for name in ("promptslim_ttft_seconds_count", "promptslim_tokens_saved_total",
                 "promptslim_queue_length", "promptslim_upstream_ttfb_seconds_sum",
                 "promptslim_cacheable_tokens_total", "promptslim_pipeline_timeouts_total",
                 "promptslim_build_info{version=", "process_resident_memory_bytes"):  # fmt: skip
        assert name in text


@pytest.mark.asyncio
async def test_a_callers_client_is_used_as_given(seam: tuple[Seam, str]) -> None:
    # The proxy's own client sends chat requests straight to its transport (no client
    # layer); a caller's client is honoured instead, hooks and all.
    seen: list[str] = []

    async def hook(request: Any) -> None:
        seen.append(request.url.path)

    config = ServeConfig(upstream=seam[1], upstream_timeout_s=5.0)
    # no kept-alive connections: they would belong to the server thread's event loop
    limits = httpx.Limits(max_keepalive_connections=0)
    hooks = {"request": [hook]}
    async with httpx.AsyncClient(event_hooks=hooks, limits=limits, trust_env=False) as own:
        app = create_app(config, pipeline=None, client=own)
        with ThreadServer(app) as server:
            async with httpx.AsyncClient(timeout=10) as client:
                url = server.url + "/v1/chat/completions"
                streamed = await client.post(url, json={**BODY, "stream": True})
                plain = await client.post(url, json=BODY)
    assert streamed.status_code == plain.status_code == 200
    assert "Hello" in streamed.text and plain.json()["choices"][0]["message"]["content"]
    assert seen == ["/v1/chat/completions"] * 2


# ---------------------------------------------------------------- admission, timeouts, errors


@pytest.mark.asyncio
async def test_429_beyond_concurrency_and_queue(seam: tuple[Seam, str]) -> None:
    with proxy(seam[1], max_concurrency=2, max_queue=2, retry_after_s=3) as (url, state):
        async with httpx.AsyncClient(timeout=10) as client:
            hold = {"x-seam": "hold", "x-seam-delay": "0.6"}
            post = lambda: client.post(url + "/v1/chat/completions", json=BODY, headers=hold)
            admitted = [asyncio.create_task(post()) for _ in range(4)]
            for _ in range(200):  # bounded: until 2 run and 2 wait
                if state.admission.active == 2 and state.admission.queued == 2:
                    break
                await asyncio.sleep(0.01)
            refused = await post()
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "3"
            assert refused.json()["error"]["code"] == "proxy_overloaded"
            assert [r.status_code for r in await asyncio.gather(*admitted)] == [200] * 4
    assert state.admission.active == 0


@pytest.mark.asyncio
async def test_504_when_the_upstream_is_silent(seam: tuple[Seam, str]) -> None:
    with proxy(seam[1], upstream_timeout_s=0.3) as (url, state):
        async with httpx.AsyncClient(timeout=10) as client:
            start = time.monotonic()
            resp = await client.post(
                url + "/v1/chat/completions", json=BODY, headers={"x-seam": "hang"}
            )
            assert time.monotonic() - start < 2.0
            assert resp.status_code == 504
            assert "timed out after 0.3 s" in resp.json()["error"]["message"]
            # mid-stream silence: headers are gone, so the stream ends with an error event
            stalled = await client.post(
                url + "/v1/chat/completions",
                json={**BODY, "stream": True},
                headers={"x-seam": "stall"},
            )
            events = _events(stalled.content)
            assert events[0]["choices"][0]["delta"]["content"] == "Hello"
            assert events[-1]["error"]["code"] == "upstream_timeout"
    assert state.admission.active == 0


@pytest.mark.asyncio
async def test_a_client_that_goes_away_frees_its_slot_and_upstream_connection(
    seam: tuple[Seam, str],
) -> None:
    with proxy(seam[1], default=False) as (url, state):
        body = {**BODY, "stream": True}
        # the seam's second chunk comes 3 s after the first ("stall"): leave in between
        async with (
            httpx.AsyncClient(timeout=10) as client,
            client.stream(
                "POST", url + "/v1/chat/completions", json=body, headers={"x-seam": "stall"}
            ) as resp,
        ):
            async for _ in resp.aiter_raw():
                break  # first chunk in hand; the connection closes on leaving the block
        deadline = time.monotonic() + 2
        while state.admission.active and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert state.admission.active == 0  # slot freed long before the stream would end
        # the half-read upstream connection was closed, not pooled: the next stream is whole
        async with httpx.AsyncClient(timeout=10) as client:
            again = await client.post(url + "/v1/chat/completions", json=body)
        texts = [
            e["choices"][0]["delta"]["content"] for e in _events(again.content) if e != "[DONE]"
        ]
        assert texts == ["Hello", " world"]


@pytest.mark.asyncio
async def test_upstream_errors_keep_their_message(default_proxy: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        url = default_proxy + "/v1/chat/completions"
        crashed = await client.post(url, json=BODY, headers={"x-seam": "500"})
        rejected = await client.post(url, json={**BODY, "stream": True}, headers={"x-seam": "400"})
    assert crashed.status_code == 502
    err = crashed.json()["error"]
    assert "engine crashed: out of KV cache" in err["message"] and err["upstream_status"] == 500
    assert rejected.status_code == 400
    err = rejected.json()["error"]
    assert "temperature must be <= 2" in err["message"] and err["param"] == "temperature"


@pytest.mark.asyncio
async def test_unreachable_upstream_is_502() -> None:
    with proxy(f"http://127.0.0.1:{free_port()}/v1") as (url, _):
        async with httpx.AsyncClient(timeout=10) as client:
            resp = await client.post(url + "/v1/chat/completions", json=BODY)
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_unreachable"


@pytest.mark.asyncio
async def test_bad_bodies_get_400_and_413_naming_the_field(seam: tuple[Seam, str]) -> None:
    with proxy(seam[1], max_body_bytes=2000) as (url, _):
        async with httpx.AsyncClient(timeout=10) as client:
            chat = url + "/v1/chat/completions"
            malformed = await client.post(
                chat, content=b'{"messages": [', headers={"content-type": "application/json"}
            )
            no_messages = await client.post(chat, json={"model": "m"})
            bad_role = await client.post(
                chat, json={"messages": [{"role": "wizard", "content": "x"}]}
            )
            too_big = await client.post(chat, json={**BODY, "pad": "x" * 5000})
            # Python's json reads NaN; JSON has no such value, so it is not sent on upstream
            nan = await client.post(
                chat,
                content=b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
                headers={"content-type": "application/json"},
            )
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "invalid_json"
    assert nan.status_code == 400 and "NaN is not a JSON value" in nan.json()["error"]["message"]
    assert no_messages.status_code == 400 and no_messages.json()["error"]["param"] == "messages"
    assert bad_role.status_code == 400 and bad_role.json()["error"]["param"] == "messages[0].role"
    assert bad_role.json()["error"]["type"] == "invalid_request_error"
    assert too_big.status_code == 413


@pytest.mark.asyncio
async def test_budget_infeasible_names_the_minimum(seam: tuple[Seam, str]) -> None:
    pipeline = Pipeline.from_config({"budget": {"total": 3}, "stages": [{"name": "passthrough"}]})
    with proxy(seam[1], pipeline=pipeline) as (url, _):
        async with httpx.AsyncClient(timeout=10) as client:
            resp = await client.post(url + "/v1/chat/completions", json=BODY)
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["code"] == "budget_infeasible"
    assert err["minimum"] > 3 and err["budget"] == 3


class _Boom:
    """A stage that fails: the proxy must forward the original request anyway."""

    name = "boom"

    def run(self, request: Request, budget: Budget | None = None) -> Result:
        raise RuntimeError("boom")


class _Counting:
    """A stage that counts its runs (a test seam)."""

    name = "counting"

    def __init__(self) -> None:
        self.runs = 0

    def run(self, request: Request, budget: Budget | None = None) -> Result:
        self.runs += 1
        return Pipeline([]).run(request, budget)


@pytest.mark.asyncio
async def test_the_pipeline_warms_up_before_the_first_request(
    seam: tuple[Seam, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="promptslim.serve")
    stage = _Counting()
    with proxy(seam[1], pipeline=Pipeline([stage])) as (url, _):
        assert stage.runs == 1  # at start-up, before any client
        async with httpx.AsyncClient(timeout=10) as client:
            resp = await client.post(url + "/v1/chat/completions", json=BODY)
        assert resp.status_code == 200 and stage.runs == 2
    events = [json.loads(r.getMessage())["event"] for r in caplog.records]
    assert events.index("warm_up") == events.index("start") + 1
    # a failing warm-up does not stop the proxy; and it can be switched off
    with proxy(seam[1], pipeline=Pipeline([_Boom()])) as (url, _):
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await client.post(url + "/v1/chat/completions", json=BODY)).status_code == 200
    quiet = _Counting()
    with proxy(seam[1], pipeline=Pipeline([quiet]), warm_up=False):
        assert quiet.runs == 0


@pytest.mark.asyncio
async def test_pipeline_failure_forwards_the_original(
    seam: tuple[Seam, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="promptslim.serve")
    raw = json.dumps({**BODY, "temperature": 0.25, "documents": ["a doc"]}).encode()
    with proxy(seam[1], pipeline=Pipeline([_Boom()])) as (url, _):
        async with httpx.AsyncClient(timeout=10) as client:
            resp = await client.post(
                url + "/v1/chat/completions",
                content=raw,
                headers={"content-type": "application/json"},
            )
    assert resp.status_code == 200
    assert seam[0].bodies[-1] == raw  # byte for byte
    warnings = [json.loads(r.getMessage()) for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        warnings
        and warnings[0]["event"] == "pipeline_failed"
        and warnings[0]["error"] == "RuntimeError"
    )


@pytest.mark.asyncio
async def test_logs_hold_sizes_and_timings_never_prompt_or_credentials(
    seam: tuple[Seam, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret, prompt = "sk-test-SECRET-4242", "my private question about zebras"
    body = {"model": "seam", "messages": [{"role": "user", "content": prompt}]}
    with proxy(seam[1], api_key="proxy-key-9876") as (url, _):
        async with httpx.AsyncClient(timeout=10) as client:
            chat = url + "/v1/chat/completions"
            denied = await client.post(
                chat, json=body, headers={"Authorization": f"Bearer {secret}"}
            )
            headers = {"Authorization": f"Bearer {secret}", "X-PromptSlim-Key": "proxy-key-9876"}
            ok = await client.post(chat, json=body, headers=headers)
            streamed = await client.post(chat, json={**body, "stream": True}, headers=headers)
    assert denied.status_code == 401 and ok.status_code == 200 and streamed.status_code == 200
    upstream_saw = seam[0].headers[-1]
    assert upstream_saw["authorization"] == f"Bearer {secret}"  # forwarded
    assert "x-promptslim-key" not in upstream_saw  # the proxy's own key stops at the proxy
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert secret not in text and "proxy-key-9876" not in text
    assert "zebras" not in text and prompt not in text
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "promptslim.serve"]
    requests = [x for x in lines if x.get("event") == "request"]
    assert len(requests) == 3
    assert {x["status"] for x in requests} == {401, 200}
    last = requests[-1]
    assert last["stream"] is True and last["bytes_in"] > 0 and last["bytes_out"] > 0
    assert last["tokens_in"] > 0 and last["first_chunk_ms"] > 0 and last["total_ms"] > 0


@pytest.mark.slow
@pytest.mark.asyncio
async def test_500_concurrent_streams_without_errors(seam: tuple[Seam, str]) -> None:
    n = 500
    with proxy(seam[1], max_concurrency=n, max_queue=n, upstream_timeout_s=60) as (url, state):
        limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:

            async def one() -> str:
                async with client.stream(
                    "POST", url + "/v1/chat/completions", json={**BODY, "stream": True}
                ) as resp:
                    assert resp.status_code == 200
                    events = _events(await resp.aread())
                return "".join(e["choices"][0]["delta"]["content"] for e in events[:-1])

            texts = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), 150)
    assert texts == ["Hello world"] * n
    assert state.admission.active == 0
    labels = {"route": "chat", "status": "200"}
    assert state.metrics.registry.get_sample_value("promptslim_requests_total", labels) == n


# ---------------------------------------------------------------- packaging and CLI


def test_missing_extra_raises_backend_unavailable() -> None:
    assert_missing_extra("promptslim.serve", ["uvicorn"], "serve")


def test_config_is_checked_and_fixed() -> None:
    from promptslim.errors import ConfigError

    assert ServeConfig(upstream="http://127.0.0.1:8000").upstream == "http://127.0.0.1:8000/v1"
    with pytest.raises(ConfigError) as info:
        ServeConfig(upstream="file:///etc/passwd")
    assert info.value.field == "upstream"
    assert "secret" not in repr(ServeConfig(upstream="http://h/v1", api_key="secret"))
    with pytest.raises(ConfigError) as info:
        ServeConfig(upstream="http://h/v1", upstream_transport="curl")
    assert info.value.field == "upstream_transport"


def test_the_old_transport_choice_only_warns_and_every_upstream_uses_httpx() -> None:
    with pytest.warns(DeprecationWarning, match="upstream_transport"):
        old = ServeConfig(upstream="http://127.0.0.1:8000/v1", upstream_transport="promptslim")
    assert old.upstream_transport == "httpx"


@pytest.mark.asyncio
async def test_stream_relayed_the_same_as_direct(seam: tuple[Seam, str]) -> None:
    body = {**BODY, "stream": True}
    with proxy(seam[1], default=False) as (url, _):
        async with httpx.AsyncClient(timeout=10) as client:
            direct = await client.post(seam[1] + "/chat/completions", json=body)
            proxied = await client.post(url + "/v1/chat/completions", json=body)
            models = await client.get(url + "/v1/models")
    assert proxied.status_code == 200 and models.status_code == 200
    texts = [
        [e["choices"][0]["delta"]["content"] for e in _events(r.content) if e != "[DONE]"]
        for r in (direct, proxied)
    ]
    assert texts[1] == texts[0] and len(texts[0]) >= 2
    assert proxied.content.rstrip().endswith(b"data: [DONE]")
    assert proxied.headers.get_list("x-request-id") == [proxied.headers["x-request-id"]]


# ---------------------------------------------------------------- the real model server


def _long_chat(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You are a helpful assistant. Answer briefly."}]
    for i in range(turns):
        messages.append(
            {
                "role": "user",
                "content": f"Tell me fact number {i} about the ocean and its many tides.",
            }
        )
        messages.append({"role": "assistant", "content": f"Fact {i}: the ocean covers much of the planet and has tides driven by the moon."})  # fmt: skip
    messages.append({"role": "user", "content": "What is the capital of France?"})
    return messages


@pytest.mark.slow
@pytest.mark.asyncio
async def test_real_model_slimmed_prompt_reaches_it(llama_server: str) -> None:  # noqa: F811
    pipeline = Pipeline.from_config({"budget": {"total": 200}, "stages": [{"name": "history"}]})
    body = {"model": "smollm2", "messages": _long_chat(12), "max_tokens": 8, "temperature": 0}
    with proxy(llama_server, pipeline=pipeline, upstream_timeout_s=120) as (url, _):
        async with httpx.AsyncClient(timeout=120) as client:
            direct = await client.post(llama_server + "/chat/completions", json=body)
            slim = await client.post(
                url + "/v1/chat/completions", json=body, headers={"X-PromptSlim-Report": "1"}
            )
            async with client.stream(
                "POST", url + "/v1/chat/completions", json={**body, "stream": True}
            ) as resp:
                assert resp.status_code == 200
                assert "upstream-ttfb" in resp.headers["server-timing"]
                events = _events(await resp.aread())
    assert direct.status_code == 200 and slim.status_code == 200
    data = slim.json()
    # the model saw the slimmed prompt: fewer prompt tokens, by its own count
    assert data["usage"]["prompt_tokens"] < direct.json()["usage"]["prompt_tokens"]
    assert data["promptslim"]["tokens_out"] < data["promptslim"]["tokens_in"]
    assert data["choices"][0]["message"]["content"]
    assert events[-1] == "[DONE]"
    text = "".join(
        (e["choices"][0]["delta"].get("content") or "") for e in events[:-1] if e.get("choices")
    )
    assert text.strip()


@pytest.mark.slow
def test_cli_serve_in_front_of_the_real_model(llama_server: str) -> None:  # noqa: F811
    port = free_port()
    cmd = [sys.executable, "-m", "promptslim", "serve", "--upstream", llama_server,
           "--port", str(port), "--timeout", "120"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        # the default pipeline warms up before serving: its models load in a fresh process
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        body = {"model": "smollm2", "max_tokens": 8, "temperature": 0,
                "messages": [{"role": "user", "content": "Say hello."}]}  # fmt: skip
        assert httpx.get(base + "/v1/models", timeout=30).json()["data"]
        plain = httpx.post(base + "/v1/chat/completions", json=body, timeout=120)
        assert plain.status_code == 200 and plain.json()["choices"][0]["message"]["content"]
        with httpx.stream(
            "POST", base + "/v1/chat/completions", json={**body, "stream": True}, timeout=120
        ) as resp:
            assert resp.status_code == 200
            chunks = [c for c in resp.iter_raw()]
        assert b"data: [DONE]" in b"".join(chunks)
    finally:
        proc.terminate()  # SIGTERM: graceful shutdown, by our PID only
        try:
            _, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=10)
    # uvicorn re-raises the caught SIGTERM once its graceful shutdown is done
    assert proc.returncode in (0, -15), err.decode()[-2000:]
    assert "Application shutdown complete" in err.decode()
    log_lines = [json.loads(x) for x in err.decode().splitlines() if x.startswith("{")]
    assert sum(1 for x in log_lines if x.get("event") == "request" and x["route"] == "chat") == 2
    assert "Say hello" not in err.decode()


# ---------------------------------------------------------------- several workers


_WORKER_SCRIPT = """
import os, sys
from promptslim.serve.metrics import Metrics
m = Metrics()
for _ in range(int(sys.argv[1])):
    m.count_request("chat", 200)
m.set_load(queued=int(sys.argv[2]), in_flight=0, open_connections=0)
if sys.argv[3] == "dead":
    Metrics.mark_dead(os.getpid())
"""


def test_workers_metrics_add_up_and_a_gone_workers_counts_stay_but_not_its_gauges(
    tmp_path: Any,
) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for requests, queued, state in ((2, 3, "live"), (4, 5, "dead")):
        subprocess.run([sys.executable, "-c", _WORKER_SCRIPT, str(requests), str(queued), state],
                       env=env, check=True, timeout=60)  # fmt: skip
    scrape = "from promptslim.serve.metrics import Metrics; print(Metrics().render().decode())"
    text = subprocess.run([sys.executable, "-c", scrape], env=env, check=True, timeout=60,
                          capture_output=True, text=True).stdout  # fmt: skip
    assert 'promptslim_requests_total{route="chat",status="200"} 6.0' in text
    assert "promptslim_queue_length 3.0" in text  # the dead worker's 5 is not counted
    assert "promptslim_workers 2.0" in text  # the scraper and the live worker


def test_worker_limits_are_shares_and_pipelines_must_survive_a_config_round_trip() -> None:
    from promptslim.errors import ConfigError
    from promptslim.serve.server import _describable
    from promptslim.stages.base import BaseStage

    config = ServeConfig(upstream="http://127.0.0.1:1/v1", workers=3, max_concurrency=64)
    assert config.share(64) == 22 and config.share(0) == 0 and config.share(2) == 1
    with pytest.raises(ConfigError) as err:
        ServeConfig(upstream="http://127.0.0.1:1/v1", workers=0)
    assert err.value.field == "workers"
    assert _describable(None) is None
    # what the workers receive: the config in its JSON form
    assert _describable(Pipeline.default()) == json.loads(
        json.dumps(Pipeline.default().to_config())
    )

    class Shout(BaseStage):  # a stage no config can name
        name = "shout"

        def apply(self, request: Request, budget: Budget, log: Any) -> Request:
            return request

    with pytest.raises(ConfigError) as err:
        _describable(Pipeline([Shout()]))
    assert err.value.field == "workers"


@pytest.mark.slow
def test_cli_serve_with_two_workers(seam: tuple[Seam, str], tmp_path: Any) -> None:
    upstream_seam, upstream = seam
    config = tmp_path / "pipeline.json"
    config.write_text(json.dumps({"stages": [{"name": "prefix"}, {"name": "history"}]}))
    port = free_port()
    cmd = [sys.executable, "-m", "promptslim", "serve", "--upstream", upstream,
           "--port", str(port), "--workers", "2", "--config", str(config),
           "--api-key-env", "PS_TEST_KEY", "--timeout", "10"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PS_TEST_KEY": "sesame-7f3a"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    base = f"http://127.0.0.1:{port}"
    key = {"X-PromptSlim-Key": "sesame-7f3a"}

    def metrics() -> str:
        return httpx.get(base + "/metrics", headers=key, timeout=5).text

    try:
        deadline = time.monotonic() + 60
        while True:  # both workers up: each has left its metrics for the other
            try:
                if "promptslim_workers 2" in metrics():
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "workers did not start"
            time.sleep(0.2)
        seen = len(upstream_seam.bodies)
        body = {**BODY, "messages": [{"role": "system", "content": "Be brief."}, *BODY["messages"]]}
        # a new connection each time, so the kernel hands them to either worker
        codes = [
            httpx.post(
                base + "/v1/chat/completions", json=body, headers=key, timeout=10
            ).status_code
            for _ in range(30)
        ]
        refused = httpx.post(base + "/v1/chat/completions", json=body, timeout=10)
        assert codes == [200] * 30 and refused.status_code == 401  # the key reached the workers
        assert len(upstream_seam.bodies) - seen == 30
        time.sleep(1.5)  # each worker leaves its figures every second
        text = metrics()
        assert 'promptslim_requests_total{route="chat",status="200"} 30' in text
        assert 'promptslim_requests_total{route="chat",status="401"} 1' in text
        assert 'promptslim_stage_seconds_count{stage="prefix"} 30' in text
        # streams on one kept-alive connection, chunks 20 ms apart: each chunk must leave the
        # worker at once. Without TCP_NODELAY on the workers' sockets the second chunk waited
        # for the client's delayed ACK of the first: 20 ms late from the third request on.
        late: list[float] = []
        with httpx.Client(timeout=10, headers={**key, "x-seam-gap": "0.02"}) as client:
            for _ in range(8):
                stream = {**body, "stream": True}
                with client.stream("POST", base + "/v1/chat/completions", json=stream) as resp:
                    raw = b"".join(resp.iter_raw())
                    arrived = time.monotonic_ns()  # the second chunk ends the stream's content
                sent = [
                    e["sent_ns"] for e in _events(raw) if isinstance(e, dict) and "sent_ns" in e
                ]
                late.append((arrived - sent[1]) / 1e6)
        assert statistics.median(late) < 10, late
    finally:
        proc.terminate()  # SIGTERM to the parent, by our PID only; it stops its workers
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=10)
    log = err.decode()
    assert proc.returncode == 0, log[-2000:]
    starts = [json.loads(x) for x in log.splitlines() if x.startswith('{"event": "start"')]
    assert len(starts) == 2 and starts[0]["config"]["workers"] == 2
    served = [json.loads(x) for x in log.splitlines() if x.startswith('{"event": "request"')]
    by_worker = {s["pid"] for s in starts}
    assert len(by_worker) == 2 and {r["pid"] for r in served} <= by_worker
    # both served (here 11 and 20 of 31), so the totals above came from adding them up
    assert all(any(r["pid"] == p for r in served) for p in by_worker)
    assert starts[0]["config"]["api_key"] == "***" and "sesame-7f3a" not in log
    assert not os.path.exists(starts[0]["config"]["metrics_dir"])  # removed at shutdown


def test_shared_store_events_reach_the_metrics_as_running_totals() -> None:
    from promptslim.serve.metrics import Metrics

    m = Metrics()
    m.sync_store_stats({"redis_hits": 3.0, "degraded": 1.0, "redis_p99_ms": 1.5})
    m.sync_store_stats({"redis_hits": 5.0, "degraded": 1.0, "redis_p99_ms": 0.5})
    text = m.render().decode()
    assert 'promptslim_store_events_total{event="redis_hits"} 5.0' in text
    assert 'promptslim_store_events_total{event="degraded"} 1.0' in text
    assert "promptslim_redis_p99_seconds 0.0005" in text
