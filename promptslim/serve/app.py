"""The proxy as a Starlette app: ``POST /v1/chat/completions`` (slimmed, streamed or not),
``GET /v1/models`` (proxied), ``GET /healthz``, ``GET /metrics``.

Timing, and what can honestly go where: a streamed response's headers leave before the
upstream's first body byte, so its ``Server-Timing`` header carries only what is known by
then — the queue wait, the pipeline and each stage, ``forward`` (request received → upstream
request sent: the proxy's own share before the upstream sees it) and ``upstream-ttfb``
(upstream request sent → its response headers). The time to the first body chunk, the first
chunk's relay (in the proxy's hands → written to the client) and the end of the stream are
known later; a client that sends ``X-PromptSlim-Report: 1`` gets all figures in a
``promptslim`` field of one extra ``chat.completion.chunk`` (with ``choices: []``, like a usage
chunk) just before ``data: [DONE]``. A non-streamed response is complete before its headers
go, so its header also has ``upstream`` (the whole upstream exchange) and the ``promptslim``
field is added to the JSON body when asked. No HTTP trailers: uvicorn does not send them.

Never logged: message text, the body, any header value (``Authorization`` is forwarded to
the upstream, never written anywhere). Logged: one JSON line per request with sizes, token
counts and timings.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..errors import BudgetInfeasible, ConfigError, InvalidRequest
from ..http11 import Http11Transport
from ..pipeline import Pipeline
from ..render import json_bytes
from ..types import Request, Result
from .admission import Admission, Overloaded
from .config import ServeConfig
from .metrics import Metrics, merged, write_snapshot
from .responses import error_response, upstream_error

__all__ = ["Exchange", "Proxy", "create_app"]

log = logging.getLogger("promptslim.serve")

REPORT_HEADER = "x-promptslim-report"
KEY_HEADER = "x-promptslim-key"

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "trailers", "transfer-encoding", "upgrade", "content-length", "host"}
)  # fmt: skip
# our own headers stop here; identity encoding so every byte can be relayed as it comes
_NOT_UPSTREAM = _HOP_BY_HOP | {REPORT_HEADER, KEY_HEADER, "accept-encoding"}
# uvicorn writes its own date/server
_NOT_DOWNSTREAM = _HOP_BY_HOP | {"date", "server"}
_STREAM_HEADERS = [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1e3


# ---------------------------------------------------------------- one request's record


@dataclass(slots=True)
class Exchange:
    """One proxied request: sizes and timings, never text. Times in ms."""

    id: str
    route: str
    start: float
    stream: bool = False
    status: int = 0
    bytes_in: int = 0
    bytes_up: int = 0
    bytes_out: int = 0
    chunks: int = 0
    queue_ms: float | None = None
    pipeline: str = "disabled"  # ok | disabled | failed (the original was forwarded)
    pipeline_ms: float | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)
    tokens_in: int | None = None
    tokens_out: int | None = None
    # request received → upstream request handed to the connection pool: the proxy's own
    # work before the upstream sees the request (body, checks, admission, pipeline)
    forward_ms: float | None = None
    upstream_ttfb_ms: float | None = None  # upstream request sent → its response headers
    first_chunk_ms: float | None = None  # request received → first body byte relayed
    # first upstream body chunk in the proxy's hands → written to the client's socket
    first_relay_ms: float | None = None
    upstream_ms: float | None = None  # upstream request sent → its body complete
    total_ms: float | None = None
    error: str | None = None

    def server_timing(self, *, complete: bool) -> str:
        """The ``Server-Timing`` value: only figures already known when headers go out."""
        parts: list[str] = []
        if self.queue_ms is not None:
            parts.append(f"queue;dur={self.queue_ms:.3f}")
        if self.pipeline_ms is not None:
            parts.append(f'pipeline;dur={self.pipeline_ms:.3f};desc="{self.pipeline}"')
        for stage, ms in self.stages_ms.items():
            parts.append(f"stage-{stage};dur={ms:.3f}")
        if self.forward_ms is not None:
            parts.append(f"forward;dur={self.forward_ms:.3f}")
        if self.upstream_ttfb_ms is not None:
            parts.append(f"upstream-ttfb;dur={self.upstream_ttfb_ms:.3f}")
        if complete and self.upstream_ms is not None:
            parts.append(f"upstream;dur={self.upstream_ms:.3f}")
        return ", ".join(parts)

    def report(self) -> dict[str, Any]:
        """The ``promptslim`` extension field."""
        return {
            "request_id": self.id,
            "pipeline": self.pipeline,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "timing_ms": {
                "queue": self.queue_ms,
                "pipeline": self.pipeline_ms,
                "stages": dict(self.stages_ms),
                "forward": self.forward_ms,
                "upstream_ttfb": self.upstream_ttfb_ms,
                "first_chunk": self.first_chunk_ms,
                "first_relay": self.first_relay_ms,
                "upstream": self.upstream_ms,
            },
        }

    def log_line(self, pid: int) -> str:
        fields: dict[str, Any] = {"event": "request", "pid": pid}  # pid: which worker
        for name in self.__slots__:
            if name != "start":
                fields[name] = getattr(self, name)
        return json.dumps(fields, default=str)


# ---------------------------------------------------------------- the proxy


class Proxy:
    """Request handling; one per app. ``client`` is the shared, pooled upstream client."""

    def __init__(
        self,
        config: ServeConfig,
        *,
        pipeline: Pipeline | None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.config = config
        self.pipeline = pipeline
        # with several workers, each admits its share (the kernel spreads connections)
        self.admission = Admission(
            limit=config.share(config.max_concurrency), max_queue=config.share(config.max_queue)
        )
        self.metrics = Metrics()
        self.pid = os.getpid()  # in the process that serves: an app is made in its worker
        self._client = client
        # our own transport, when we made the client: chat requests go straight to it
        self._transport: httpx.AsyncBaseTransport | None = None
        # parsed once: per request, only the body and the headers are new
        self._chat_url = httpx.URL(config.upstream_url("/chat/completions"))
        self._timeouts = self._timeout().as_dict()

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("the upstream client starts with the app's lifespan")
        return self._client

    def make_transport(self) -> httpx.AsyncBaseTransport:
        """The pooled keep-alive connections to the upstream, shared by all requests: our
        lean HTTP/1.1 transport for ``http://`` (see ``promptslim/http11.py``: it is most of the
        proxy's share of a first token's latency), httpx's own for ``https://`` or when the
        config asks for it."""
        cfg = self.config
        # admitted requests never wait for a connection; a few spare for /v1/models
        connections = cfg.share(cfg.max_concurrency) + 8
        if cfg.upstream_transport == "promptslim" and self._chat_url.scheme == "http":
            return Http11Transport(
                max_connections=connections,
                max_keepalive_connections=connections,
                keepalive_expiry=30.0,
            )
        limits = httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=30.0,
        )
        return httpx.AsyncHTTPTransport(limits=limits)

    def make_client(self, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
        # trust_env=False: no proxy variable or netrc can send requests elsewhere
        return httpx.AsyncClient(
            transport=transport or self.make_transport(), timeout=self._timeout(), trust_env=False
        )

    def _timeout(self) -> httpx.Timeout:
        cfg = self.config
        return httpx.Timeout(
            connect=cfg.connect_timeout_s,
            read=cfg.upstream_timeout_s,
            write=cfg.upstream_timeout_s,
            pool=cfg.upstream_timeout_s,
        )

    async def _open(self, headers: list[tuple[bytes, bytes]], payload: bytes) -> httpx.Response:
        """POST ``payload`` to the upstream's chat endpoint; return once the response headers
        are in (body unread).

        On the proxy's own transport this skips the client layer (auth flow, redirect
        handling, cookie jar, event hooks): none of it applies to a fixed upstream, and it
        costs CPU on every request's way to the first token (issue 12); on the lean HTTP/1.1
        transport it skips building an ``httpx.Request`` too. A caller's client is honoured
        as given."""
        if isinstance(self._transport, Http11Transport):
            return await self._transport.send(
                "POST", self._chat_url, headers, payload, self._timeouts
            )
        request = httpx.Request(
            "POST", self._chat_url, content=payload, headers=headers,
            extensions={"timeout": self._timeouts},
        )  # fmt: skip
        if self._transport is not None:
            return await self._transport.handle_async_request(request)
        return await self.client.send(request, stream=True)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        own = self._client is None
        if own:
            self._transport = self.make_transport()
            self._client = self.make_client(self._transport)
        log.info(json.dumps({"event": "start", "pid": self.pid, "config": self.config.as_dict()}))
        if self.pipeline is not None and self.config.warm_up:
            seconds = await asyncio.to_thread(self.pipeline.warm_up)
            # the models just loaded are millions of long-lived objects: left in the collected
            # generations, every full collection walks them all, and under hundreds of streams
            # that stalled the event loop for seconds (measured: 504s at 500 streams)
            gc.freeze()
            log.info(json.dumps({"event": "warm_up", "s": round(seconds, 3)}))
        sharing = None
        if self.config.metrics_dir is not None:
            sharing = asyncio.create_task(self._share_metrics(self.config.metrics_dir))
        try:
            yield
        finally:
            if sharing is not None:
                sharing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sharing
                self._write_metrics(self.config.metrics_dir)  # the final counts stay
            if own and self._client is not None:
                await self._client.aclose()  # closes the transport too
                self._client = self._transport = None

    # ---- routes

    async def chat_completions(self, request: HTTPRequest) -> Response:
        ex = Exchange(id=uuid.uuid4().hex[:16], route="chat", start=time.perf_counter())
        try:
            response = await self._chat(request, ex)
        except Exception as exc:  # noqa: BLE001  (a bug of ours still answers; logged, type only)
            ex.error = f"internal:{type(exc).__name__}"
            line = {"event": "internal_error", "id": ex.id, "error": ex.error}
            if self.config.log_content:  # the message may quote the prompt: opt-in only
                line["message"] = str(exc)
            log.error(json.dumps(line, ensure_ascii=False))
            response = error_response(500, "internal proxy error", type_="server_error")
        response.headers["x-request-id"] = ex.id
        if not isinstance(response, _Relay):  # a relay finishes when its stream ends
            self.finish(ex, response.status_code)
        return response

    async def models(self, request: HTTPRequest) -> Response:
        ex = Exchange(id=uuid.uuid4().hex[:16], route="models", start=time.perf_counter())
        response = await self._forward_get(request, ex)
        response.headers["x-request-id"] = ex.id
        self.finish(ex, response.status_code)
        return response

    async def healthz(self, request: HTTPRequest) -> Response:
        return JSONResponse(
            {"status": "ok", "in_flight": self.admission.active, "queued": self.admission.queued}
        )

    async def metrics_text(self, request: HTTPRequest) -> Response:
        queued, in_flight = self.admission.queued, self.admission.active
        if self.config.metrics_dir is None:
            text = self.metrics.render(queued=queued, in_flight=in_flight)
        else:  # every worker's figures, whichever worker the scrape reached
            total, queued, in_flight, workers = merged(
                self.config.metrics_dir, self.metrics, queued=queued, in_flight=in_flight
            )
            text = total.render(queued=queued, in_flight=in_flight, workers=workers)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    # ---- several workers

    #: seconds between a worker's snapshots: how stale the other workers' part of a scrape is
    METRICS_SHARE_S = 1.0

    async def _share_metrics(self, folder: str) -> None:
        while True:
            self._write_metrics(folder)
            await asyncio.sleep(self.METRICS_SHARE_S)

    def _write_metrics(self, folder: str | None) -> None:
        if folder is None:
            return
        try:
            write_snapshot(
                folder,
                metrics=self.metrics,
                queued=self.admission.queued,
                in_flight=self.admission.active,
            )
        except OSError as exc:  # a full disk must not take the proxy down; the scrape is short
            log.warning(json.dumps({"event": "metrics_share_failed", "error": str(exc)}))

    # ---- chat completions

    async def _chat(self, request: HTTPRequest, ex: Exchange) -> Response:
        if not self._authorised(request):
            return error_response(401, "missing or wrong X-PromptSlim-Key", code="invalid_api_key")
        raw = await self._read_body(request)
        if isinstance(raw, Response):
            return raw
        ex.bytes_in = len(raw)
        try:
            body = json.loads(raw, parse_constant=_not_json)
        except ValueError as exc:
            return error_response(
                400, f"malformed JSON body: {exc}", param="body", code="invalid_json"
            )
        except RecursionError:
            return error_response(
                400, "malformed JSON body: nested too deeply", param="body", code="invalid_json"
            )
        if not isinstance(body, dict):
            return error_response(400, "expected a JSON object", param="body")
        ex.stream = body.get("stream") is True
        parsed = None
        if self.pipeline is not None:
            try:
                parsed = Request.from_openai(body)
            except InvalidRequest as exc:
                return error_response(400, f"{exc.field}: {exc.reason}", param=exc.field)
        queued_at = time.perf_counter()
        try:
            await self.admission.acquire(timeout_s=self.config.queue_timeout_s)
        except Overloaded as exc:
            retry = str(self.config.retry_after_s)
            return error_response(
                429, f"proxy overloaded: {exc.reason}; retry later", type_="rate_limit_error",
                code="proxy_overloaded", headers={"Retry-After": retry},
            )  # fmt: skip
        ex.queue_ms = _ms(queued_at)
        handed_over = False
        try:
            payload = raw  # the original bytes unless the pipeline produced a body
            if parsed is not None:
                try:
                    result = await self._slim(parsed, ex)
                except BudgetInfeasible as exc:
                    return error_response(
                        400, str(exc), param="budget", code="budget_infeasible",
                        minimum=exc.minimum, budget=exc.budget,
                    )  # fmt: skip
                except InvalidRequest as exc:
                    return error_response(400, f"{exc.field}: {exc.reason}", param=exc.field)
                if result is not None:
                    payload = json_bytes(result)
            response = await self._upstream_chat(request, ex, payload, body)
            handed_over = isinstance(response, _Relay)
            return response
        finally:
            if not handed_over:
                self.admission.release()

    async def _slim(self, parsed: Request, ex: Exchange) -> dict[str, Any] | None:
        """The slimmed body, or None when the pipeline failed (the original goes instead)."""
        assert self.pipeline is not None
        start = time.perf_counter()
        try:
            result: Result = await self.pipeline.arun(parsed)
            body = result.to_openai()
        except Exception as exc:
            if isinstance(exc, BudgetInfeasible) or (
                isinstance(exc, InvalidRequest) and not isinstance(exc, ConfigError)
            ):
                raise  # the client's input or budget: they need to know
            ex.pipeline, ex.pipeline_ms = "failed", _ms(start)
            self.metrics.pipeline_failures += 1
            # the request is never lost: forward it as it came, and say so (type only: an
            # exception message may quote the prompt, so it is logged only with log_content)
            line = {
                "event": "pipeline_failed", "id": ex.id, "error": type(exc).__name__,
                "action": "forwarded the original request",
            }  # fmt: skip
            if self.config.log_content:
                line["message"] = str(exc)
            log.warning(json.dumps(line, ensure_ascii=False))
            return None
        ex.pipeline, ex.pipeline_ms = "ok", _ms(start)
        if self.config.log_content and log.isEnabledFor(logging.DEBUG):
            log.debug(json.dumps(
                {"event": "slimmed", "id": ex.id, "messages": body.get("messages")},
                ensure_ascii=False, default=str,
            ))  # fmt: skip
        report = result.report
        ex.tokens_in, ex.tokens_out = report.tokens_in, report.tokens_out
        ex.stages_ms = {s.stage: round(s.ms, 3) for s in report.stages}
        self.metrics.tokens_in += report.tokens_in
        self.metrics.tokens_out += report.tokens_out
        self.metrics.stage_seconds["pipeline"].observe(ex.pipeline_ms / 1e3)
        for stage, ms in ex.stages_ms.items():
            self.metrics.stage_seconds[stage].observe(ms / 1e3)
        return body

    async def _upstream_chat(
        self, request: HTTPRequest, ex: Exchange, payload: bytes, body: dict[str, Any]
    ) -> Response:
        ex.bytes_up = len(payload)
        headers = self._upstream_headers(request)
        sent = time.perf_counter()
        ex.forward_ms = (sent - ex.start) * 1e3
        try:
            upstream = await self._open(headers, payload)
        except httpx.HTTPError as exc:
            return self._transport_error(ex, exc, while_="waiting for the response")
        ex.upstream_ttfb_ms = _ms(sent)
        want_report = request.headers.get(REPORT_HEADER, "").lower() in ("1", "true", "yes")
        if upstream.status_code >= 400:
            return await self._upstream_failed(ex, upstream)
        if ex.stream:
            return _Relay(
                self, upstream, ex, sent=sent, report=want_report, model=body.get("model")
            )
        try:
            content = await upstream.aread()  # decoded: content-encoding is dropped below
        except httpx.HTTPError as exc:
            return self._transport_error(ex, exc, while_="reading the response")
        finally:
            await upstream.aclose()
        ex.upstream_ms = _ms(sent)
        ex.first_chunk_ms = _ms(ex.start)
        if want_report:
            content = _with_report(content, ex)
        ex.bytes_out = len(content)
        headers = _downstream_headers(upstream, drop={"content-encoding"})
        headers.append((b"server-timing", ex.server_timing(complete=True).encode()))
        response = Response(content, status_code=upstream.status_code)
        response.raw_headers = [h for h in response.raw_headers if h[0] == b"content-length"]
        response.raw_headers += headers
        return response

    async def _upstream_failed(self, ex: Exchange, upstream: httpx.Response) -> Response:
        try:
            content = await upstream.aread()
        except httpx.HTTPError:
            content = b""
        finally:
            await upstream.aclose()
        ex.error = f"upstream_{upstream.status_code}"
        return upstream_error(
            upstream.status_code, content, retry_after=upstream.headers.get("retry-after")
        )

    def _transport_error(self, ex: Exchange, exc: httpx.HTTPError, *, while_: str) -> Response:
        if isinstance(exc, httpx.TimeoutException):
            ex.error = "upstream_timeout"
            limit = (
                self.config.connect_timeout_s
                if isinstance(exc, httpx.ConnectTimeout)
                else self.config.upstream_timeout_s
            )
            return error_response(
                504, f"upstream timed out after {limit:g} s {while_}", type_="upstream_error",
                code="upstream_timeout",
            )  # fmt: skip
        ex.error = f"upstream_{type(exc).__name__}"
        return error_response(
            502, f"upstream unreachable ({type(exc).__name__}) {while_}", type_="upstream_error",
            code="upstream_unreachable",
        )  # fmt: skip

    # ---- other routes

    async def _forward_get(self, request: HTTPRequest, ex: Exchange) -> Response:
        if not self._authorised(request):
            return error_response(401, "missing or wrong X-PromptSlim-Key", code="invalid_api_key")
        path = request.url.path.removeprefix("/v1")
        sent = time.perf_counter()
        try:
            upstream = await self.client.get(
                self.config.upstream_url(path), headers=self._upstream_headers(request)
            )
        except httpx.HTTPError as exc:
            return self._transport_error(ex, exc, while_="waiting for the response")
        ex.upstream_ttfb_ms = ex.upstream_ms = _ms(sent)
        if upstream.status_code >= 400:
            ex.error = f"upstream_{upstream.status_code}"
            return upstream_error(
                upstream.status_code, upstream.content,
                retry_after=upstream.headers.get("retry-after"),
            )  # fmt: skip
        response = Response(upstream.content, status_code=upstream.status_code)
        response.raw_headers += _downstream_headers(upstream, drop={"content-encoding"})
        return response

    # ---- helpers

    def _authorised(self, request: HTTPRequest) -> bool:
        key = self.config.api_key
        if key is None:
            return True
        given = request.headers.get(KEY_HEADER, "")
        return hmac.compare_digest(given.encode(), key.encode())

    async def _read_body(self, request: HTTPRequest) -> bytes | Response:
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return _too_large(limit)  # refused before reading a byte of it
        parts: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return _too_large(limit)
            parts.append(chunk)
        return b"".join(parts)

    def _upstream_headers(self, request: HTTPRequest) -> list[tuple[bytes, bytes]]:
        headers = [
            (k, v) for k, v in request.headers.raw if k.lower().decode() not in _NOT_UPSTREAM
        ]
        headers.append((b"accept-encoding", b"identity"))
        return headers

    def finish(self, ex: Exchange, status: int) -> None:
        """Count and log a finished request (one JSON line: sizes and timings only)."""
        ex.status = status
        ex.total_ms = _ms(ex.start)
        self.metrics.count_request(ex.route, status)
        if ex.upstream_ttfb_ms is not None:
            self.metrics.upstream_ttfb.observe(ex.upstream_ttfb_ms / 1e3)
        if ex.first_chunk_ms is not None:
            self.metrics.ttft.observe(ex.first_chunk_ms / 1e3)
        if log.isEnabledFor(logging.INFO):
            log.info(ex.log_line(self.pid))


def _downstream_headers(
    upstream: httpx.Response, *, drop: frozenset[str] | set[str] = frozenset()
) -> list[tuple[bytes, bytes]]:
    return [
        (k, v)
        for k, v in upstream.headers.raw
        if (name := k.lower().decode()) not in _NOT_DOWNSTREAM and name not in drop
    ]


def _not_json(name: str) -> Any:
    """``json.loads`` accepts NaN and Infinity; JSON does not, and an upstream server may
    fail on them or read them differently, so a body that holds one is refused here."""
    raise ValueError(f"{name} is not a JSON value")


def _too_large(limit: int) -> Response:
    return error_response(
        413, f"request body over {limit} bytes", param="body", code="body_too_large"
    )


def _with_report(content: bytes, ex: Exchange) -> bytes:
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return content  # not JSON (or nested too deeply): leave the upstream's bytes alone
    if not isinstance(data, dict):
        return content
    data["promptslim"] = ex.report()
    return json.dumps(data).encode()


# ---------------------------------------------------------------- streaming relay


class _Relay(Response):
    """Streams the upstream's bytes to the client as they arrive: one ``send`` per chunk the
    socket gives, nothing held back. Owns the admission slot and the upstream response until
    the stream ends or the client goes away (then the upstream request is closed too)."""

    def __init__(
        self,
        proxy: Proxy,
        upstream: httpx.Response,
        ex: Exchange,
        *,
        sent: float,
        report: bool,
        model: Any,
    ) -> None:
        super().__init__(status_code=upstream.status_code)
        self.proxy = proxy
        self.upstream = upstream
        self.ex = ex
        self.sent = sent
        self.want_report = report
        self.model = model

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        relay = asyncio.ensure_future(self._relay(send))
        # uvicorn (ASGI spec 2.3) drops sends to a closed connection silently: watch for the
        # disconnect ourselves so a gone client stops the upstream's generation
        watch = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait((relay, watch), return_when=asyncio.FIRST_COMPLETED)
            if relay.done():
                relay.result()
            else:
                self.ex.error = "client_disconnected"
        finally:
            for task in (relay, watch):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
            await self.upstream.aclose()
            self.proxy.admission.release()
            self.proxy.finish(self.ex, self.status_code)

    async def _relay(self, send: Send) -> None:
        ex = self.ex
        headers = _downstream_headers(self.upstream)
        headers += _STREAM_HEADERS
        headers += [h for h in self.raw_headers if h[0] == b"x-request-id"]
        headers.append((b"server-timing", ex.server_timing(complete=False).encode()))
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        reported = not self.want_report
        try:
            async for chunk in self.upstream.aiter_raw():
                got = time.perf_counter() if ex.first_chunk_ms is None else 0.0
                if got:
                    ex.first_chunk_ms = (got - ex.start) * 1e3
                if not reported and (at := chunk.find(b"data: [DONE]")) >= 0:
                    ex.upstream_ms = _ms(self.sent)
                    chunk = chunk[:at] + self._report_event() + chunk[at:]
                    reported = True
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if got:
                    ex.first_relay_ms = _ms(got)
                ex.chunks += 1
                ex.bytes_out += len(chunk)
        except httpx.HTTPError as exc:
            # headers (200) are gone already: end the stream with an error event instead
            timeout = isinstance(exc, httpx.TimeoutException)
            ex.error = "upstream_timeout" if timeout else f"upstream_{type(exc).__name__}"
            message = (
                f"upstream sent nothing for {self.proxy.config.upstream_timeout_s:g} s"
                if timeout
                else f"upstream stream broke ({type(exc).__name__})"
            )
            error = {"message": message, "type": "upstream_error", "code": ex.error}
            event = b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": event, "more_body": True})
        if ex.upstream_ms is None:
            ex.upstream_ms = _ms(self.sent)
        tail = b"" if reported else self._report_event()
        await send({"type": "http.response.body", "body": tail, "more_body": False})

    def _report_event(self) -> bytes:
        chunk = {
            "id": f"promptslim-{self.ex.id}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [],
            "promptslim": self.ex.report(),
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


# ---------------------------------------------------------------- the app


def create_app(
    config: ServeConfig,
    *,
    pipeline: Pipeline | None,
    client: httpx.AsyncClient | None = None,
) -> Starlette:
    """The proxy app. ``pipeline=None`` forwards bodies unchanged (a transparent proxy);
    ``client`` lets a caller share its own httpx client (otherwise one is made per app)."""
    proxy = Proxy(config, pipeline=pipeline, client=client)
    routes = [
        Route("/v1/chat/completions", proxy.chat_completions, methods=["POST"]),
        Route("/v1/models", proxy.models, methods=["GET"]),
        Route("/v1/models/{model:path}", proxy.models, methods=["GET"]),
        Route("/healthz", proxy.healthz, methods=["GET"]),
        Route("/metrics", proxy.metrics_text, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=proxy.lifespan)
    app.state.proxy = proxy
    return app
