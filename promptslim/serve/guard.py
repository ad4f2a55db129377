"""Bounds on what one client connection can hold: its headers' time, size and count, and how
many connections are open at once.

uvicorn bounds idle keep-alive connections and (through h11) the size of a header block, but
nothing bounds the time a client takes to send its headers: a connection that sends one byte
every few seconds stays open for good, and a few thousand of them exhaust the proxy's file
descriptors (slowloris). Two small parts close that:

- ``GuardedH11Protocol``: uvicorn's h11 protocol, passed to uvicorn through its documented
  ``http=`` option. It closes a connection that has not completed a request's headers within
  ``header_timeout_s`` of opening or of its previous response, and closes a connection at once
  when ``max_connections`` are already open. It only extends asyncio's public protocol methods
  (``connection_made`` / ``connection_lost``) and keeps its state in attributes of its own.
- ``GuardMiddleware``: the ASGI side. A request reaching it has complete headers, so it stops
  that connection's header clock, answers ``431`` beyond ``max_headers``, and starts the clock
  again when the response is complete.

The two find each other through a ``ConnectionGuard`` that the process installs
(``install_guard``): uvicorn makes protocol objects by class, so the class reaches its guard
through this module; the middleware holds the same object. A connection is known to both by its
peer address, which is unique among a process's open connections.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from .responses import error_response

__all__ = ["ConnectionGuard", "GuardMiddleware", "GuardedH11Protocol", "install_guard"]

Peer = tuple[str, int]


@dataclass(eq=False)
class ConnectionGuard:
    """The limits, and the connections of this process that are open now."""

    header_timeout_s: float
    max_connections: int
    max_headers: int
    #: called with the reason (``header_timeout``, ``connection_cap``) when a limit closes one
    on_close: Callable[[str], None] | None = None
    _open: dict[Peer, GuardedH11Protocol] = field(default_factory=dict)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def count_closed(self, reason: str) -> None:
        if self.on_close is not None:
            self.on_close(reason)

    def request_started(self, peer: Peer | None) -> None:
        connection = self._open.get(peer) if peer else None
        if connection is not None:
            connection.stop_header_clock()

    def request_finished(self, peer: Peer | None) -> None:
        connection = self._open.get(peer) if peer else None
        if connection is not None:
            connection.start_header_clock()


_lock = threading.Lock()
_installed: ConnectionGuard | None = None


def install_guard(guard: ConnectionGuard) -> None:
    """Make ``guard`` the one this process's ``GuardedH11Protocol`` connections report to."""
    global _installed
    with _lock:
        _installed = guard


def installed_guard() -> ConnectionGuard | None:
    return _installed


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap (see the module)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._guard = installed_guard()
        self._peer = _peer(transport)
        self._header_clock: asyncio.TimerHandle | None = None
        self._guard_transport = transport
        guard = self._guard
        if guard is None or self._peer is None:
            return
        if guard.open_connections >= guard.max_connections:
            guard.count_closed("connection_cap")
            transport.close()
            return
        guard._open[self._peer] = self
        self.start_header_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_header_clock()
        guard = getattr(self, "_guard", None)
        peer = getattr(self, "_peer", None)
        if guard is not None and peer is not None and guard._open.get(peer) is self:
            del guard._open[peer]
        super().connection_lost(exc)

    def start_header_clock(self) -> None:
        self.stop_header_clock()
        guard = self._guard
        if guard is not None:
            loop = asyncio.get_running_loop()
            self._header_clock = loop.call_later(guard.header_timeout_s, self._headers_too_slow)

    def stop_header_clock(self) -> None:
        clock = getattr(self, "_header_clock", None)
        if clock is not None:
            clock.cancel()
            self._header_clock = None

    def _headers_too_slow(self) -> None:
        self._header_clock = None
        if self._guard is not None:
            self._guard.count_closed("header_timeout")
        self._guard_transport.close()


def _peer(transport: asyncio.BaseTransport) -> Peer | None:
    """The peer address as uvicorn puts it in ``scope["client"]``: (host, port)."""
    info: Any = transport.get_extra_info("peername")
    if isinstance(info, (tuple, list)) and len(info) >= 2:
        return str(info[0]), int(info[1])
    return None


class GuardMiddleware:
    """ASGI middleware: the header count, and the header clock between requests."""

    def __init__(self, app: ASGIApp, guard: ConnectionGuard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        peer: Peer | None = (str(client[0]), int(client[1])) if client else None
        self.guard.request_started(peer)
        try:
            if len(scope["headers"]) > self.guard.max_headers:
                response = error_response(
                    431, f"more than {self.guard.max_headers} request headers",
                    param="headers", code="too_many_headers", headers={"Connection": "close"},
                )  # fmt: skip
                await response(scope, receive, send)
                return
            await self.app(scope, receive, _finishing(send, self.guard, peer))
        finally:
            self.guard.request_finished(peer)


def _finishing(send: Send, guard: ConnectionGuard, peer: Peer | None) -> Send:
    """``send``, starting the header clock as soon as the last body message goes out (a
    streamed response may end long before the handler's own clean-up)."""

    async def wrapped(message: Message) -> None:
        await send(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            guard.request_finished(peer)

    return wrapped
