"""The proxy's settings: one frozen, keyword-only object, checked when built."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError

__all__ = ["ServeConfig"]


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """Everything ``promptslim serve`` needs besides the Pipeline.

    ``upstream`` is the base URL an OpenAI client would use (``http://host:8000/v1``); a URL
    with no path gets ``/v1``. It is fixed here: no request field or header can change it.
    ``upstream_timeout_s`` bounds every wait for the upstream (its response headers, and each
    gap between chunks); past it the client gets ``504`` (or, mid-stream, an SSE error event).
    """

    upstream: str
    host: str = "127.0.0.1"
    port: int = 8787
    #: requests talking to the upstream at once; more wait in the queue
    max_concurrency: int = 64
    #: requests allowed to wait; beyond this, 429 at once instead of a growing TTFT
    max_queue: int = 256
    #: the longest a request waits in the queue before it gets 429
    queue_timeout_s: float = 30.0
    upstream_timeout_s: float = 60.0
    connect_timeout_s: float = 5.0
    max_body_bytes: int = 8 * 1024 * 1024
    #: when set, clients must send it in ``X-PromptSlim-Key`` (``Authorization`` is the upstream's)
    api_key: str | None = field(default=None, repr=False)
    retry_after_s: int = 1
    graceful_shutdown_s: float = 30.0
    #: prompt text in logs (DESIGN.md invariant 8: off by default). When True, a failed
    #: pipeline's exception message (which may quote the prompt) goes into its log line, and at
    #: DEBUG each slimmed request's messages are logged; for debugging on a trusted machine only
    log_content: bool = False
    #: run the pipeline once on a built-in sample at start-up (``Pipeline.warm_up``), so the
    #: first client does not wait for models and dictionaries to load
    warm_up: bool = True
    #: the client side of ``http://`` upstreams: ``"promptslim"``, a lean HTTP/1.1 transport
    #: (one socket send per request, body bytes relayed as they come; ``promptslim/http11.py``), or
    #: ``"httpx"``, httpx's default transport. ``https://`` upstreams always use httpx's.
    upstream_transport: str = "promptslim"
    #: processes serving the port (``serve`` only; ``create_app`` serves in one). The pipeline
    #: runs on one core per process, so this is how the proxy uses more than one. Each worker
    #: admits its share of ``max_concurrency`` and ``max_queue`` (rounded up) and loads its own
    #: models; ``/metrics`` adds up every worker's figures
    workers: int = 1
    #: where the workers leave their metrics for each other (``serve`` makes a temporary folder
    #: when ``workers`` > 1; None: one process, nothing shared)
    metrics_dir: str | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError("expected an http(s) URL with a host", field="upstream")
        try:
            upstream_port = parts.port  # ValueError when not a number in 0..65535
        except ValueError as exc:
            raise ConfigError(f"invalid port: {exc}", field="upstream") from exc
        if upstream_port == 0:
            raise ConfigError("invalid port: expected 1..65535", field="upstream")
        if not parts.path.strip("/"):
            # a bare host means the OpenAI layout: the routes live under /v1
            object.__setattr__(self, "upstream", f"{parts.scheme}://{parts.netloc}/v1")
        object.__setattr__(self, "upstream", self.upstream.rstrip("/"))
        for name in ("max_concurrency", "max_body_bytes", "port", "workers"):
            if getattr(self, name) < 1:
                raise ConfigError("must be at least 1", field=name)
        if self.port > 65535:
            raise ConfigError("must be a TCP port, 1..65535", field="port")
        for name in ("max_queue", "retry_after_s"):
            if getattr(self, name) < 0:
                raise ConfigError("must not be negative", field=name)
        if self.upstream_transport not in ("promptslim", "httpx"):
            raise ConfigError("expected 'promptslim' or 'httpx'", field="upstream_transport")
        for name in ("queue_timeout_s", "upstream_timeout_s", "connect_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError("must be positive", field=name)

    def share(self, total: int) -> int:
        """One worker's part of a limit that ``total`` sets for all of them (rounded up)."""
        return -(-total // self.workers)

    def upstream_url(self, path: str) -> str:
        """The upstream URL for a route below ``/v1`` (``"/chat/completions"``)."""
        return self.upstream + path

    def as_dict(self) -> dict[str, Any]:
        """The settings, with the API key masked (this goes to logs)."""
        data = dataclasses.asdict(self)
        data["api_key"] = "***" if self.api_key else None
        return data
