"""The proxy's exchanges with the upstream: the chat request and its relayed answer, the
model routes, and the upstream's errors. A mixin of ``Proxy`` (``app.py``), which holds the
state these methods use."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from starlette.requests import Request as HTTPRequest
from starlette.responses import Response

from .admission import Admission
from .config import ServeConfig
from .exchange import Exchange, ms_since
from .expand import Expander, continued_payload, expand_calls
from .metrics import Metrics
from .paths import ForbiddenPath, model_url
from .relay import Relay, report_chunk
from .responses import error_response, upstream_error
from .spans import inject_context
from .upstream import (
    REPORT_HEADER,
    downstream_headers,
    open_stream,
    read_bounded,
    transport_error,
    upstream_headers,
)

__all__ = ["UpstreamExchanges"]

_STREAM_HEADERS = [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
#: an upstream error body is read this far, for its message
_MAX_ERROR_BODY = 64 * 1024


class UpstreamExchanges:
    """What ``Proxy`` does with the upstream (see the module docstring)."""

    config: ServeConfig
    admission: Admission
    metrics: Metrics
    _chat_url: str
    expander: Expander | None

    @property
    def client(self) -> httpx.AsyncClient:
        raise NotImplementedError

    def finish(self, ex: Exchange, status: int) -> None:
        raise NotImplementedError

    def _authorised(self, request: HTTPRequest) -> bool:
        raise NotImplementedError

    async def _upstream_chat(
        self, request: HTTPRequest, ex: Exchange, payload: bytes, body: dict[str, Any]
    ) -> Response:
        ex.bytes_up = len(payload)
        headers = upstream_headers(request.headers.raw, close=not self.config.pools_connections)
        headers = inject_context(ex.span, headers)
        marks = ex.marks if ex.span is not None else None
        sent = ex.marks["sent"] = time.perf_counter()
        ex.forward_ms = (sent - ex.start) * 1e3
        try:
            upstream = await open_stream(
                self.client, "POST", self._chat_url, headers=headers, content=payload, marks=marks
            )
        except httpx.HTTPError as exc:
            ex.error, response = transport_error(
                exc, self.config, while_="waiting for the response"
            )
            return response
        ex.marks["headers"] = time.perf_counter()
        ex.upstream_ttfb_ms = ms_since(sent)
        if upstream.status_code >= 400:
            return await self._upstream_failed(ex, upstream)
        want_report = request.headers.get(REPORT_HEADER, "").lower() in ("1", "true", "yes")
        if not ex.stream and self._small(upstream):
            whole = await self._read_whole(ex, upstream, sent)
            if isinstance(whole, Response):
                return whole
            content = await self._answer_expands(ex, headers, payload, whole)
            return self._whole_response(ex, upstream, content, report=want_report)
        model = body.get("model")
        report_event = (lambda: report_chunk(ex.report(), request_id=ex.id, model=model)) if (
            want_report
        ) else None  # fmt: skip
        out_headers = downstream_headers(upstream)
        if ex.stream:
            out_headers += _STREAM_HEADERS
        out_headers.append((b"x-request-id", ex.id.encode()))
        out_headers.append((b"server-timing", ex.server_timing(complete=False).encode()))
        return Relay(
            upstream, ex, headers=out_headers, sent=sent, sse=ex.stream,
            report_event=report_event, upstream_timeout_s=self.config.upstream_timeout_s,
            finish=self._relay_finished,
        )  # fmt: skip

    def _small(self, upstream: httpx.Response) -> bool:
        declared = upstream.headers.get("content-length", "")
        return declared.isdigit() and int(declared) <= self.config.max_buffered_body_bytes

    async def _read_whole(
        self, ex: Exchange, upstream: httpx.Response, sent: float
    ) -> bytes | Response:
        """A small non-streamed body (``_small``), read whole (or the client's error)."""
        try:
            content = await read_bounded(upstream, self.config.max_buffered_body_bytes)
        except httpx.HTTPError as exc:
            ex.error, response = transport_error(exc, self.config, while_="reading the response")
            return response
        finally:
            await upstream.aclose()
        if content is None:  # longer than it said
            ex.error = "upstream_length_mismatch"
            return error_response(502, "upstream body longer than its Content-Length",
                                  type_="upstream_error", code="upstream_invalid")  # fmt: skip
        ex.upstream_ms = ms_since(sent)
        ex.first_chunk_ms = ms_since(ex.start)
        ex.marks["first_relayed"] = time.perf_counter()
        return content

    def _whole_response(
        self, ex: Exchange, upstream: httpx.Response, content: bytes, *, report: bool
    ) -> Response:
        if report:
            content = _add_report(content, ex)
        ex.bytes_out = len(content)
        response = Response(content, status_code=upstream.status_code)
        response.raw_headers = [h for h in response.raw_headers if h[0] == b"content-length"]
        response.raw_headers += downstream_headers(upstream, drop={"content-encoding"})
        response.raw_headers.append((b"server-timing", ex.server_timing(complete=True).encode()))
        return response

    async def _answer_expands(
        self, ex: Exchange, headers: list[tuple[bytes, bytes]], payload: bytes, content: bytes
    ) -> bytes:
        """``content``, or the upstream's answer once the proxy has answered the model's
        expand calls (``serve/expand.py``); the last good answer when a round fails."""
        if not self.config.answer_expand or self.expander is None:
            return content
        for _ in range(self.config.max_expand_rounds):
            message = expand_calls(content)
            if message is None:
                break
            payload = continued_payload(payload, message, self.expander)
            self.metrics.expand_answered.inc(len(message["tool_calls"]))
            try:
                upstream = await open_stream(
                    self.client, "POST", self._chat_url, headers=headers, content=payload
                )
                try:
                    more = await read_bounded(upstream, self.config.max_buffered_body_bytes)
                finally:
                    await upstream.aclose()
            except httpx.HTTPError:
                break
            if upstream.status_code >= 400 or more is None:
                break
            content = more
        return content

    async def _relay_finished(self, ex: Exchange, status: int) -> None:
        self.admission.release(ex.id)
        self.finish(ex, status)

    async def _upstream_failed(self, ex: Exchange, upstream: httpx.Response) -> Response:
        try:
            content = await _read_error_body(upstream)
        finally:
            await upstream.aclose()
        ex.error = f"upstream_{upstream.status_code}"
        return upstream_error(
            upstream.status_code, content, retry_after=upstream.headers.get("retry-after")
        )

    # ---- other routes

    async def _forward_get(self, request: HTTPRequest, ex: Exchange) -> Response:
        if not self._authorised(request):
            return error_response(401, "missing or wrong X-PromptSlim-Key", code="invalid_api_key")
        model_id = request.path_params.get("model")
        try:
            url = (
                self.config.upstream_url("/models")
                if model_id is None
                else model_url(self.config.upstream, model_id)
            )
        except ForbiddenPath as exc:
            ex.error = "forbidden_path"
            return error_response(400, f"not forwarded: {exc}", param="path", code="invalid_path")
        sent = time.perf_counter()
        try:
            upstream = await open_stream(
                self.client,
                "GET",
                url,
                headers=upstream_headers(
                    request.headers.raw, close=not self.config.pools_connections
                ),
            )
            try:
                content = await read_bounded(upstream, self.config.max_buffered_body_bytes)
            finally:
                await upstream.aclose()
        except httpx.HTTPError as exc:
            ex.error, response = transport_error(
                exc, self.config, while_="waiting for the response"
            )
            return response
        ex.upstream_ttfb_ms = ex.upstream_ms = ms_since(sent)
        if upstream.status_code >= 400:
            ex.error = f"upstream_{upstream.status_code}"
            return upstream_error(
                upstream.status_code, (content or b"")[:_MAX_ERROR_BODY],
                retry_after=upstream.headers.get("retry-after"),
            )  # fmt: skip
        if content is None:
            ex.error = "upstream_too_large"
            return error_response(502, "upstream model list too large", type_="upstream_error",
                                  code="upstream_invalid")  # fmt: skip
        response = Response(content, status_code=upstream.status_code)
        response.raw_headers += downstream_headers(upstream, drop={"content-encoding"})
        return response


async def _read_error_body(upstream: httpx.Response) -> bytes:
    """The first ``_MAX_ERROR_BODY`` bytes of an error body (its message is all we use)."""
    parts: list[bytes] = []
    size = 0
    try:
        async for chunk in upstream.aiter_bytes():
            parts.append(chunk)
            size += len(chunk)
            if size >= _MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        pass
    return b"".join(parts)[:_MAX_ERROR_BODY]


def _add_report(content: bytes, ex: Exchange) -> bytes:
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return content  # not JSON (or nested too deeply): leave the upstream's bytes alone
    if not isinstance(data, dict):
        return content
    data["promptslim"] = ex.report()
    return json.dumps(data).encode()
