"""``promptslim serve``: an OpenAI-compatible streaming proxy that slims every request.

::

    client ──► promptslim serve ──► upstream (vLLM, SGLang, TGI, llama.cpp, a provider)
               auth, size limit, JSON check
               admission (concurrency limit + bounded queue → 429)
               Pipeline (in a worker thread)
               upstream call (httpx) → the body relayed chunk by chunk, never held

``create_app(config, pipeline=...)`` gives the Starlette app (for tests and embedding);
``serve(config, pipeline=...)`` runs it under uvicorn. starlette, uvicorn, httpx and
prometheus-client are the ``serve`` extra: importing this package without them raises
``BackendUnavailable``.
"""

from __future__ import annotations

from ..errors import BackendUnavailable

try:  # the heavy parts live only here, never at ``import promptslim``
    import httpx  # noqa: F401
    import prometheus_client  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise BackendUnavailable(
        "starlette, uvicorn, httpx and prometheus-client", extra="serve"
    ) from exc

from .admission import Admission as Admission
from .admission import Overloaded as Overloaded
from .app import create_app as create_app
from .config import ServeConfig as ServeConfig
from .server import serve as serve

__all__ = ["Admission", "Overloaded", "ServeConfig", "create_app", "serve"]
