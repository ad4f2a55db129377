"""The proxy answering ``promptslim_expand`` itself: a model asks for an elided part of a tool
result, the proxy appends the original from the tools stage's store and asks again, and the
client gets the final answer. The upstream is an in-test Starlette app playing the model."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from promptslim import Pipeline

from .test_serve import ThreadServer, proxy

ORDERS = [{"id": f"order-{i}", "status": "open", "total": i * 3} for i in range(300)]


class Model:
    """Asks to expand the first marker it sees, then answers with what the tool gave it."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: HTTPRequest) -> JSONResponse:
        body = json.loads(await request.body())
        self.requests.append(body)
        last = body["messages"][-1]
        if last["role"] == "tool" and last.get("tool_call_id") == "x1":
            message = {"role": "assistant", "content": f"expanded {len(last['content'])} chars"}
        else:
            marker = re.search(r"id=(ps[0-9a-f]{12})", json.dumps(body["messages"]))
            assert marker is not None, "the tool result was not elided"
            call = {"id": "x1", "type": "function", "function": {
                "name": "promptslim_expand", "arguments": json.dumps({"id": marker.group(1)})}}  # fmt: skip
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return JSONResponse({"id": "c", "object": "chat.completion", "model": "m",
                             "choices": [{"index": 0, "message": message}]})  # fmt: skip


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[Model, str]]:
    m = Model()
    with ThreadServer(m.app) as server:
        yield m, server.url + "/v1"


def _agent_body() -> dict[str, Any]:
    call = {"id": "t1", "type": "function", "function": {"name": "list_orders", "arguments": "{}"}}
    return {"model": "m", "messages": [
        {"role": "user", "content": "How many orders are open?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "t1", "content": json.dumps(ORDERS)},
        {"role": "user", "content": "Use the full list."}]}  # fmt: skip


def test_the_proxy_answers_expand_calls_and_the_client_gets_the_final_answer(
    model: tuple[Model, str],
) -> None:
    upstream, base = model
    pipeline = Pipeline.from_config({"stages": [{"name": "tools", "expand_tool": True}]})
    with proxy(base, pipeline=pipeline, answer_expand=True) as (url, _state):
        seen = len(upstream.requests)
        r = httpx.post(url + "/v1/chat/completions", json=_agent_body(), timeout=30)
        metrics = httpx.get(url + "/metrics", timeout=5).text
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith("expanded ")
    sent = upstream.requests[seen:]
    assert len(sent) == 2  # the model asked once, the proxy answered and asked again
    assert "promptslim_expand" in json.dumps(sent[0]["tools"])
    answer = sent[1]["messages"][-1]
    assert answer["role"] == "tool" and "order-" in answer["content"]
    assert "promptslim_expand_answered_total 1.0" in metrics


def test_without_answer_expand_the_call_reaches_the_client(model: tuple[Model, str]) -> None:
    _upstream, base = model
    pipeline = Pipeline.from_config({"stages": [{"name": "tools", "expand_tool": True}]})
    with proxy(base, pipeline=pipeline) as (url, _):
        r = httpx.post(url + "/v1/chat/completions", json=_agent_body(), timeout=30)
    call = r.json()["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "promptslim_expand"
