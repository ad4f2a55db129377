"""The proxy's side towards the upstream: one pooled httpx client, which headers cross in each
direction, and how transport failures become status codes.

HTTP is spoken by httpx's own transport (httpcore and h11): framing, connection pooling and
keep-alive are what that library has spent years on. Even so, no HTTP/1.1 client can tell bytes
an upstream wrote past a complete body from the next answer on the same connection, so plain
``http://`` upstream connections are not reused by default (``ServeConfig.upstream_keepalive``);
a few are opened ahead instead, each for one request (``spares.py``).

Hop-by-hop headers (RFC 9110 section 7.6.1), and any header the sender's own ``Connection``
header names, stop at the proxy in both directions.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

import httpx
from starlette.responses import Response

from .config import ServeConfig
from .responses import error_response
from .spares import SpareConnections, SpareTransport

__all__ = [
    "KEY_HEADER",
    "REPORT_HEADER",
    "downstream_headers",
    "make_client",
    "open_stream",
    "read_bounded",
    "transport_error",
    "upstream_headers",
]

REPORT_HEADER = "x-promptslim-report"
KEY_HEADER = "x-promptslim-key"

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
     "te", "trailer", "trailers", "transfer-encoding", "upgrade", "content-length", "host"}
)  # fmt: skip
# our own headers stop here; identity encoding so every byte can be relayed as it comes
_NOT_UPSTREAM = _HOP_BY_HOP | {REPORT_HEADER, KEY_HEADER, "accept-encoding"}
# uvicorn writes its own date/server; the proxy's own request id replaces the upstream's
_NOT_DOWNSTREAM = _HOP_BY_HOP | {"date", "server", "x-request-id"}


def _connection_named(headers: Iterable[tuple[bytes, bytes]]) -> set[str]:
    """The header names a ``Connection`` header lists: hop-by-hop for this message only."""
    named: set[str] = set()
    for key, value in headers:
        if key.lower() == b"connection":
            named.update(t.strip().lower() for t in value.decode("latin-1").split(",") if t.strip())
    return named


def upstream_headers(
    client_headers: list[tuple[bytes, bytes]], *, close: bool
) -> list[tuple[bytes, bytes]]:
    """The client's headers as they go upstream (``Authorization`` included: it is the
    upstream's), with ``Accept-Encoding: identity`` so bodies can be relayed as they come, and
    ``Connection: close`` when the connection is not reused (the upstream then closes first,
    so its TIME_WAIT does not use up the proxy's ephemeral ports)."""
    drop = _NOT_UPSTREAM | _connection_named(client_headers)
    headers = [(k, v) for k, v in client_headers if k.lower().decode("latin-1") not in drop]
    headers.append((b"accept-encoding", b"identity"))
    if close:
        headers.append((b"connection", b"close"))
    return headers


def downstream_headers(
    upstream: httpx.Response, *, drop: frozenset[str] | set[str] = frozenset()
) -> list[tuple[bytes, bytes]]:
    """The upstream's response headers as they go to the client; its ``x-request-id``, if any,
    as ``x-upstream-request-id`` (the proxy's own id is the client's ``x-request-id``)."""
    raw = upstream.headers.raw
    excluded = _NOT_DOWNSTREAM | _connection_named(raw) | drop
    out = [(k, v) for k, v in raw if k.lower().decode("latin-1") not in excluded]
    out += [(b"x-upstream-request-id", v) for k, v in raw if k.lower() == b"x-request-id"]
    return out


def make_client(config: ServeConfig) -> httpx.AsyncClient:
    """The client, shared by all requests; admitted requests never wait for a connection (a
    few spare ones serve ``/v1/models``). Connections are kept for reuse only when
    ``config.pools_connections`` (see ``ServeConfig.upstream_keepalive``); otherwise each
    request gets a fresh one, opened ahead when ``config.upstream_spares`` (``spares.py``;
    called in the app's lifespan, where the first spares are opened)."""
    connections = config.share(config.max_concurrency) + 8
    kept = connections if config.pools_connections else 0
    timeout = httpx.Timeout(
        connect=config.connect_timeout_s,
        read=config.upstream_timeout_s,
        write=config.upstream_timeout_s,
        pool=config.upstream_timeout_s,
    )
    # a pooled connection idle 4 s is dropped: uvicorn (so vLLM and SGLang) closes idle ones
    # at 5 s, and a client that keeps them as long or longer sends requests on connections
    # the server is closing at that moment (reset)
    limits = httpx.Limits(
        max_connections=connections, max_keepalive_connections=kept, keepalive_expiry=4.0
    )
    transport = None
    if not config.pools_connections and config.upstream_spares:
        parts = urlsplit(config.upstream)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        spares = SpareConnections(
            parts.hostname or "", port, spares=config.upstream_spares,
            idle_s=config.upstream_spare_idle_s, connect_timeout_s=config.connect_timeout_s,
        )  # fmt: skip
        transport = SpareTransport(spares, limits=limits)
        spares.refill()
    # a cookie jar that keeps nothing: the client is shared by every request, so a cookie the
    # upstream set in one client's answer would otherwise go up with every other client's
    # requests (a client's own Cookie header is forwarded as it came)
    no_cookies = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    # trust_env=False: no proxy variable or netrc can send requests elsewhere
    return httpx.AsyncClient(
        timeout=timeout, limits=limits, trust_env=False, transport=transport, cookies=no_cookies
    )


async def open_stream(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    headers: list[tuple[bytes, bytes]],
    content: bytes | None = None,
    marks: dict[str, float] | None = None,
) -> httpx.Response:
    """Send a request; return once its response headers are in (the body unread). With
    ``marks``, a new connection's TCP connect is timed into it (httpx's trace extension)."""
    extensions = {"trace": _connect_marks(marks)} if marks is not None else None
    request = client.build_request(
        method, url, headers=headers, content=content, extensions=extensions
    )
    return await client.send(request, stream=True)


def _connect_marks(marks: dict[str, float]) -> Any:
    names = {
        "connection.connect_tcp.started": "connect_started",
        "connection.connect_tcp.complete": "connect_done",
    }

    async def trace(event: str, info: Any) -> None:
        if event in names:
            marks[names[event]] = time.perf_counter()

    return trace


async def read_bounded(response: httpx.Response, limit: int) -> bytes | None:
    """The (decoded) body, or None when it is over ``limit`` bytes (then it is not read on)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


def transport_error(
    exc: httpx.HTTPError, config: ServeConfig, *, while_: str
) -> tuple[str, Response]:
    """``(error code for the log, the client's answer)`` for a failed upstream exchange."""
    if isinstance(exc, httpx.TimeoutException):
        connect = isinstance(exc, httpx.ConnectTimeout)
        limit = config.connect_timeout_s if connect else config.upstream_timeout_s
        message = f"upstream timed out after {limit:g} s {while_}"
        return "upstream_timeout", error_response(
            504, message, type_="upstream_error", code="upstream_timeout"
        )
    name = type(exc).__name__
    message = f"upstream unreachable or invalid ({name}) {while_}"
    return f"upstream_{name}", error_response(
        502, message, type_="upstream_error", code="upstream_unreachable"
    )
