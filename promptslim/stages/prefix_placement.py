"""Where the prefix stage puts things: the moved-volatile context block and whether moving
pays, padding the prefix to whole cache blocks, and providers' cache markers."""

from __future__ import annotations

from collections.abc import Sequence

from ..counters import TokenCounter
from ..counting import count_message
from ..messages import ContentPart, Message
from ..request import Request
from .base import StageLog
from .prefix_fingerprint import prefix_tokens

__all__ = ["align", "context_block", "move_gain", "place_context", "with_cache_control"]

CONTEXT_HEADER = "Context for the instructions above (values that change per request):"
#: appended to pad the prefix to a block boundary: one token per copy in common BPEs
PAD_UNIT = " ."


def context_block(moved: Sequence[tuple[str, str]]) -> str:
    return "\n".join([CONTEXT_HEADER, *(f"{ref}: {value}" for ref, value in moved)])


def move_gain(
    original: Sequence[Message],
    stable: Sequence[Message],
    end: int,
    moved: Sequence[tuple[str, str]],
    block: str,
    counter: TokenCounter,
) -> tuple[int, int]:
    """``(gain, cost)`` of moving: the stable prefix's tokens from the first reference on
    (what becomes cacheable across requests whose values differ), and the tokens the move
    adds to the request (the block as a message, references in place of values)."""
    first_ref = moved[0][0]
    gain = 0
    for j in range(end):
        text = stable[j].text
        at = text.find(first_ref) if stable[j] is not original[j] else -1
        if at >= 0:
            gain = counter.count(text) - counter.count(text[:at])
            gain += sum(count_message(m, counter) for m in stable[j + 1 : end])
            break
    added = count_message(Message(role="system", content=block), counter)
    before = sum(count_message(m, counter) for m in original[:end])
    after = sum(count_message(m, counter) for m in stable[:end])
    return gain, added + after - before


def place_context(
    messages: list[Message],
    end: int,
    block: str,
    request: Request,
    log: StageLog,
    placement: str,
) -> None:
    """Put the moved-volatile context ``block`` in its message (pinned) after the prefix,
    or with ``placement="first_user"`` into the first user message that is not the last."""
    first_user = next((k for k in range(end, len(messages)) if messages[k].role == "user"), None)
    if (
        placement == "first_user"
        and first_user is not None
        and first_user != request.last_user_index()
        and not messages[first_user].pinned
    ):
        m = messages[first_user]
        messages[first_user] = m.with_text(f"{block}\n\n{m.text}").model_copy(
            update={"pinned": True}
        )
        log.details["context_placement"] = f"messages[{first_user}]"
        return
    role = messages[end - 1].role if end else "system"
    messages.insert(end, Message(role=role, content=block, pinned=True))
    log.details["context_placement"] = f"messages[{end}]"


def align(
    messages: list[Message],
    end: int,
    tools_json: str,
    counter: TokenCounter,
    log: StageLog,
    block_size: int,
) -> Message:
    """The prefix's last message padded so the prefix fills whole ``block_size`` blocks."""
    last = messages[end - 1]
    base = prefix_tokens(messages[:end], tools_json, counter)
    need = -base % block_size
    if need == 0 or isinstance(last.content, list):
        return last
    text = last.text
    # one pad unit is one token in common BPEs; check, and give up rather than loop
    for extra in range(need, need + block_size):
        candidate = last.with_text(text + PAD_UNIT * extra)
        tokens = prefix_tokens([*messages[: end - 1], candidate], tools_json, counter)
        if tokens % block_size == 0:
            log.details["alignment_pad_tokens"] = tokens - base
            return candidate
    log.warning(f"could not align the prefix to {block_size}-token blocks")
    return last


def with_cache_control(message: Message) -> Message:
    """The message in content-part form, ``cache_control`` on its last text part."""
    if isinstance(message.content, list):
        parts = list(message.content)
    else:
        parts = [ContentPart(type="text", text=message.content or "")]
    for k in range(len(parts) - 1, -1, -1):
        if parts[k].text is not None:
            data = parts[k].model_dump()
            data["cache_control"] = {"type": "ephemeral"}
            parts[k] = ContentPart.model_validate(data)
            break
    hinted: Message = message.model_copy(update={"content": parts})
    return hinted
