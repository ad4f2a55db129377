"""Running the proxy under uvicorn, with graceful shutdown, in one process or several."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import uvicorn
from starlette.applications import Starlette

from ..errors import BackendError, ConfigError
from ..pipeline import Pipeline
from .app import create_app
from .config import ServeConfig
from .guard import GuardedH11Protocol
from .metrics import MULTIPROC_ENV

__all__ = ["serve"]

#: how the parent hands a worker its settings (a spawned worker starts from an import string)
_WORKER_ENV = "PROMPTSLIM_SERVE_WORKER"
#: the proxy's own API key, kept out of the settings above so it is never in a log or a dump
_WORKER_KEY_ENV = "PROMPTSLIM_SERVE_WORKER_KEY"


def serve(config: ServeConfig, *, pipeline: Pipeline | None, log_level: str = "info") -> None:
    """Serve until SIGINT/SIGTERM. On a signal uvicorn stops accepting, lets in-flight
    requests (streams included) finish for up to ``graceful_shutdown_s``, then the app's
    lifespan closes the upstream client.

    With ``config.workers`` > 1 the port is bound once and served by that many processes
    (uvicorn's supervisor restarts one that dies). Each builds its own pipeline from
    ``pipeline.to_config()``, so the pipeline must be one a config can describe (built-in
    stages and options, as ``Pipeline.from_config`` makes them)."""
    _log_to_stderr(log_level)
    _check_bindable(config.host, config.port)
    options: dict[str, Any] = {
        "host": config.host,
        "port": config.port,
        "log_level": log_level,
        "access_log": False,  # our own JSON line per request replaces it
        "server_header": False,
        # X-Forwarded-* rewriting of the client address: nothing here reads it, and it is
        # one more middleware on every request's way to the upstream
        "proxy_headers": False,
        "timeout_graceful_shutdown": max(1, round(config.graceful_shutdown_s)),
        "backlog": 4096,  # bursts of clients queue in the kernel, not refused
        # h11 bounds a header block's size; the guarded protocol adds the header deadline and
        # the connection cap (promptslim/serve/guard.py)
        "http": GuardedH11Protocol,
        "h11_max_incomplete_event_size": config.max_header_bytes,
        "timeout_keep_alive": config.keepalive_s,
    }
    if config.workers == 1:
        app = create_app(config, pipeline=pipeline)
        with _startup_failure():
            uvicorn.Server(uvicorn.Config(app, **options)).run()
        return
    pipeline_config = _describable(pipeline)
    folder = tempfile.mkdtemp(prefix="promptslim-serve-metrics-")
    settings = dataclasses.asdict(dataclasses.replace(config, api_key=None, metrics_dir=folder))
    os.environ[_WORKER_ENV] = json.dumps(
        {"config": settings, "pipeline": pipeline_config, "log_level": log_level}
    )
    if config.api_key:
        os.environ[_WORKER_KEY_ENV] = config.api_key
    # the workers keep their metrics in files there (prometheus_client's multiprocess mode,
    # chosen when a worker first imports it) and each scrape adds them all up
    os.environ[MULTIPROC_ENV] = folder
    try:
        with _startup_failure():
            run_workers(f"{__name__}:worker_app", config.workers, **options)
    finally:
        for name in (_WORKER_ENV, _WORKER_KEY_ENV, MULTIPROC_ENV):
            os.environ.pop(name, None)
        shutil.rmtree(folder, ignore_errors=True)


def _check_bindable(host: str, port: int) -> None:
    """Bind ``host:port`` once, as uvicorn will, so that a port in use or an address this
    machine does not have is a ``ConfigError`` naming it, not uvicorn's exit status 3 (which
    promptslim's CLI reserves for an infeasible budget)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise ConfigError(f"cannot resolve {host!r}: {exc.strerror or exc}", field="host") from exc
    for family, kind, proto, _, address in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                # as asyncio binds: a port left in TIME_WAIT by a previous run is free
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}", field="port"
            ) from exc


@contextlib.contextmanager
def _startup_failure() -> Iterator[None]:
    """uvicorn's ``sys.exit(3)`` when it cannot start (the lifespan failed, or the port was
    taken after ``_check_bindable``) as a ``BackendError``: exit status 3 means an infeasible
    budget to promptslim's callers."""
    try:
        yield
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        raise BackendError(
            f"the server did not start (exit status {exc.code}; see the log above)",
            backend="serve",
        ) from exc


def run_workers(app: str, workers: int, **options: Any) -> None:
    """``uvicorn.run(app, factory=True, workers=workers, ...)`` on a listening socket bound
    here with TCP_NODELAY, handed to uvicorn by its file descriptor.

    uvicorn's own socket for several workers is ``socket.socket(family)``, whose protocol
    number reads 0, and asyncio sets TCP_NODELAY only on sockets whose protocol reads
    IPPROTO_TCP; every connection a worker accepted then ran Nagle's algorithm, and a chunk
    written while the previous one was unacknowledged waited for the client's delayed ACK (up
    to 40 ms on Linux). Linux and the BSDs copy the option to the sockets a listening socket
    accepts. (One process binds through asyncio, which sets it itself.)"""
    host, port = options.pop("host"), options.pop("port")
    sock = _listening_socket(host, port, backlog=options.get("backlog", 2048))
    try:
        uvicorn.run(app, factory=True, workers=workers, fd=sock.fileno(), **options)
    finally:
        sock.close()


def _listening_socket(host: str, port: int, *, backlog: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


def worker_app() -> Starlette:
    """The app of one worker process (uvicorn calls this by its import string)."""
    raw = os.environ.get(_WORKER_ENV)
    if raw is None:
        raise ConfigError("set by promptslim serve for its workers", field=_WORKER_ENV)
    data = json.loads(raw)
    config = ServeConfig(**{**data["config"], "api_key": os.environ.get(_WORKER_KEY_ENV)})
    pipeline = None if data["pipeline"] is None else Pipeline.from_config(data["pipeline"])
    _log_to_stderr(data["log_level"])  # a spawned process starts with no logging set up
    return create_app(config, pipeline=pipeline)


def _describable(pipeline: Pipeline | None) -> dict[str, Any] | None:
    """``pipeline.to_config()``, checked to build the same pipeline again in a worker."""
    if pipeline is None:
        return None
    try:
        described: dict[str, Any] = json.loads(json.dumps(pipeline.to_config()))  # as sent
        rebuilt = Pipeline.from_config(described)
    except (ConfigError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"workers > 1 rebuild the pipeline from its config, and this one has none: {exc}",
            field="workers",
        ) from exc
    if json.loads(json.dumps(rebuilt.to_config())) != described:
        raise ConfigError(
            "workers > 1 rebuild the pipeline from its config, and this one does not survive "
            "the round trip (a stage or option made outside the config?)",
            field="workers",
        )
    return described


def _log_to_stderr(level: str) -> None:
    """The JSON lines go to stderr as they are, unless the application set up logging."""
    logger = logging.getLogger("promptslim.serve")
    logger.setLevel(level.upper())
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
