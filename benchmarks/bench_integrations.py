"""Overhead of the framework adapters over the bare stage, for 20 documents or messages.

- ``langchain_overhead_ms``: ``PromptSlimCompressor.compress_documents`` on 20 LangChain
  Documents minus ``stage.run`` on the equivalent promptslim Request (built once, outside the
  timing: the adapter's translation in and out is all counted as overhead);
- ``llamaindex_overhead_ms``: the same for ``PromptSlimPostprocessor.postprocess_nodes`` on 20
  ``NodeWithScore``;
- ``langchain_agent_overhead_ms``: ``PromptSlimMiddleware.wrap_model_call`` on a LangChain
  ``ModelRequest`` (a system message and 20 conversation messages; the model handler returns
  a response built beforehand) minus ``stage.run`` on the equivalent promptslim Request;
- ``llamaindex_memory_overhead_ms``: ``PromptSlimMemory.get`` over the same 20 messages in its
  chat store minus ``stage.run`` on their Request.

The stage is PassThrough, so what is left is the adapters' own cost (a real stage adds the same
translation around more work). Adapter and bare calls alternate and each sample is the paired
difference, which cancels most drift on a shared machine.
The goals are ``GOALS["bench_integrations"]`` in ``benchmarks/summary.py``.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable
from typing import Any

from common import emit, machine, parser
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from summary import goal

from promptslim import Document, Message, PassThrough, Request
from promptslim.integrations.langchain import PromptSlimCompressor, from_langchain_messages
from promptslim.integrations.langchain_agents import PromptSlimMiddleware
from promptslim.integrations.llamaindex import PromptSlimPostprocessor
from promptslim.integrations.llamaindex_memory import PromptSlimMemory
from promptslim.stats import spread

N_DOCS = 20
GOAL_MS = goal("bench_integrations", "langchain_overhead_ms").target
QUERY = "how do I raise the build minute quota for my workspace"
WORDS = [
    "cache",
    "prefill",
    "token",
    "budget",
    "request",
    "latency",
    "model",
    "server",
    "document",
    "history",
    "retrieval",
    "answer",
    "question",
    "system",
    "prompt",
    "context",
    "window",
    "queue",
    "batch",
    "throughput",
    "region",
    "storage",
    "limit",
    "policy",
]


def texts(seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(N_DOCS)]


def paired(adapter: Callable[[], Any], bare: Callable[[], Any], n: int) -> dict[str, Any]:
    for _ in range(50):  # warm: token counts cached, code paths hot
        adapter()
        bare()
    diffs, adapter_ms, bare_ms = [], [], []
    gc.disable()
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            adapter()
            t1 = time.perf_counter()
            bare()
            t2 = time.perf_counter()
            adapter_ms.append((t1 - t0) * 1e3)
            bare_ms.append((t2 - t1) * 1e3)
            diffs.append(((t1 - t0) - (t2 - t1)) * 1e3)
    finally:
        gc.enable()
    return {**spread(diffs), "adapter": spread(adapter_ms), "bare": spread(bare_ms)}


def conversation_pairs(
    stage: PassThrough, body: list[str], n: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The middleware's and the memory's paired overheads over 20 conversation messages."""
    lines = [" ".join(t.split()[:25]) for t in body]  # 25 words a message
    lc_messages: list[BaseMessage] = [
        HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(lines)
    ]
    system = SystemMessage("You answer from the conversation.")
    model = FakeMessagesListChatModel(responses=[AIMessage("ok")])
    model_request = ModelRequest(model=model, messages=lc_messages, system_message=system)
    response = ModelResponse(result=[AIMessage("ok")])
    middleware = PromptSlimMiddleware(stage=stage)
    chat_request = Request(messages=from_langchain_messages([system, *lc_messages]))
    agent = paired(
        lambda: middleware.wrap_model_call(model_request, lambda r: response),
        lambda: stage.run(chat_request),
        n,
    )

    li_messages = [
        ChatMessage(role="user" if i % 2 == 0 else "assistant", content=t)
        for i, t in enumerate(lines)
    ]
    memory = PromptSlimMemory.from_defaults(chat_history=li_messages, stage=stage)
    history = Request(messages=[Message(role=m.role.value, content=m.content) for m in li_messages])
    return agent, paired(memory.get, lambda: stage.run(history), n)


def retriever_pairs(
    stage: PassThrough, body: list[str], n: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """LangChain's document compressor and LlamaIndex's node postprocessor, each against the
    bare stage on the same documents."""
    request = Request(
        messages=[Message(role="user", content=QUERY)],
        documents=[
            Document(id=f"d{i}", text=t, metadata={"source": f"s{i}"}) for i, t in enumerate(body)
        ],
        query=QUERY,
    )
    lc_docs = [
        LCDocument(page_content=t, metadata={"source": f"s{i}"}, id=f"d{i}")
        for i, t in enumerate(body)
    ]
    compressor = PromptSlimCompressor(stage=stage)
    langchain = paired(
        lambda: compressor.compress_documents(lc_docs, QUERY), lambda: stage.run(request), n
    )
    nodes = [
        NodeWithScore(node=TextNode(text=t, id_=f"d{i}", metadata={"source": f"s{i}"}), score=0.5)
        for i, t in enumerate(body)
    ]
    post = PromptSlimPostprocessor(stage=stage)
    bundle = QueryBundle(QUERY)
    llamaindex = paired(
        lambda: post.postprocess_nodes(nodes, bundle), lambda: stage.run(request), n
    )
    return langchain, llamaindex


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    n = 2_000 if args.quick else 20_000
    stage = PassThrough()
    body = texts()
    langchain, llamaindex = retriever_pairs(stage, body, n)
    agent, memory = conversation_pairs(stage, body, n)
    result = {
        "benchmark": "bench_integrations",
        "documents": N_DOCS,
        "stage": "passthrough",
        # the contract keys are numbers (median added ms); the distributions sit beside them
        "langchain_overhead_ms": round(langchain["p50"], 4),
        "llamaindex_overhead_ms": round(llamaindex["p50"], 4),
        "langchain_agent_overhead_ms": round(agent["p50"], 4),
        "llamaindex_memory_overhead_ms": round(memory["p50"], 4),
        "langchain_overhead_p99_ms": round(langchain["p99"], 4),
        "llamaindex_overhead_p99_ms": round(llamaindex["p99"], 4),
        "langchain_agent_overhead_p99_ms": round(agent["p99"], 4),
        "llamaindex_memory_overhead_p99_ms": round(memory["p99"], 4),
        "langchain": langchain,
        "llamaindex": llamaindex,
        "langchain_agent": agent,
        "llamaindex_memory": memory,
        "quick": args.quick,
        "machine": machine(),
    }
    rows = [
        f"{name:<30} p50 {r['p50']:.3f} ms  p99 {r['p99']:.3f} ms  (adapter p50 {r['adapter']['p50']:.3f}, "
        f"bare p50 {r['bare']['p50']:.3f}; n={r['n']})  goal p50 <= {GOAL_MS} ms: "
        f"{'met' if r['p50'] <= GOAL_MS else 'MISSED'}"
        for name, r in (
            ("langchain_overhead_ms", langchain),
            ("llamaindex_overhead_ms", llamaindex),
            ("langchain_agent_overhead_ms", agent),
            ("llamaindex_memory_overhead_ms", memory),
        )
    ]
    emit(result, args, "\n".join(rows))


if __name__ == "__main__":
    main()
