"""bench_load's pieces: the mixed request stream, the proxies it starts, TTFT percentiles and
answer quality. See bench_load.py for the scenario."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptslim import Pipeline, Request
from promptslim.bench.dataset_base import BenchItem
from promptslim.bench.datasets import load_dataset
from promptslim.bench.metrics import best_subspan_em, evidence_retention
from promptslim.loadsim.llama_server import free_port
from promptslim.loadsim.loadtest import PreparedRequest, RequestRecord
from promptslim.loadsim.processes import stop_process
from promptslim.stats import paired_bootstrap_ci, percentiles
from promptslim.tokens import count_messages

#: where PyGithub's recorded API responses are unpacked (``tools:`` traces need them)
REPLAY = Path.home() / ".cache" / "promptslim" / "pygithub-2.10.0" / "tests" / "ReplayData"


@dataclass(frozen=True)
class Item:
    """One request of the stream: its kind, its answers, and its bodies: as the server gets
    it without promptslim, slimmed in the client, and as a client of the proxy sends it
    (retrieved documents in a top-level ``documents`` list, promptslim's extension, for the
    proxy to select from and render; its size is the baseline's)."""

    kind: str  # rag | chat | tools
    answers: tuple[str, ...]
    baseline: PreparedRequest
    slimmed: PreparedRequest
    proxied: PreparedRequest


def _body(request: Request, max_tokens: int) -> dict[str, Any]:
    from promptslim.bench.runner import build_config

    body = build_config("baseline").pipeline.run(request).to_openai()  # the request as it is
    body.update(model="smollm2", stream=True, max_tokens=max_tokens, temperature=0.0)
    body["stream_options"] = {"include_usage": True}
    return body


def _prepared(body: dict[str, Any], slim_s: float = 0.0) -> PreparedRequest:
    return PreparedRequest(body, count_messages(Request.from_openai(body).messages), slim_s)


def _items(spec: str, n: int) -> list[BenchItem]:
    if n <= 0:
        return []
    return load_dataset(spec, limit=n, seed=0).items[:n]


def mixed_stream(
    *, rag: int, chat: int, tools: int, max_tokens: int, pipeline: Pipeline
) -> list[Item]:
    """RAG, chat and (when the replay data is there) tool-trace items, interleaved by kind, each
    with its baseline body and the body promptslim sends (slimmed here, its time kept)."""
    kinds: list[tuple[str, list[BenchItem]]] = [
        ("rag", _items("builtin:rag", rag)),
        ("chat", _items("builtin:chat", chat)),
    ]
    if tools and REPLAY.is_dir():
        kinds.append(("tools", _items(f"tools:{REPLAY}", tools)))
    # models load here, on an item the stream does not hold (a memo would make its slim free)
    pipeline.run(_items("builtin:rag", rag + 1)[-1].request)
    order = [
        (k, it)
        for group in zip(*(its for _, its in kinds))
        for k, it in zip([k for k, _ in kinds], group, strict=True)
    ]
    longest = max(len(its) for _, its in kinds)
    order += [
        (k, its[i])
        for i in range(min(len(x) for _, x in kinds), longest)
        for k, its in kinds
        if i < len(its)
    ]
    out = []
    for kind, item in order:
        base = _body(item.request, max_tokens)
        start = time.perf_counter()
        slim = pipeline.run(item.request).to_openai()
        slim_s = time.perf_counter() - start
        slim.update({k: v for k, v in base.items() if k != "messages"})
        raw = item.request.to_openai()
        raw.update({k: v for k, v in base.items() if k != "messages"})
        baseline = _prepared(base)
        proxied = PreparedRequest(raw, baseline.prompt_tokens)
        out.append(Item(kind, item.answers, baseline, _prepared(slim, slim_s), proxied))
    return out


# ---------------------------------------------------------------- proxies


class Proxy:
    """``promptslim serve`` as a subprocess on 127.0.0.1, stopped by its PID."""

    def __init__(self, upstream: str, *args: str, ready_timeout_s: float = 180.0) -> None:
        self.port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "promptslim",
            "serve",
            "--upstream",
            upstream,
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *args,
        ]
        self._log = tempfile.TemporaryFile()  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        self.ready_by = time.monotonic() + ready_timeout_s

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def wait(self) -> Proxy:
        while time.monotonic() < self.ready_by:
            if self.proc.poll() is not None:
                self._log.seek(0)
                raise SystemExit(f"promptslim serve exited: {self._log.read()[-1500:]!r}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2):
                    return self
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise SystemExit("promptslim serve not ready in time")

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()


# ---------------------------------------------------------------- figures


def ttft_s(record: RequestRecord, *, with_slim: bool) -> float | None:
    """Client TTFT; for promptslim in the client, its slimming counts (it delays the send)."""
    if record.status != "ok" or record.ttft_s is None:
        return None
    return record.ttft_s + (record.slim_s if with_slim else 0.0)


def ttft_pcts(records: Sequence[RequestRecord], *, with_slim: bool = False) -> dict[str, float]:
    values = [t for r in records if (t := ttft_s(r, with_slim=with_slim)) is not None]
    return percentiles(values, (50, 95, 99)) if values else {}


def quality(
    items: Sequence[Item], base: Sequence[RequestRecord], other: Sequence[RequestRecord]
) -> dict[str, Any]:
    """EM of the streamed answers, other minus baseline, paired over requests both completed;
    and evidence retention of what each sent."""
    pairs = [
        (i, b, o)
        for i, (b, o) in enumerate(zip(base, other, strict=True))
        if b.status == "ok" and o.status == "ok"
    ]
    em_b = [best_subspan_em(b.answer, items[i].answers) for i, b, _ in pairs]
    em_o = [best_subspan_em(o.answer, items[i].answers) for i, _, o in pairs]
    ci = paired_bootstrap_ci(em_o, em_b)
    kept = [evidence_retention(_text(items[i].slimmed.body), items[i].answers) for i, _, _ in pairs]
    return {
        "pairs": len(pairs),
        "em_baseline": statistics.fmean(em_b) if em_b else None,
        "em_promptslim": statistics.fmean(em_o) if em_o else None,
        "quality_delta": {"mean": ci.mean, "low": ci.low, "high": ci.high, "n": ci.n},
        "evidence_kept": statistics.fmean(kept) if kept else None,
    }


def _text(body: dict[str, Any]) -> str:
    parts = [m.get("content") for m in body.get("messages", [])]
    return "\n".join(p for p in parts if isinstance(p, str))
