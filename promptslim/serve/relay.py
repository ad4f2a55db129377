"""Relaying an upstream response body to the client as it arrives, never holding it whole.

``Relay`` is a Starlette response that owns the admission slot and the upstream response until
the body ends or the client goes away; then the upstream request is closed too, so a gone
client stops the upstream's generation. A streamed (SSE) body may get the ``promptslim``
report event just before ``data: [DONE]``; when the upstream breaks mid-stream, the client gets
an error event that starts on a fresh event boundary (a partial line is ended first, so the
error is never glued onto it). A plain body is relayed byte for byte; when the upstream breaks
in the middle of it, the client's connection is closed before the final chunk, which tells an
HTTP client the body is incomplete.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .exchange import Exchange, ms_since

__all__ = ["CLIENT_CLOSED", "Relay", "disconnected"]

#: the status recorded for a request whose client went away before its answer was complete
#: (nginx's convention; it is never sent)
CLIENT_CLOSED = 499

_DONE = b"data: [DONE]"


class Relay(Response):
    """See the module docstring. ``finish`` is called once, when the relay is over, with the
    exchange and the status to record; ``report_event`` makes the report's SSE event."""

    def __init__(
        self,
        upstream: httpx.Response,
        ex: Exchange,
        *,
        headers: list[tuple[bytes, bytes]],
        sent: float,
        sse: bool,
        report_event: Callable[[], bytes] | None,
        upstream_timeout_s: float,
        finish: Callable[[Exchange, int], Awaitable[None]],
    ) -> None:
        super().__init__(status_code=upstream.status_code)
        self.upstream = upstream
        self.ex = ex
        self.relay_headers = headers
        self.sent = sent
        self.sse = sse
        self.report_event = report_event
        self.upstream_timeout_s = upstream_timeout_s
        self._finish = finish

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        relay = asyncio.ensure_future(self._relay(send))
        # uvicorn (ASGI spec 2.3) drops sends to a closed connection silently: watch for the
        # disconnect ourselves so a gone client stops the upstream's generation
        watch = asyncio.ensure_future(disconnected(receive))
        status = self.status_code
        try:
            await asyncio.wait((relay, watch), return_when=asyncio.FIRST_COMPLETED)
            if relay.done():
                try:
                    relay.result()
                except httpx.HTTPError:
                    status = 502  # a plain body broken mid-way: recorded as the gateway's error
                    raise
            else:
                self.ex.error = "client_disconnected"
                status = CLIENT_CLOSED
        finally:
            for task in (relay, watch):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
            await self.upstream.aclose()
            await self._finish(self.ex, status)

    async def _relay(self, send: Send) -> None:
        ex = self.ex
        await send(
            {
                "type": "http.response.start",
                "status": self.status_code,
                "headers": self.relay_headers,
            }
        )
        pending_report = self.report_event if self.sse else None
        tail = b"\n\n"  # what the last bytes relayed end with
        try:
            async for chunk in self.upstream.aiter_raw():
                got = time.perf_counter() if ex.first_chunk_ms is None else 0.0
                if got:
                    ex.first_chunk_ms = (got - ex.start) * 1e3
                if pending_report is not None and (at := chunk.find(_DONE)) >= 0:
                    ex.upstream_ms = ms_since(self.sent)
                    chunk = chunk[:at] + pending_report() + chunk[at:]
                    pending_report = None
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if got:
                    ex.first_relay_ms = ms_since(got)
                    ex.marks["first_relayed"] = time.perf_counter()
                ex.chunks += 1
                ex.bytes_out += len(chunk)
                if chunk:
                    tail = (tail + chunk)[-2:]
        except httpx.HTTPError as exc:
            if not self.sse:
                ex.error = _error_code(exc)
                raise  # the connection closes without the final chunk: the body is incomplete
            event = self._error_event(_error_code(exc), _broke_message(exc, self), tail)
            await send({"type": "http.response.body", "body": event, "more_body": True})
        else:
            if self.sse and not tail.endswith(b"\n\n"):  # the body ended inside an event
                message = "upstream stream ended in the middle of an event"
                event = self._error_event("upstream_truncated", message, tail)
                await send({"type": "http.response.body", "body": event, "more_body": True})
        if ex.upstream_ms is None:
            ex.upstream_ms = ms_since(self.sent)
        end = b"" if pending_report is None else pending_report()
        await send({"type": "http.response.body", "body": end, "more_body": False})

    def _error_event(self, code: str, message: str, tail: bytes) -> bytes:
        """An SSE error event (the 200 headers are gone already), on a fresh event boundary:
        a partial line before it is ended first, so the two are never read as one."""
        self.ex.error = code
        error = {"message": message, "type": "upstream_error", "code": code}
        boundary = b"" if tail.endswith(b"\n\n") else (b"\n" if tail.endswith(b"\n") else b"\n\n")
        return boundary + b"data: " + json.dumps({"error": error}).encode() + b"\n\n"


def _broke_message(exc: httpx.HTTPError, relay: Relay) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"upstream sent nothing for {relay.upstream_timeout_s:g} s"
    return f"upstream stream broke ({type(exc).__name__})"


def _error_code(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "upstream_timeout"
    return f"upstream_{type(exc).__name__}"


async def disconnected(receive: Receive) -> None:
    """Returns when the client has gone (its request body must have been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def report_chunk(report: dict[str, Any], *, request_id: str, model: Any) -> bytes:
    """The ``promptslim`` report as one ``chat.completion.chunk`` event (``choices: []``)."""
    chunk = {
        "id": f"promptslim-{request_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "promptslim": report,
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"
