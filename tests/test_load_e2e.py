"""End to end against llama.cpp's ``llama-server`` (continuous batching, parallel slots, prompt
cache): a few streamed requests at concurrency 2, baseline and promptslim interleaved, and the
same stream through ``promptslim serve`` in front of it. Marked slow; the set-up builds the
server once (``scripts/build_llama_server.sh``), and these are skipped without it."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from promptslim import Budget, Pipeline, Request
from promptslim.bench.runner import build_config
from promptslim.loadsim.interleave import Target, run_interleaved
from promptslim.loadsim.loadtest import PreparedRequest, summarise
from promptslim.serve import ServeConfig, create_app
from promptslim.tokens import count_messages

from .llama_server import llama_cpp_server  # noqa: F401
from .test_serve import ThreadServer

FILLER = (
    "The lighthouse keeper logged the weather every hour, noting wind, swell and the colour of "
    "the sky over the harbour, and the ledger grew thick with entries nobody would read. "
)


def _raw(i: int) -> dict[str, Any]:
    """A client's body: the question, and the retrieved documents in a top-level list."""
    docs = [{"id": f"d{k}", "text": FILLER * 2} for k in range(4)]
    docs.insert(i % 5, {"id": "gold", "text": f"The ferry to Island {i} leaves from pier {i + 3}."})
    return {
        "model": "smollm2",
        "messages": [
            {"role": "system", "content": "Answer from the documents."},
            {"role": "user", "content": f"Which pier does the ferry to Island {i} leave from?"},
        ],
        "documents": docs,
        "stream": True,
        "max_tokens": 8,
        "temperature": 0.0,
        "stream_options": {"include_usage": True},
    }


def _prepared(pipeline: Pipeline, n: int) -> list[PreparedRequest]:
    """What the server gets: the documents rendered into the messages, slimmed or not."""
    out = []
    for i in range(n):
        raw = _raw(i)
        sent = pipeline.run(Request.from_openai(raw)).to_openai()
        body = {k: v for k, v in raw.items() if k != "documents"} | {"messages": sent["messages"]}
        out.append(PreparedRequest(body, count_messages(Request.from_openai(body).messages)))
    return out


@pytest.mark.slow
def test_ab_interleaved_and_through_the_proxy(llama_cpp_server: str) -> None:  # noqa: F811
    with urllib.request.urlopen(llama_cpp_server.removesuffix("/v1") + "/props", timeout=5) as r:
        props = json.load(r)
    assert props.get("total_slots", 4) >= 2  # a batching server, not one request at a time
    pipeline = Pipeline.default(budget=Budget(total=120))
    n = 4
    baseline = _prepared(build_config("baseline").pipeline, n)
    client_side = _prepared(pipeline, n)
    raw = [PreparedRequest(_raw(i), r.prompt_tokens) for i, r in enumerate(baseline)]
    app = create_app(ServeConfig(upstream=llama_cpp_server, warm_up=False), pipeline=pipeline)
    with ThreadServer(app) as proxy:
        runs = run_interleaved(
            {
                "baseline": Target(llama_cpp_server, baseline),
                "client": Target(llama_cpp_server, client_side),
                "proxy": Target(proxy.url + "/v1", raw),  # the proxy slims these
            },
            concurrency=2, timeout_s=120, time_limit_s=450, block=2,
        )  # fmt: skip
    summaries = {k: summarise(v["records"], wall_s=v["client"]["wall_s"]) for k, v in runs.items()}
    for label, s in summaries.items():
        assert s["completed"] == n and s["error_rate"] == 0, (label, s)
        assert s["ttft_ms"]["n"] == n
        assert runs[label]["cut"] == {"share_s": 150.0, "cancelled_in_flight": 0, "not_sent": 0}
    # the server's own prompt counts: what promptslim sent is smaller, in the client and proxy
    served = {k: sum(r.server_prompt_tokens or 0 for r in v["records"]) for k, v in runs.items()}
    assert served["client"] < served["baseline"] and served["proxy"] < served["baseline"]
    # the turns interleave: a block of each config before the next block of any
    first_sent = {k: min(r.sent_clock_s for r in v["records"][:2]) for k, v in runs.items()}
    second_sent = {k: min(r.sent_clock_s for r in v["records"][2:]) for k, v in runs.items()}
    assert max(first_sent.values()) < min(second_sent.values())
