"""Privacy (docs/architecture.md, invariant 8): a full pipeline run logs sizes and timings, never
prompt text, at every level, with and without OpenTelemetry; and it makes no network calls."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest

from promptslim import tracing
from promptslim.pipeline import Pipeline
from promptslim.stages.compress import CompressStage
from promptslim.stages.history import HistoryStage
from promptslim.stages.prefix import PrefixStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.types import Budget, Request

MARKER = "zqxjv-SECRET-7731"  # appears nowhere but in the prompt


def _request() -> Request:
    messages: list[dict[str, Any]] = [{"role": "system", "content": f"System {MARKER} rules, 2024-05-01."}]
    for i in range(12):
        messages.append({"role": "user", "content": f"Turn {i} {MARKER} question about item {i}? " * 3})
        messages.append({"role": "assistant", "content": f"Item {i} {MARKER} costs {i} dollars. " * 3})
    messages.append({"role": "user", "content": f"Final {MARKER} question?"})
    documents = [{"id": f"d{k}", "text": f"Doc {k} {MARKER} mentions item {k}. " * 10} for k in range(8)]
    return Request.from_openai({"model": "m", "messages": messages, "documents": documents})


def _pipeline() -> Pipeline:
    return Pipeline([PrefixStage(), HistoryStage(), RetrievalStage(scorer="bm25"), CompressStage()])


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("network I/O attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_no_prompt_text_in_debug_logs(caplog: pytest.LogCaptureFixture, offline: None) -> None:
    with caplog.at_level(logging.DEBUG):  # the root logger, so "promptslim.*" and dependencies
        logging.getLogger("promptslim").setLevel(logging.DEBUG)
        result = _pipeline().run(_request(), Budget(total=700))
    assert MARKER in result.to_openai()["messages"][-1]["content"]  # the prompt did go through
    for record in caplog.records:
        assert MARKER not in record.getMessage(), f"prompt text logged by {record.name}"
        assert MARKER not in repr(record.args)


def test_no_prompt_text_in_traces(monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    """With a tracer provider set (the real SDK's), spans carry no prompt text."""
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_otel", provider.get_tracer("promptslim"))
    _pipeline().run(_request(), Budget(total=700))
    spans = exporter.get_finished_spans()
    assert any(s.name == "promptslim.history" for s in spans)
    for span in spans:
        assert MARKER not in span.name and MARKER not in repr(dict(span.attributes or {}))


def test_otel_absent_is_fine(monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    monkeypatch.setattr(tracing, "_otel", False)  # as when opentelemetry is not installed
    assert _pipeline().run(_request(), Budget(total=700)).request.messages


# ---------------------------------------------------------------- log_content (the proxy)
# promptslim's library code logs nothing; the proxy is the one module that logs per request.
# Its opt-in ``ServeConfig.log_content`` is tested on ``Proxy._slim`` directly: no server,
# no network.


class _Quoting:
    """A stage whose error quotes the prompt, as a real backend's error message may."""

    name = "quoting"

    def run(self, request: Request, budget: Budget | None = None) -> Any:
        raise RuntimeError(f"cannot handle {request.messages[-1].text!r}")


def _slim_logs(caplog: pytest.LogCaptureFixture, *, log_content: bool, pipeline: Pipeline) -> str:
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    import asyncio
    import time

    from promptslim.serve import ServeConfig
    from promptslim.serve.app import Exchange, Proxy

    proxy = Proxy(ServeConfig(upstream="http://127.0.0.1:9/v1", log_content=log_content), pipeline=pipeline)
    exchange = Exchange(id="t1", route="chat", start=time.perf_counter())
    with caplog.at_level(logging.DEBUG):
        asyncio.run(proxy._slim(_request(), exchange))
    return "\n".join(r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("pipeline", [Pipeline([_Quoting()]), _pipeline()], ids=["failing", "working"])
def test_proxy_logs_no_prompt_text_by_default(
    caplog: pytest.LogCaptureFixture, offline: None, pipeline: Pipeline
) -> None:
    text = _slim_logs(caplog, log_content=False, pipeline=pipeline)
    assert MARKER not in text


def test_proxy_log_content_opt_in(caplog: pytest.LogCaptureFixture, offline: None) -> None:
    """``log_content=True``: the failure's message and, at DEBUG, the slimmed messages."""
    failed = _slim_logs(caplog, log_content=True, pipeline=Pipeline([_Quoting()]))
    assert "pipeline_failed" in failed and MARKER in failed
    caplog.clear()
    slimmed = _slim_logs(caplog, log_content=True, pipeline=_pipeline())
    assert '"event": "slimmed"' in slimmed and MARKER in slimmed


def test_cli_serve_has_log_content_off_by_default() -> None:
    from promptslim.cli import build_parser

    args = build_parser().parse_args(["serve", "--upstream", "http://127.0.0.1:9/v1"])
    assert args.log_content is False


# ---------------------------------------------------------------- prefix fingerprints


def _fingerprint_request() -> Request:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"b": {}, "a": {}}}}}]
    body = {
        "messages": [
            {"role": "system", "content": "You are helpful.  Today is 2024-05-01."},
            {"role": "user", "content": "hi"},
        ],
        "tools": tools,
    }
    return Request.from_openai(body)


def test_prefix_fingerprint_is_sha256_of_canonical_bytes_and_salted_per_tenant() -> None:
    """SHA-256 over (salt, canonical tools JSON, each stable message's role and text): one
    tenant's salt gives fingerprints another tenant cannot reproduce or probe for."""
    import hashlib

    from promptslim.stages.prefix import canonicalise_json

    def expected(result: Any, salt: str | None) -> str:
        out = result.request
        digest = hashlib.sha256()
        if salt:
            digest.update(b"salt\x00" + salt.encode() + b"\x1e")
        digest.update(b"tools\x00" + canonicalise_json(out.tools).encode() + b"\x1e")
        for m in out.messages[: out.frozen_prefix]:
            digest.update(m.role.encode() + b"\x00" + m.text.encode() + b"\x1e")
        return digest.hexdigest()

    request = _fingerprint_request()
    results = {salt: PrefixStage(tenant_salt=salt).run(request) for salt in (None, "tenant-a", "tenant-b")}
    prints = {salt: r.report.prefix_fingerprint for salt, r in results.items()}
    for salt, result in results.items():
        assert prints[salt] == expected(result, salt)
        assert len(prints[salt] or "") == 64  # hex SHA-256
    assert len(set(prints.values())) == 3  # each tenant its own fingerprint space
    # same tenant, same prefix: same fingerprint (cache hits still work within a tenant)
    assert PrefixStage(tenant_salt="tenant-a").run(request).report.prefix_fingerprint == prints["tenant-a"]
    # the volatile date is not part of what is hashed: it moved out of the prefix
    assert "2024-05-01" not in "".join(m.text for m in results[None].request.messages[:1])


# ---------------------------------------------------------------- no code-executing loaders


def test_no_code_executing_loader_in_the_package() -> None:
    """Audit, kept as a test: nothing in promptslim unpickles, evaluates, or lets a model folder
    run its own code. (transformers 4.47 and sentence-transformers 5 read ``.bin`` weights with
    ``torch.load(weights_only=True)``; every model load passes ``local_files_only``.)"""
    import re
    from pathlib import Path

    import promptslim

    banned = re.compile(
        r"\bimport pickle\b|\bpickle\.loads?\(|\bjoblib\b|\bdill\b|\bmarshal\.loads?\(|\bshelve\b"
        r"|allow_pickle\s*=\s*True|trust_remote_code\s*=\s*True|\byaml\.load\(|\byaml\.unsafe_load"
        r"|(?<![.\w])eval\(|(?<![.\w])exec\("  # builtins, not model.eval()
    )
    found = []
    for path in Path(promptslim.__file__).parent.rglob("*.py"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if banned.search(code) or ("torch.load(" in code and "weights_only=True" not in code):
                found.append(f"{path.name}:{n}: {line.strip()}")
    assert not found, found
