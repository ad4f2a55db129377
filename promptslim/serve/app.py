"""The proxy as a Starlette app: ``POST /v1/chat/completions`` (slimmed, streamed or not),
``GET /v1/models`` and ``GET /v1/models/{id}`` (proxied), ``GET /healthz``, ``GET /metrics``.

Timing, and what can honestly go where: a relayed response's headers leave before the
upstream's first body byte, so its ``Server-Timing`` header carries only what is known by then
— the queue wait, the pipeline and each stage, ``forward`` (request received → upstream request
sent) and ``upstream-ttfb`` (upstream request sent → its response headers). A client that sends
``X-PromptSlim-Report: 1`` gets every figure in a ``promptslim`` field: in one extra
``chat.completion.chunk`` (``choices: []``) just before ``data: [DONE]`` of a stream, or added to
a non-streamed JSON body (which is then read whole first, up to ``max_buffered_body_bytes``; a
larger one is relayed as it came). Bodies are otherwise relayed as they arrive, never held.

Never logged: message text, the body, any header value (``Authorization`` is forwarded to the
upstream, never written anywhere). Logged: one JSON line per request with sizes, token counts
and timings. With an API key configured, ``/metrics`` asks for it too (``/healthz`` does not:
load balancers probe it).
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
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import httpx
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..backends.shared_stats import STORE_STATS
from ..errors import BudgetInfeasible, ConfigError, InvalidRequest
from ..pipeline import Pipeline
from ..render import json_bytes
from ..types import Request, Result
from .admission import Admission, Overloaded
from .body import parse_body, read_body
from .config import ServeConfig
from .exchange import Exchange, ms_since
from .expand import find_expander
from .forward import UpstreamExchanges
from .guard import ConnectionGuard, GuardMiddleware, install_guard
from .metrics import Metrics
from .relay import CLIENT_CLOSED, Relay, disconnected
from .responses import error_response
from .spans import end_server_span, server_span, use_span
from .upstream import (
    KEY_HEADER,
    make_client,
)

__all__ = ["Exchange", "Proxy", "create_app"]

log = logging.getLogger("promptslim.serve")

T = TypeVar("T")

_STREAM_HEADERS = [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
#: an upstream error body is read this far, for its message
_MAX_ERROR_BODY = 64 * 1024


class _ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


class Proxy(UpstreamExchanges):
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
            limit=config.share(config.max_concurrency),
            max_queue=config.share(config.max_queue),
            policy=config.admission_policy(),
        )
        self.metrics = Metrics()
        self.guard = ConnectionGuard(
            header_timeout_s=config.header_timeout_s,
            max_connections=config.max_connections,
            max_headers=config.max_headers,
            on_close=self.metrics.count_closed,
        )
        self.pid = os.getpid()  # in the process that serves: an app is made in its worker
        self._client = client
        self._chat_url = config.upstream_url("/chat/completions")
        self._store_synced = -1.0
        self.expander = find_expander(pipeline)

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("the upstream client starts with the app's lifespan")
        return self._client

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        own = self._client is None
        if own:
            self._client = make_client(self.config)
        install_guard(self.guard)
        log.info(json.dumps({"event": "start", "pid": self.pid, "config": self.config.as_dict()}))
        if self.pipeline is not None and self.config.warm_up:
            seconds = await asyncio.to_thread(self.pipeline.warm_up)
            # the models just loaded are millions of long-lived objects: left in the collected
            # generations, every full collection walks them all, and under hundreds of streams
            # that stalled the event loop for seconds
            gc.freeze()
            log.info(json.dumps({"event": "warm_up", "s": round(seconds, 3)}))
        try:
            yield
        finally:
            Metrics.mark_dead(self.pid)  # several workers: this one's gauges stop counting
            if own and self._client is not None:
                await self._client.aclose()
                self._client = None

    # ---- routes

    async def chat_completions(self, request: HTTPRequest) -> Response:
        ex = Exchange(id=uuid.uuid4().hex[:16], route="chat", start=time.perf_counter())
        ex.span = server_span("POST", "/v1/chat/completions", request.headers.raw)
        try:
            with use_span(ex.span):  # the pipeline's span is a child of the request's
                response = await self._chat(request, ex)
        except Exception as exc:  # noqa: BLE001  (a bug of ours still answers; logged, type only)
            ex.error = f"internal:{type(exc).__name__}"
            line = {"event": "internal_error", "id": ex.id, "error": ex.error}
            if self.config.log_content:  # the message may quote the prompt: opt-in only
                line["message"] = str(exc)
            log.error(json.dumps(line, ensure_ascii=False))
            response = error_response(500, "internal proxy error", type_="server_error")
        if not isinstance(response, Relay):  # a relay sets its own and finishes when it ends
            response.headers["x-request-id"] = ex.id
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
        if not self._authorised(request):
            return error_response(401, "missing or wrong X-PromptSlim-Key", code="invalid_api_key")
        self._update_load()
        return Response(self.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    def _update_load(self) -> None:
        now = time.monotonic()
        if now - self._store_synced >= 1.0:  # a snapshot sorts recent latencies: not per request
            self._store_synced = now
            self.metrics.sync_store_stats(STORE_STATS.snapshot())
        self.metrics.set_load(
            queued=self.admission.queued,
            in_flight=self.admission.active,
            open_connections=self.guard.open_connections,
        )

    # ---- chat completions

    async def _chat(self, request: HTTPRequest, ex: Exchange) -> Response:
        if not self._authorised(request):
            return error_response(401, "missing or wrong X-PromptSlim-Key", code="invalid_api_key")
        raw = await read_body(request, self.config)
        if isinstance(raw, Response):
            return raw
        ex.bytes_in = len(raw)
        body = parse_body(raw)
        if isinstance(body, Response):
            return body
        ex.stream = body.get("stream") is True
        parsed = None
        if self.pipeline is not None:
            try:
                parsed = Request.from_openai(body)
            except InvalidRequest as exc:
                return error_response(400, f"{exc.field}: {exc.reason}", param=exc.field)
        try:
            return await self._unless_gone(request, self._admitted(request, ex, raw, body, parsed))
        except _ClientGone:
            ex.error = "client_disconnected"
            return Response(status_code=CLIENT_CLOSED)  # never sent: the client has gone

    async def _admitted(
        self,
        request: HTTPRequest,
        ex: Exchange,
        raw: bytes,
        body: dict[str, Any],
        parsed: Request | None,
    ) -> Response:
        ticket = self.admission.policy.ticket(request.headers, key=ex.id)
        ticket.tokens = len(raw) // 4  # a size to order by until the slimmed one is known
        payload: bytes | None = None
        admission = self.admission
        if parsed is not None and admission.would_wait(ticket) and admission.has_room():
            # it will queue: slim it first, so that it is ordered by what the upstream will
            # prefill and, once admitted, holds its upstream slot for the exchange alone
            early = await self._slimmed(parsed, ex, raw)
            if not isinstance(early, bytes):
                return early
            payload = early
            ticket.tokens = ex.tokens_out if ex.tokens_out is not None else ticket.tokens
        queued_at = time.perf_counter()
        try:
            await self.admission.acquire(
                timeout_s=self.admission.budget_s(ticket, self.config.queue_timeout_s),
                ticket=ticket,
            )
        except Overloaded as exc:
            retry = str(self.config.retry_after_s)
            return error_response(
                429, f"proxy overloaded: {exc.reason}; retry later", type_="rate_limit_error",
                code="proxy_overloaded", headers={"Retry-After": retry},
            )  # fmt: skip
        ex.queue_ms = ms_since(queued_at)
        ex.marks["queued"], ex.marks["admitted"] = queued_at, time.perf_counter()
        handed_over = False
        try:
            if payload is None:  # the original bytes unless the pipeline produced a body
                late = raw if parsed is None else await self._slimmed(parsed, ex, raw)
                if not isinstance(late, bytes):
                    return late
                payload = late
            response = await self._upstream_chat(request, ex, payload, body)
            handed_over = isinstance(response, Relay)
            return response
        finally:
            if not handed_over:
                self.admission.release(ex.id)

    async def _slimmed(self, parsed: Request, ex: Exchange, raw: bytes) -> bytes | Response:
        """The bytes to send: slimmed, or ``raw`` when the pipeline gave up; or the client's
        error (its budget cannot be met, its request is invalid)."""
        try:
            result = await self._slim(parsed, ex)
        except BudgetInfeasible as exc:
            return error_response(
                400, str(exc), param="budget", code="budget_infeasible",
                minimum=exc.minimum, budget=exc.budget,
            )  # fmt: skip
        except InvalidRequest as exc:
            return error_response(400, f"{exc.field}: {exc.reason}", param=exc.field)
        return raw if result is None else json_bytes(result)

    async def _unless_gone(self, request: HTTPRequest, work: Awaitable[T]) -> T:
        """``await work``, cancelled as soon as the client goes (``_ClientGone``): a queued or
        slimming request stops, and an upstream request in flight is closed at once."""
        task = asyncio.ensure_future(work)
        watch = asyncio.ensure_future(disconnected(request.receive))
        try:
            await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise _ClientGone

    async def _slim(self, parsed: Request, ex: Exchange) -> dict[str, Any] | None:
        """The slimmed body, or None when the pipeline failed or ran past its time budget (the
        original goes instead)."""
        assert self.pipeline is not None
        start = time.perf_counter()
        try:
            result: Result = await asyncio.wait_for(
                self.pipeline.arun(parsed), self.config.pipeline_timeout_s
            )
            body = result.to_openai()
        except asyncio.TimeoutError:
            self._forwarding_original(ex, start, "timeout", "PipelineTimeout", None)
            self.metrics.pipeline_timeouts.inc()
            return None
        except Exception as exc:
            if isinstance(exc, BudgetInfeasible) or (
                isinstance(exc, InvalidRequest) and not isinstance(exc, ConfigError)
            ):
                raise  # the client's input or budget: they need to know
            self._forwarding_original(ex, start, "failed", type(exc).__name__, exc)
            self.metrics.pipeline_failures.inc()
            return None
        ex.pipeline, ex.pipeline_ms = "ok", ms_since(start)
        if self.config.log_content and log.isEnabledFor(logging.DEBUG):
            log.debug(json.dumps(
                {"event": "slimmed", "id": ex.id, "messages": body.get("messages")},
                ensure_ascii=False, default=str,
            ))  # fmt: skip
        report = result.report
        ex.tokens_in, ex.tokens_out = report.tokens_in, report.tokens_out
        ex.stages_ms = {s.stage: round(s.ms, 3) for s in report.stages}
        self.metrics.observe_report(
            pipeline_s=ex.pipeline_ms / 1e3, stages_ms=ex.stages_ms, report=report
        )
        return body

    def _forwarding_original(
        self, ex: Exchange, start: float, outcome: str, error: str, exc: Exception | None
    ) -> None:
        """Record and log that the original request goes on (type only: an exception
        message may quote the prompt, so it is logged only with ``log_content``)."""
        ex.pipeline, ex.pipeline_ms = outcome, ms_since(start)
        line = {
            "event": f"pipeline_{outcome}", "id": ex.id, "error": error,
            "action": "forwarded the original request",
        }  # fmt: skip
        if exc is not None and self.config.log_content:
            line["message"] = str(exc)
        log.warning(json.dumps(line, ensure_ascii=False))

    # ---- helpers

    def _authorised(self, request: HTTPRequest) -> bool:
        key = self.config.api_key
        if key is None:
            return True
        given = request.headers.get(KEY_HEADER, "")
        return hmac.compare_digest(given.encode(), key.encode())

    def finish(self, ex: Exchange, status: int) -> None:
        """Count and log a finished request (one JSON line: sizes and timings only)."""
        ex.status = status
        ex.total_ms = ms_since(ex.start)
        self.metrics.count_request(ex.route, status)
        self._update_load()
        if ex.upstream_ttfb_ms is not None:
            self.metrics.upstream_ttfb.observe(ex.upstream_ttfb_ms / 1e3)
        if ex.first_chunk_ms is not None:
            self.metrics.ttft.observe(ex.first_chunk_ms / 1e3)
        end_server_span(ex.span, ex, status)
        if log.isEnabledFor(logging.INFO):
            log.info(ex.log_line(self.pid))


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
    # a trailing-slash redirect would build its Location from the client's Host header
    app.router.redirect_slashes = False
    app.add_middleware(GuardMiddleware, guard=proxy.guard)
    app.state.proxy = proxy
    return app
