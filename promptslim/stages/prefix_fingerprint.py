"""The stable prefix's fingerprint (SHA-256 of its canonical bytes, salted per tenant) and its
token count: what the report gives a prefix cache to key on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from ..counters import TokenCounter
from ..counting import count_message
from ..messages import Message

__all__ = ["prefix_fingerprint", "prefix_tokens", "sent_text"]


def prefix_fingerprint(prefix: Sequence[Message], tools_json: str, salt: str | None) -> str:
    digest = hashlib.sha256()
    if salt:
        digest.update(b"salt\x00" + _utf8(salt) + b"\x1e")
    digest.update(b"tools\x00" + _utf8(tools_json) + b"\x1e")
    for m in prefix:
        digest.update(m.role.encode() + b"\x00" + _utf8(sent_text(m)) + b"\x1e")
    return digest.hexdigest()


def prefix_tokens(prefix: Sequence[Message], tools_json: str, counter: TokenCounter) -> int:
    tools = counter.count(tools_json) if tools_json else 0
    return tools + sum(count_message(m, counter) for m in prefix)


def _utf8(text: str) -> bytes:
    # JSON input may carry lone surrogates ("\\ud800" is valid JSON); they hash as themselves
    return text.encode("utf-8", "surrogatepass")


def sent_text(message: Message) -> str:
    """What the fingerprint covers of a prefix message: its text when that is all it sends
    (the usual system prompt, so fingerprints stay as they were), else its whole wire form,
    so two prompts that differ only in a name, an image or a vendor field differ."""
    if (
        isinstance(message.content, str)
        and not message.name
        and not message.tool_calls
        and not message.tool_call_id
        and not message.model_extra
    ):
        return message.text
    return json.dumps(message.to_openai(), sort_keys=True, ensure_ascii=False)
