"""OpenAI-style error bodies, and how upstream errors map onto the proxy's status codes."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

__all__ = ["error_response", "upstream_error", "upstream_status"]

_MAX_MESSAGE = 2000


def error_response(
    status: int,
    message: str,
    *,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response:
    """``{"error": {"message", "type", "param", "code", ...}}``, as OpenAI clients parse it."""
    error: dict[str, Any] = {"message": message, "type": type_, "param": param, "code": code}
    error.update(extra)
    return Response(
        json.dumps({"error": error}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def upstream_status(status: int) -> int:
    """Client errors, rate limits and the upstream's own 503/504 keep their code (the client
    can act on them); any other upstream failure is the gateway's ``502``."""
    if 400 <= status < 500 or status in (503, 504):
        return status
    return 502


def upstream_error(status: int, body: bytes, *, retry_after: str | None) -> Response:
    """The upstream's error with its own message, under the mapped status."""
    message, type_, param, code = _parse_upstream_error(body)
    headers = {"Retry-After": retry_after} if retry_after else None
    return error_response(
        upstream_status(status),
        f"upstream returned {status}: {message}",
        type_=type_ or ("invalid_request_error" if status < 500 else "upstream_error"),
        param=param,
        code=code,
        headers=headers,
        upstream_status=status,
    )


def _parse_upstream_error(body: bytes) -> tuple[str, str | None, str | None, str | None]:
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:_MAX_MESSAGE] or "(empty body)", None, None, None
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, str):
            return err[:_MAX_MESSAGE], None, None, None
        if isinstance(err, dict):
            message = err.get("message") or err.get("detail") or json.dumps(err)
            return (
                str(message)[:_MAX_MESSAGE],
                _str_or_none(err.get("type")),
                _str_or_none(err.get("param")),
                _str_or_none(err.get("code")),
            )
    return text[:_MAX_MESSAGE], None, None, None


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
