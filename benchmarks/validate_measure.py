"""``validate_simulator.py``'s measurement side: prompts of a known size in the served model's
own tokenizer, closed-loop levels through ``promptslim.loadsim.run_loadtest``, and the
server's own per-request timings."""

from __future__ import annotations

import json
import statistics
import sys
import time
import urllib.request
import uuid
from typing import Any

from common import LlamaServer

from promptslim.loadsim import (
    LoadtestOptions,
    PreparedRequest,
    ServerTiming,
    parse_llama_perf,
    run_loadtest,
)

__all__ = ["FILLER", "Level", "Prompts", "loadtest_records", "post_json", "server_timings"]

FILLER = (
    "The archive of the northern valley keeps records of every harvest since the old bridge "
    "was built, and each ledger lists the families, the fields they worked and the weather of "
    "that year. "
)


# ---------------------------------------------------------------- the server we start


def post_json(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def server_timings(server: LlamaServer) -> list[ServerTiming]:
    """The server's per-request perf lines so far (it logs them with ``--verbose True``)."""
    return parse_llama_perf(server.log_text())


# ---------------------------------------------------------------- prompts of a known size


class Prompts:
    """Unique prompts of about ``n`` tokens in the served model's own tokenizer."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._per_filler = len(self.tokenize(FILLER * 10)) / 10

    def tokenize(self, text: str) -> list[int]:
        return list(post_json(self.base + "/extras/tokenize", {"input": text})["tokens"])

    def make(self, n: int, *, max_tokens: int) -> PreparedRequest:
        # a unique first line: llama.cpp reuses the longest prefix of the previous prompt
        head = f"Ticket {uuid.uuid4().hex}. Read the notes below.\n"
        question = "\nSummarise the notes above in one long sentence."
        fixed = len(self.tokenize(head + question)) + 12  # + chat-template tokens
        repeats = max(0, round((n - fixed) / self._per_filler))
        content = head + FILLER * repeats + question
        body = {
            "model": "smollm2",
            "messages": [{"role": "user", "content": content}],
            "stream": True,
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        return PreparedRequest(body, len(self.tokenize(content)))


def loadtest_records(
    base: str, stream: list[PreparedRequest], *, concurrency: int, max_tokens: int
) -> list[dict[str, Any]]:
    opts = LoadtestOptions(
        url=base + "/v1", requests=len(stream), concurrency=concurrency, timeout_s=600,
        time_limit_s=1800, max_tokens=max_tokens,
    )  # fmt: skip
    run = run_loadtest(opts, prepared={"baseline": stream})["configs"]["baseline"]
    bad = [r for r in run["records"] if r["status"] != "ok"]
    if bad:
        raise SystemExit(f"{len(bad)} requests failed: {bad[0]['error']}")
    # the order the server took them in (one at a time: the order their first tokens came)
    return sorted(run["records"], key=lambda r: r["sent_clock_s"] + r["ttft_s"])


class Level:
    """One closed-loop level's records (in the server's order) and the server's timings of
    the same requests (None when they could not be paired one to one)."""

    def __init__(
        self, server: LlamaServer, prompts: Prompts, *, n: int, concurrency: int, prompt_tokens: int,
        max_tokens: int,
    ) -> None:  # fmt: skip
        seen = len(server_timings(server))
        t0 = time.monotonic()
        self.records = loadtest_records(
            server.base,
            [prompts.make(prompt_tokens, max_tokens=max_tokens) for _ in range(n)],
            concurrency=concurrency,
            max_tokens=max_tokens,
        )
        self.wall_s = time.monotonic() - t0
        timings = server_timings(server)[seen:]
        self.paired: list[ServerTiming] | None = (
            timings if len(timings) == len(self.records) else None
        )
        if self.paired is None:
            print(
                f"level {concurrency}: {len(timings)} server timings for {len(self.records)} "
                "requests; not used",
                file=sys.stderr,
            )

    def tail(self, k: int) -> tuple[list[dict[str, Any]], list[ServerTiming] | None]:
        """The last ``k`` requests the server took, with their timings."""
        return self.records[-k:], self.paired[-k:] if self.paired else None

    def per_token(self) -> float | None:
        """The server's median prefill time per token over this level."""
        if not self.paired:
            return None
        return statistics.median(t.prefill_s / t.prefill_tokens for t in self.paired)
