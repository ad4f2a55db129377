"""Running the proxy under uvicorn, with graceful shutdown."""

from __future__ import annotations

import logging
import sys

import uvicorn

from ..pipeline import Pipeline
from .app import create_app
from .config import ServeConfig

__all__ = ["serve"]


def serve(config: ServeConfig, *, pipeline: Pipeline | None, log_level: str = "info") -> None:
    """Serve until SIGINT/SIGTERM. On a signal uvicorn stops accepting, lets in-flight
    requests (streams included) finish for up to ``graceful_shutdown_s``, then the app's
    lifespan closes the upstream client."""
    _log_to_stderr(log_level)
    app = create_app(config, pipeline=pipeline)
    uv = uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        log_level=log_level,
        access_log=False,  # our own JSON line per request replaces it
        server_header=False,
        # X-Forwarded-* rewriting of the client address: nothing here reads it, and it is
        # one more middleware on every request's way to the upstream
        proxy_headers=False,
        timeout_graceful_shutdown=max(1, round(config.graceful_shutdown_s)),
        backlog=4096,  # bursts of clients queue in the kernel, not refused
    )
    uvicorn.Server(uv).run()


def _log_to_stderr(level: str) -> None:
    """The JSON lines go to stderr as they are, unless the application set up logging."""
    logger = logging.getLogger("promptslim.serve")
    logger.setLevel(level.upper())
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
