"""The JSON compressor's link fields: left out unless the turn names them, one marker pair per
object whose original the store gives back, keys named once, valid JSON throughout."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from promptslim.backends.tools import Compressed, ToolContext
from promptslim.backends.tools.expand import expand
from promptslim.backends.tools.json_crusher import JsonCompressor
from promptslim.backends.tools.json_fields import LINK_KEY
from promptslim.backends.tools.json_values import Obj, load_json
from promptslim.backends.tools.store import MemoryToolStore
from promptslim.errors import ConfigError
from promptslim.stages.tools import ToolsStage
from promptslim.types import Request

MARKER = re.compile(r"\[… \d+ \w+ elided(?: \((.*?)\))? id=(ps[0-9a-f]{12})\]")
API = "https://api.example.com/repos/acme/widgets"


def _user(login: str, uid: int) -> dict[str, Any]:
    base = f"https://api.example.com/users/{login}"
    return {
        "login": login,
        "id": uid,
        "avatar_url": f"https://avatars.example.com/u/{uid}?v=4",
        "url": base,
        "html_url": f"https://example.com/{login}",
        "followers_url": f"{base}/followers",
        "repos_url": f"{base}/repos",
        "type": "User",
    }


def _repo() -> dict[str, Any]:
    return {
        "id": 3544490,
        "name": "widgets",
        "full_name": "acme/widgets",
        "owner": _user("acme", 327146),
        "html_url": "https://example.com/acme/widgets",
        "description": "Widgets for everyone",
        "url": API,
        "forks_url": f"{API}/forks",
        "issues_url": f"{API}/issues{{/number}}",
        "clone_url": "https://example.com/acme/widgets.git",
        "created_at": "2012-02-25T12:53:47Z",
        "homepage": "",
        "language": "Python",
    }


def restore(value: Any, store: dict[str, str]) -> Any:
    """The data with every marker resolved; an object's left-out links are merged back."""
    if isinstance(value, Obj):
        out = Obj()
        for k, v in value:
            m = MARKER.fullmatch(v) if k == LINK_KEY and isinstance(v, str) else None
            if m and " fields elided" in v:  # a key "…" of the input can hold another marker
                out.extend(load_json(store[m.group(2)]))
            else:
                out.append((k, restore(v, store)))
        return out
    if isinstance(value, list):
        out_list: list[Any] = []
        for v in value:
            m = MARKER.fullmatch(v) if isinstance(v, str) else None
            if m and "(same as " in v:
                out_list.append(restore(load_json(store[m.group(2)]), store))
            elif m:
                out_list.extend(load_json(store[m.group(2)]))
            else:
                out_list.append(restore(v, store))
        return out_list
    if isinstance(value, str):
        m = MARKER.fullmatch(value)
        if m and "(same as " in value:
            return restore(load_json(store[m.group(2)]), store)
        m = MARKER.search(value)
        if m and m.end() == len(value):
            return value[: m.start() - 1] + store[m.group(2)]
    return value


def unordered(value: Any) -> Any:
    """Comparable data, objects' pairs sorted (JSON objects are unordered), arrays in order."""
    if isinstance(value, Obj):
        return sorted((k, repr(unordered(v))) for k, v in value)
    if isinstance(value, list):
        return [unordered(v) for v in value]
    return str(value) if isinstance(value, str) else value


def _store(out: Compressed) -> dict[str, str]:
    return {e.id: e.original for e in out.elisions}


def test_links_go_into_one_marker_pair_and_the_named_ones_stay() -> None:
    text = json.dumps(_repo())
    ctx = ToolContext(query="What is the clone url of acme/widgets?", hints=("get_repo",))
    out = JsonCompressor().compress(text, ctx)
    assert out is not None
    data = json.loads(out.text)
    # named by the query: ``clone_url`` by its words, ``url`` itself
    assert data["clone_url"] == "https://example.com/acme/widgets.git" and data["url"] == API
    assert "forks_url" not in data and "html_url" not in data and "avatar_url" not in data["owner"]
    assert data["homepage"] == "" and data["created_at"] == "2012-02-25T12:53:47Z"
    assert list(data)[-1] == LINK_KEY and LINK_KEY in data["owner"]
    fields = [e for e in out.elisions if e.kind == "fields"]
    assert sorted(e.where for e in fields) == ["$", "$.owner"]
    assert len(out.text) < 0.75 * len(json.dumps(_repo(), separators=(",", ":")))
    assert unordered(restore(load_json(out.text), _store(out))) == unordered(load_json(text))


def test_a_key_the_query_names_itself_and_a_literal_keep_their_links() -> None:
    text = json.dumps(_repo())
    out = JsonCompressor().compress(text, ToolContext(query="the html_url, and user 327146"))
    assert out is not None
    data = json.loads(out.text)
    assert data["html_url"] == "https://example.com/acme/widgets"
    assert data["owner"]["html_url"] == "https://example.com/acme"
    # the id is in one of the owner's links: that one is picked out
    assert data["owner"]["avatar_url"] == "https://avatars.example.com/u/327146?v=4"
    # ``acme`` is in every link: it picks out none of them
    assert "forks_url" not in data
    out = JsonCompressor().compress(text, ToolContext(query="who owns acme/widgets?"))
    assert out is not None and "forks_url" not in json.loads(out.text)


def test_each_set_of_keys_is_named_once_and_repeated_objects_stay_references() -> None:
    users = [_user(f"dev{i}", 900 + i) for i in range(3)]
    text = json.dumps(
        [
            {"number": 0, "user": users[0], "assignee": users[0]},
            {"number": 1, "user": users[1]},
            {"number": 9, "user": users[0]},
        ]
    )
    out = JsonCompressor(dedup_chars=60).compress(text, ToolContext())
    assert out is not None
    notes = [m.group(1) for m in MARKER.finditer(out.text) if "fields" in m.group(0)]
    assert notes[0] == "avatar_url, url, html_url, followers_url, repos_url"
    assert notes[1:] and not any(notes[1:])  # named once: later markers do not repeat it
    data = json.loads(out.text)
    assert data[0]["user"]["login"] == "dev0"
    assert "same as $[0].user" in data[0]["assignee"]  # still equal to the first copy
    assert "same as $[0].user" in data[2]["user"] and data[1]["user"]["login"] == "dev1"
    assert unordered(restore(load_json(out.text), _store(out))) == unordered(load_json(text))


def test_short_links_and_links_off_are_left_as_they_are() -> None:
    small = json.dumps({"a": "https://x.io/1", "b": "https://x.io/2", "pad": "z" * 2000})
    out = JsonCompressor().compress(small, ToolContext())
    assert out is not None and LINK_KEY not in json.loads(out.text)
    text = json.dumps(_repo())
    assert JsonCompressor(elide_links=False).compress(text, ToolContext()) is None
    with pytest.raises(ConfigError) as err:
        JsonCompressor(elide_links="yes")  # type: ignore[arg-type]
    assert err.value.field == "elide_links"


def test_a_long_string_the_query_names_is_kept_whole() -> None:
    body = "word " * 400
    text = json.dumps({"title": "x", "body": body, "notes": body})
    out = JsonCompressor().compress(text, ToolContext(query="what does the body say?"))
    assert out is not None
    data = json.loads(out.text)
    assert data["body"] == body and len(data["notes"]) < len(body)


_LINKS = st.builds(
    "https://api.example.com/{}/{}".format,
    st.sampled_from(["users", "repos", "issues"]),
    st.integers(0, 40),
)
_SCALARS = st.none() | st.booleans() | st.integers(-5, 10**6) | st.text(max_size=12) | _LINKS
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=12)
        | st.dictionaries(
            st.sampled_from(["url", "html_url", "id", "user", "state", "a_url", "…", "b"]),
            inner,
            max_size=7,
        )
    ),
    max_leaves=80,
)


@settings(max_examples=200, deadline=None)
@given(
    value=_VALUES,
    query=st.sampled_from(["", "the html_url of 12", "user 7", "a url"]),
    ascii=st.booleans(),
)
# a status value that is a line break: the marker's note stays on one line
@example(
    value=[None, None, {"url": None, "state": "\n"}, dict.fromkeys(("url", "html_url", "id", "state"))],
    query="",
    ascii=False,
)
def test_valid_json_in_valid_json_out_and_every_marker_resolves(
    value: Any, query: str, ascii: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii)
    out = JsonCompressor(dedup_chars=40).compress(text, ToolContext(query=query))
    if out is None:
        return
    json.loads(out.text)  # valid JSON, strictly
    restored = restore(load_json(out.text), _store(out))
    assert unordered(restored) == unordered(load_json(text))
    assert {m.group(2) for m in MARKER.finditer(out.text)} <= set(_store(out))
    again = JsonCompressor(dedup_chars=40).compress(text, ToolContext(query=query))
    assert again is not None and again.text == out.text  # deterministic: cache-stable


def test_the_stage_stores_the_left_out_links_for_expand() -> None:
    store = MemoryToolStore()
    stage = ToolsStage(store=store, min_chars=200)
    body = json.dumps(_repo())
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "When was acme/widgets created?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_repo", "arguments": '{"repo": "acme/widgets"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": body},
    ]
    result = stage.run(Request.from_openai({"messages": messages}))
    text = result.request.messages[-1].text
    assert "2012-02-25T12:53:47Z" in text and len(text) < len(body)
    ident = MARKER.search(text).group(2)  # type: ignore[union-attr]
    fields = json.loads(expand(ident, store=store))
    assert set(fields) <= set(_repo()["owner"]) | set(_repo())
    assert all(v.startswith("https://") for v in fields.values())
