"""Which client paths may be forwarded to the upstream, and as what.

The proxy forwards ``GET /v1/models`` and ``GET /v1/models/{id}`` below the upstream's base
URL, with the client's ``Authorization``. A model id arrives percent-decoded (``%2f`` is
``/``), so ``/v1/models/..%2f..%2fetc%2fpasswd`` would leave the base path once an HTTP client
resolved its dot segments. Model ids are names (``gpt-4o``, ``meta-llama/Llama-3.1-8B``,
``org/model:tag``): an id is forwarded only when every ``/``-separated part of it is a name made
of an allow-listed alphabet and is not ``.`` or ``..``; anything else is refused with ``400``
before a byte goes upstream. The id is then percent-encoded again, and the URL checked to lie
under the base path, so a rule missed here still cannot escape it.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

__all__ = ["ForbiddenPath", "model_url"]

_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+\-]*")
_MAX_ID = 512


class ForbiddenPath(ValueError):
    """A path the proxy does not forward; the message says why (it goes to the client)."""


def model_url(base: str, model_id: str) -> str:
    """The upstream URL of ``GET {base}/models/{model_id}``; ``ForbiddenPath`` when the id is
    not a model name (see the module docstring)."""
    if not model_id or len(model_id) > _MAX_ID:
        raise ForbiddenPath("expected a model id of 1 to 512 characters")
    for segment in model_id.split("/"):
        if segment in (".", "..") or not _SEGMENT.fullmatch(segment):
            raise ForbiddenPath(
                "a model id is names separated by '/': letters, digits and . _ : @ + -, "
                "no empty, '.' or '..' part"
            )
    url = f"{base}/models/{quote(model_id, safe='/:@+')}"
    if not urlsplit(url).path.startswith(urlsplit(base).path.rstrip("/") + "/models/"):
        raise ForbiddenPath("the path leaves the upstream's base path")
    return url
