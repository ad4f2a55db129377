"""PrefixStage: canonicalisation, volatile content moved (never lost), fingerprints, hints."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptslim.errors import ConfigError
from promptslim.pipeline import Pipeline
from promptslim.stages.prefix import PrefixStage, canonicalise_text, canonicalise_tools
from promptslim.types import Request

SYSTEM = (
    "You are the support assistant for Acme.  \r\n"
    "Today is 2024-05-01 and the time is 10:30 UTC.\r\n\r\n\r\n\r\n"
    "Request id: 123e4567-e89b-12d3-a456-426614174000. Trace 9f86d081884c7d659a2f.\n"
    "The user's name is Ann Lee; reach her at ann.lee@example.com.\n"
    'Config: {"z": 1,   "a": {"y": [1, 2], "b": "x"}}\n'
    "Always answer in English."
)


def body(system: str = SYSTEM, *, turns: int = 1) -> dict:
    messages: list[dict] = [{"role": "system", "content": system}]
    for i in range(turns - 1):
        messages += [
            {"role": "user", "content": f"q{i}"},
            {"role": "assistant", "content": f"a{i}"},
        ]
    messages.append({"role": "user", "content": "What is my plan?"})
    return {"model": "m", "messages": messages}


def run(stage: PrefixStage, data: dict):
    return stage.run(Request.from_openai(data))


# ---------------------------------------------------------------- canonicalisation

_text = st.text(
    alphabet=st.sampled_from(list('abc xyz\t\r\n\u00e9e\u0301{}[]":,0123456789')), max_size=80
)


@given(_text)
def test_canonical_text_is_idempotent_and_keeps_words(text: str) -> None:
    once = canonicalise_text(text)
    assert canonicalise_text(once) == once
    words = lambda s: re.findall(r"[^\W_]+", canonical_nfc(s))
    assert words(once) == words(text)


def canonical_nfc(s: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFC", s)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=5), _json, min_size=1, max_size=4))
def test_json_blocks_become_canonical_and_stay_equal_as_data(value: dict) -> None:
    raw = json.dumps(value, indent=2)
    text = f"Schema:\n{raw}\nEnd."
    out = canonicalise_text(text)
    inner = out[len("Schema:\n") : -len("\nEnd.")]
    if "\n" in raw and "\\n" not in raw:
        assert "\n" not in inner  # re-serialised compactly
    assert json.loads(inner) == value
    assert canonicalise_text(out) == out


@pytest.mark.parametrize(
    "block",
    [
        '{"x": 1E400}',  # a float would make it Infinity: not JSON any more
        '{"a": 0.10000000000000000555}',  # a float would make it 0.1
        '{\n  "\\uf900": null\n}',  # NFC maps U+F900 to U+8C48: written raw, a rerun changes it
    ],
)
def test_json_canonicalisation_never_changes_the_data(block: str) -> None:
    text = f"Schema: {block} End."
    out = canonicalise_text(text)
    assert canonicalise_text(out) == out
    inner = out[len("Schema: ") : -len(" End.")]
    assert json.loads(inner, parse_float=str) == json.loads(block, parse_float=str)


def test_canonicalisation_details() -> None:
    text = "a  \r\nb\t\r\n\r\n\r\n\r\nc\u0065\u0301\n"
    assert canonicalise_text(text) == "a\nb\n\nc\u00e9"
    # "[1, 2]" in prose is left alone; a JSON object with duplicate keys is left alone
    assert canonicalise_text("see [1, 2]") == "see [1, 2]"
    assert canonicalise_text('{"a": 1, "a": 2}') == '{"a": 1, "a": 2}'


def test_tools_sorted_and_keys_canonical_bad_schema_kept() -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "zeta", "parameters": {"type": "object", "a": 1}},
        },
        {"function": {"parameters": "{not json", "name": "alpha"}, "type": "function"},
        {"type": "function", "function": {"name": "beta", "parameters": '{"b": 1, "a": 2}'}},
    ]
    out, warnings = canonicalise_tools(tools)
    assert [t["function"]["name"] for t in out] == ["alpha", "beta", "zeta"]
    assert list(out[2]["function"]["parameters"]) == ["a", "type"]
    assert out[1]["function"]["parameters"] == '{"a":2,"b":1}'
    assert out[0] is tools[1]  # invalid schema: the very same object, untouched
    assert warnings == ["tools[1]: not a valid JSON schema; left as is"]


# ---------------------------------------------------------------- volatile content


def test_move_takes_volatile_values_out_and_keeps_every_one() -> None:
    result = run(PrefixStage(variables=["Ann Lee"]), body())
    messages = result.request.messages
    prefix, context = messages[0].text, messages[1]
    for value in [
        "2024-05-01",
        "10:30 UTC",
        "123e4567-e89b-12d3-a456-426614174000",
        "9f86d081884c7d659a2f",
        "Ann Lee",
        "ann.lee@example.com",
    ]:
        assert value not in prefix
        assert value in context.text
    assert "Always answer in English." in prefix and "[date 1]" in prefix
    assert context.pinned and context.role == "system"
    assert result.request.frozen_prefix == 1
    assert messages[-1].text == "What is my plan?"  # invariant 1
    assert len(result.report.stage("prefix").of_kind("moved")) == 6


def test_code_ids_are_an_opt_in_volatile_kind() -> None:
    # a ticket key in the system prompt changes per request only where the service says so
    system = "You help with one support ticket.\nTicket: HANES-885\nAlways answer in English."
    default = run(PrefixStage(), body(system)).request.messages[0].text
    assert "HANES-885" in default
    stage = PrefixStage(volatile_kinds=["code_id"])
    messages = run(stage, body(system)).request.messages
    assert "HANES-885" not in messages[0].text and "[id 1]" in messages[0].text
    assert "HANES-885" in messages[1].text


@given(
    date=st.dates().map(str),
    uid=st.uuids().map(str),
    name=st.sampled_from(["Ann Lee", "Bo Chen", "Zoë Brandt"]),
    ts=st.integers(1_500_000_000, 1_999_999_999),
)
def test_requests_differing_only_in_volatile_values_share_prefix_bytes(
    date: str, uid: str, name: str, ts: int
) -> None:
    stage = PrefixStage(templates=["The user's name is {name}."])
    template = "Be brief.\nDate: {d}. Request {u} at {t}.\nThe user's name is {n}.\nBe kind."
    a = run(
        stage,
        body(
            template.format(
                d="2020-01-01", u="0" * 8 + "-0000-0000-0000-" + "0" * 12, t=1600000000, n="Al"
            )
        ),
    )
    b = run(stage, body(template.format(d=date, u=uid, t=ts, n=name)))
    assert a.request.messages[0].to_openai() == b.request.messages[0].to_openai()
    assert a.report.prefix_fingerprint == b.report.prefix_fingerprint
    out = json.dumps(b.to_openai(), ensure_ascii=False)
    for value in (date, uid, str(ts), name):
        assert value in out  # moved, never lost (invariant 2)


def test_flag_reports_without_changing_volatile_text() -> None:
    result = run(PrefixStage(policy="flag"), body())
    assert "2024-05-01" in result.request.messages[0].text
    assert len(result.request.messages) == 2
    kinds = {v["kind"] for v in result.report.stage("prefix").details["volatile"]}
    assert {"iso_datetime", "uuid", "email"} <= kinds


def test_first_user_placement_and_its_fallback() -> None:
    stage = PrefixStage(placement="first_user")
    multi = run(stage, body(turns=2)).request.messages
    assert multi[1].role == "user" and multi[1].pinned and "2024-05-01" in multi[1].text
    assert multi[1].text.endswith("q0")
    single = run(stage, body()).request.messages  # first user turn is the last: own message
    assert len(single) == 3 and single[1].role == "system"
    assert single[2].text == "What is my plan?"


def test_non_text_system_content_is_left_as_is_with_a_warning() -> None:
    data = body()
    data["messages"][0]["content"] = [
        {"type": "text", "text": "Today is 2024-05-01."},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]
    result = run(PrefixStage(), data)
    assert result.request.messages[0].to_openai() == data["messages"][0]
    assert any("non-text" in w for w in result.report.warnings)


# ---------------------------------------------------------------- fingerprint, counts, hints


def test_fingerprint_changes_with_salt_and_content() -> None:
    base = run(PrefixStage(), body()).report.prefix_fingerprint
    assert base and len(base) == 64
    assert run(PrefixStage(tenant_salt="t1"), body()).report.prefix_fingerprint != base
    other = run(PrefixStage(), body(SYSTEM.replace("English", "French"))).report
    assert other.prefix_fingerprint != base


def test_cacheable_tokens_and_per_model_counts() -> None:
    result = run(PrefixStage(), body(SYSTEM * 40))
    details = result.report.stage("prefix").details
    n = result.report.cacheable_tokens
    assert n and n > 1024
    by_model = details["cacheable_by_model"]
    assert by_model["vllm"] == n // 16 * 16
    assert by_model["openai"] == 1024 + (n - 1024) // 128 * 128
    assert by_model["sglang"] == n


def test_alignment_pads_prefix_to_whole_blocks() -> None:
    result = run(PrefixStage(align_to_block=True, block_size=16), body())
    assert result.report.cacheable_tokens % 16 == 0


def test_provider_hints() -> None:
    result = run(PrefixStage(cache_hints=["anthropic", "openai"]), body())
    sent = result.to_openai()
    part = sent["messages"][0]["content"][-1]
    assert part["cache_control"] == {"type": "ephemeral"}
    assert sent["prompt_cache_key"] == "ps-" + result.report.prefix_fingerprint[:32]


def test_pipeline_freezes_prefix_and_stage_is_idempotent() -> None:
    stage = PrefixStage()
    once = Pipeline([stage]).run(Request.from_openai(body()))
    twice = stage.run(once.request)
    assert [m.to_openai() for m in twice.request.messages] == [
        m.to_openai() for m in once.request.messages
    ]
    assert Pipeline.from_config({"stages": [{"name": "prefix", "policy": "flag"}]}).stages[0] == (
        PrefixStage(policy="flag")
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"policy": "drop"}, "policy"),
        ({"placement": "last_user"}, "placement"),
        ({"volatile_kinds": ["nope"]}, "volatile_kinds"),
        ({"templates": ["no placeholder"]}, "templates"),
        ({"block_size": 0}, "block_size"),
        ({"cache_hints": ["gemini"]}, "cache_hints"),
        # a bare string would be taken character by character
        ({"variables": "Alice"}, "variables"),
        ({"cache_hints": "openai"}, "cache_hints"),
        ({"volatile_kinds": "date"}, "volatile_kinds"),
        ({"templates": "User: {name}"}, "templates"),
        ({"variables": 5}, "variables"),
    ],
)
def test_bad_options_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        PrefixStage(**kwargs)
    assert err.value.field == field


def test_lone_surrogates_in_the_prefix_are_fingerprinted_not_fatal() -> None:
    # "\\ud800" is valid JSON; canonicalising the system prompt's JSON writes it raw
    system = 'Reply as JSON like {"e": "\\ud800"}'
    tool = {"type": "function", "function": {"name": "f", "description": "\ud800"}}
    data = {**body(system), "tools": [tool]}
    first = run(PrefixStage(), data).report.prefix_fingerprint
    assert first and first == run(PrefixStage(), data).report.prefix_fingerprint


def test_fingerprint_covers_what_the_prefix_sends_beyond_its_text() -> None:
    def fingerprint(**extra: object) -> str | None:
        data = body("Be brief.")
        data["messages"][0].update(extra)
        return run(PrefixStage(), data).report.prefix_fingerprint

    plain = fingerprint()
    named = {fingerprint(name="a"), fingerprint(name="b"), fingerprint(x_vendor=1)}
    assert len(named) == 3 and plain not in named


# ---------------------------------------------------------------- cost-aware moves (min_gain)


def test_min_gain_keeps_values_in_place_when_the_move_does_not_pay() -> None:
    short = "You are a helpful assistant.\nUser: Ann Lee   "
    stage = PrefixStage(templates=["User: {name}"], min_gain=1.0)
    result = run(stage, body(short))
    details = result.report.stages[0].details
    skipped = details["move_skipped"]
    # nothing after the name to make cacheable; the block would add tokens
    assert skipped["cacheable_gain_tokens"] < skipped["added_tokens"]
    out = result.request.messages
    assert len(out) == 2  # no context message
    assert out[0].content == "You are a helpful assistant.\nUser: Ann Lee"  # canonicalised only
    assert not [c for c in result.report.stages[0].changes if c.kind == "moved"]
    assert details["volatile"]  # still reported
    # the default moves it (every volatile value, whatever it costs)
    moved = run(PrefixStage(templates=["User: {name}"]), body(short))
    assert "Ann Lee" not in moved.request.messages[0].content
    assert "move_skipped" not in moved.report.stages[0].details


def test_min_gain_moves_when_the_prefix_after_the_value_is_long() -> None:
    rules = " ".join(f"Rule {i}: answer politely and cite the policy section." for i in range(60))
    system = f"Today is 2024-05-01.\n{rules}"
    result = run(PrefixStage(min_gain=2.0), body(system))
    out = result.request.messages
    assert "2024-05-01" not in out[0].content and "2024-05-01" in out[1].content
    assert "move_skipped" not in result.report.stages[0].details
    # and two requests differing only in the date share the prefix bytes again
    other = run(PrefixStage(min_gain=2.0), body(system.replace("2024-05-01", "2025-12-31")))
    assert other.request.messages[0] == out[0]


@pytest.mark.parametrize("bad", [-1, "1", True, float("inf"), float("nan")])
def test_min_gain_is_checked(bad: object) -> None:
    with pytest.raises(ConfigError, match="min_gain"):
        PrefixStage(min_gain=bad)  # type: ignore[arg-type]


def test_a_prefix_frozen_by_the_caller_keeps_its_bytes_in_the_default_pipeline() -> None:
    data = body()
    out = Pipeline.default().run(Request.from_openai(data, frozen_prefix=1))
    assert out.request.messages[0].text == SYSTEM  # not canonicalised, nothing moved
    assert out.report.prefix_fingerprint  # still fingerprinted
    assert out.request.messages[-1].text == data["messages"][-1]["content"]
