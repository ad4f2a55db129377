"""``bench_proxy.py``'s seam: a streaming OpenAI-compatible upstream with a fixed time to first
chunk and fixed gaps after it, served by uvicorn (one process, or several as the proxy's
workers are), so the proxy's own added time is all that differs between the two paths."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["run_seam", "seam_app"]

_SEAM_ENV = "BENCH_PROXY_SEAM"


def seam_app() -> Any:
    """The seam's Starlette app; its timings come from ``BENCH_PROXY_SEAM`` (a factory, so
    uvicorn's worker processes can each build it from an import string)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    timing = json.loads(os.environ[_SEAM_ENV])
    ttft_ms, chunks, itl_ms = timing["ttft_ms"], timing["chunks"], timing["itl_ms"]

    def sse(text: str) -> bytes:
        obj = {"id": "c", "object": "chat.completion.chunk", "model": "seam",
               "choices": [{"index": 0, "delta": {"content": text}}], "sent_ns": time.monotonic_ns()}  # fmt: skip
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    async def stream() -> Any:
        await asyncio.sleep(ttft_ms / 1e3)
        yield sse("Hello")
        for i in range(chunks):
            await asyncio.sleep(itl_ms / 1e3)
            yield sse(f" t{i}")
        yield b"data: [DONE]\n\n"

    async def chat(request: Request) -> Response:
        await request.body()
        return StreamingResponse(stream(), media_type="text/event-stream")

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "seam"}]})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/models", models)])  # fmt: skip


def run_seam(port: int, *, ttft_ms: float, chunks: int, itl_ms: float, workers: int) -> None:
    import uvicorn

    from promptslim.serve.server import run_workers

    os.environ[_SEAM_ENV] = json.dumps({"ttft_ms": ttft_ms, "chunks": chunks, "itl_ms": itl_ms})
    options: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": port,
        "log_level": "warning",
        "access_log": False,
        "backlog": 4096,
        # the proxy's loop (uvicorn's "auto" would take uvloop where installed; promptslim's
        # serve extra does not install it)
        "loop": "asyncio",
    }
    app = f"{Path(__file__).stem}:seam_app"
    if workers == 1:
        uvicorn.run(app, factory=True, **options)
    else:  # as the proxy's workers: with TCP_NODELAY (see run_workers)
        run_workers(app, workers, **options)
