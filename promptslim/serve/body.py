"""A client's request body: read within its size and time bounds, parsed as strict JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request as HTTPRequest
from starlette.responses import Response

from .config import ServeConfig
from .responses import error_response

__all__ = ["parse_body", "read_body"]

T = TypeVar("T")


async def read_body(request: HTTPRequest, config: ServeConfig) -> bytes | Response:
    """The body, bounded in size (``413``) and in time (``408``: a client that sends a
    short body slowly must not hold a connection and a task for good)."""
    limit = config.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return _too_large(limit)  # refused before reading a byte of it
    parts: list[bytes] = []

    async def read() -> Response | None:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return _too_large(limit)
            parts.append(chunk)
        return None

    try:
        refused = await _within(read(), config.body_timeout_s)
    except asyncio.TimeoutError:
        return error_response(
            408, f"request body not received within {config.body_timeout_s:g} s",
            param="body", code="body_timeout", headers={"Connection": "close"},
        )  # fmt: skip
    return refused if refused is not None else b"".join(parts)


async def _within(work: Coroutine[Any, Any, T], seconds: float) -> T:
    """``await work`` within ``seconds`` (``asyncio.TimeoutError`` past them). On Python 3.11+
    in this task: ``wait_for`` runs ``work`` as a task of its own, two event-loop turns more on
    every request's way to the upstream, though the body has usually arrived already."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await work
    return await asyncio.wait_for(work, seconds)


def parse_body(raw: bytes) -> dict[str, Any] | Response:
    try:
        body = json.loads(raw, parse_constant=_not_json)
    except ValueError as exc:
        return error_response(400, f"malformed JSON body: {exc}", param="body", code="invalid_json")
    except RecursionError:
        return error_response(
            400, "malformed JSON body: nested too deeply", param="body", code="invalid_json"
        )
    if not isinstance(body, dict):
        return error_response(400, "expected a JSON object", param="body")
    return body


def _not_json(name: str) -> Any:
    """``json.loads`` accepts NaN and Infinity; JSON does not, and an upstream server may
    fail on them or read them differently, so a body that holds one is refused here."""
    raise ValueError(f"{name} is not a JSON value")


def _too_large(limit: int) -> Response:
    return error_response(
        413, f"request body over {limit} bytes", param="body", code="body_too_large",
        headers={"Connection": "close"},
    )  # fmt: skip
