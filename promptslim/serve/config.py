"""The proxy's settings: one frozen, keyword-only object, checked when built."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from .admission import AdmissionPolicy

__all__ = ["MAX_UPSTREAM_SPARES", "ServeConfig"]

#: the most upstream connections one worker keeps open ahead of requests
MAX_UPSTREAM_SPARES = 64


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
    #: prompt text in logs (docs/architecture.md, invariant 8: off by default). When True, a failed
    #: pipeline's exception message (which may quote the prompt) goes into its log line, and at
    #: DEBUG each slimmed request's messages are logged; for debugging on a trusted machine only
    log_content: bool = False
    #: run the pipeline once on a built-in sample at start-up (``Pipeline.warm_up``), so the
    #: first client does not wait for models and dictionaries to load
    warm_up: bool = True
    #: deprecated and ignored: every upstream is spoken to by httpx's own pooled transport
    #: (httpcore and h11). ``"promptslim"`` named a hand-written HTTP/1.1 transport that could
    #: hand one client another client's answer; it is gone, and naming it only warns
    upstream_transport: str = "httpx"
    #: reuse upstream connections across requests. HTTP/1.1 cannot tell an answer from bytes an
    #: upstream sent past the end of its previous one, and pooled clients (httpcore, aiohttp)
    #: then hand those bytes to the next request on the connection: another client's answer.
    #: None (the default) pools only ``https://`` upstreams, where a handshake costs a round
    #: trip or more and the upstream is a provider; an ``http://`` upstream gets a fresh
    #: connection per request, asked to close after it (opened ahead: ``upstream_spares``)
    upstream_keepalive: bool | None = None
    #: upstream connections opened ahead while connections are not reused: each waits, never
    #: used, for the next request, which then skips the TCP connect (``serve/spares.py``), and
    #: is closed after that one response like any other. Each is an idle connection the
    #: upstream holds (a thread, on thread-per-connection servers); 0: connect per request
    upstream_spares: int = 2
    #: a spare unused this long is closed (not replaced until a request needs the upstream
    #: again), below the seconds common servers wait for a first request before they close
    upstream_spare_idle_s: float = 2.0
    #: the longest a client may take to send a request's headers (from its connection's start,
    #: or the end of its previous response); past it the connection is closed (slowloris)
    header_timeout_s: float = 10.0
    #: the longest a client may take to send a request's body once its headers are in; past it
    #: ``408`` and the connection is closed
    body_timeout_s: float = 30.0
    #: a request's header block, in bytes; a larger one gets ``400`` and the connection closes
    max_header_bytes: int = 32 * 1024
    #: headers per request; more get ``431``
    max_headers: int = 100
    #: open client connections per worker process; one more is closed as soon as it is
    #: accepted. Idle keep-alive connections count: they close after ``keepalive_s``
    max_connections: int = 1024
    #: idle time after a response before a keep-alive connection is closed. Above the 5 s
    #: that httpx (so the OpenAI SDK) keeps an idle connection: a server that closes first
    #: races a client sending its next request on that connection, which is then reset
    keepalive_s: float = 8.0
    #: the pipeline's time budget; past it the original request is forwarded unchanged (and the
    #: log line, the ``promptslim`` report and ``/metrics`` say so): slimming never makes a
    #: request slower than not slimming it. The abandoned work ends by itself, bounded by the
    #: request limits (``promptslim.limits``)
    pipeline_timeout_s: float = 1.0
    #: a non-streamed upstream body whose ``Content-Length`` is at most this is read whole
    #: before it is sent on (its ``Server-Timing`` then has the whole exchange, and the
    #: ``promptslim`` report can be added); a larger or unsized one is relayed as it comes
    max_buffered_body_bytes: int = 1024 * 1024
    #: answer the model's ``promptslim_expand`` calls in the proxy (non-streamed requests, a
    #: pipeline whose tools stage has ``expand_tool=True``): the originals are appended and the
    #: upstream asked again, at most ``max_expand_rounds`` times (``promptslim/serve/expand.py``)
    answer_expand: bool = False
    max_expand_rounds: int = 3
    #: processes serving the port (``serve`` only; ``create_app`` serves in one). The pipeline
    #: runs on one core per process, so this is how the proxy uses more than one. Each worker
    #: admits its share of ``max_concurrency`` and ``max_queue`` (rounded up) and loads its own
    #: models; ``/metrics`` adds up every worker's figures
    workers: int = 1
    #: where the workers leave their metrics for each other (``serve`` makes a temporary folder
    #: when ``workers`` > 1; None: one process, nothing shared)
    metrics_dir: str | None = None
    #: admission classes, highest priority first, named by the ``X-PromptSlim-Priority``
    #: header (``serve.admission``); empty: one class, first come first served
    priority_classes: tuple[str, ...] = ()
    #: the class of a request that names none or an unknown one (None: the lowest)
    default_priority: str | None = None
    #: within a class, the waiting request with the fewest (slimmed) prompt tokens goes first
    shortest_first: bool = False
    #: requests one tenant (``X-PromptSlim-Tenant``, else its ``Authorization``) may have at
    #: the upstream at once, per worker; None: no cap
    tenant_max_concurrency: int | None = None
    #: per class, the longest queue wait (s) before 429, instead of ``queue_timeout_s``
    queue_budget_s: dict[str, float] = field(default_factory=dict)

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
        ints = ("max_concurrency", "max_body_bytes", "port", "workers", "max_header_bytes",
                "max_headers", "max_connections", "max_buffered_body_bytes", "max_expand_rounds")  # fmt: skip
        for name in ints:
            if getattr(self, name) < 1:
                raise ConfigError("must be at least 1", field=name)
        if not 0 <= self.upstream_spares <= MAX_UPSTREAM_SPARES:
            raise ConfigError(f"expected 0..{MAX_UPSTREAM_SPARES}", field="upstream_spares")
        if self.port > 65535:
            raise ConfigError("must be a TCP port, 1..65535", field="port")
        for name in ("max_queue", "retry_after_s"):
            if getattr(self, name) < 0:
                raise ConfigError("must not be negative", field=name)
        if self.upstream_transport not in ("promptslim", "httpx"):
            raise ConfigError("expected 'httpx'", field="upstream_transport")
        if self.upstream_transport == "promptslim":
            warnings.warn(
                "upstream_transport='promptslim' is deprecated and ignored: the proxy always "
                "uses httpx's transport",
                DeprecationWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "upstream_transport", "httpx")
        timeouts = ("queue_timeout_s", "upstream_timeout_s", "connect_timeout_s",
                    "header_timeout_s", "body_timeout_s", "keepalive_s", "pipeline_timeout_s",
                    "upstream_spare_idle_s")  # fmt: skip
        for name in timeouts:
            if not getattr(self, name) > 0:
                raise ConfigError("must be positive", field=name)
        self.admission_policy()  # a bad class, cap or budget is a ConfigError now, not later

    def admission_policy(self) -> AdmissionPolicy:
        """How the proxy orders and caps waiting requests (``serve.admission``)."""
        return AdmissionPolicy(
            classes=tuple(self.priority_classes),
            default_class=self.default_priority,
            shortest_first=self.shortest_first,
            tenant_limit=self.tenant_max_concurrency,
            queue_budget_s=dict(self.queue_budget_s),
        )

    @property
    def pools_connections(self) -> bool:
        """Whether upstream connections are reused (``upstream_keepalive``, resolved)."""
        if self.upstream_keepalive is None:
            return self.upstream.startswith("https://")
        return self.upstream_keepalive

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
