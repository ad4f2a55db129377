"""Model backends on real models: SmolLM2 through transformers, and a llama-cpp-python server
on 127.0.0.1 (the shared fixture in tests/llama_server.py). Tiny prompts keep them short."""

from __future__ import annotations

import math

import pytest

from promptslim.bench.backends import HFBackend, OpenAIBackend, last_logits_only, load_backend
from promptslim.bench.datasets import BenchItem, LoadedDataset
from promptslim.bench.runner import parse_configs, run_bench
from promptslim.types import Message, Request

from .llama_server import llama_server  # noqa: F401  (session fixture)

WITH_CONTEXT = [
    {"role": "system", "content": "Answer with one word."},
    {"role": "user", "content": "The secret word is zebrafish."},
    {"role": "user", "content": "What is the secret word?"},
]
WITHOUT_CONTEXT = [WITH_CONTEXT[0], WITH_CONTEXT[2]]


def _tiny_dataset() -> LoadedDataset:
    items = [
        BenchItem(
            f"tiny-{i}",
            Request(messages=[Message.model_validate(m) for m in messages]),
            ("zebrafish",),
        )
        for i, messages in enumerate([WITH_CONTEXT, WITHOUT_CONTEXT])
    ]
    return LoadedDataset("tiny", items)


@pytest.mark.slow
def test_hf_backend_on_smollm2_measures_prefill_answer_and_gold_logprob() -> None:
    backend = load_backend("hf:default", device="cpu", repeats=2, max_new_tokens=6)
    assert isinstance(backend, HFBackend) and backend.describe()["device"] == "cpu"
    # prefill computes the last position's logits only, as an engine does (a Llama-family model
    # with the pinned transformers takes one of the two spellings; the log-prob check below
    # shows the last logits are still right)
    assert list(last_logits_only(backend.lm.model).values()) == [1]
    with_ctx = backend.measure(WITH_CONTEXT, answers=["zebrafish"])
    without = backend.measure(WITHOUT_CONTEXT, answers=["zebrafish"])
    assert with_ctx.prefill_s is not None and with_ctx.prefill_s > 0
    assert with_ctx.prompt_tokens is not None and without.prompt_tokens is not None
    assert with_ctx.prompt_tokens > without.prompt_tokens
    assert with_ctx.gold_logprob is not None and without.gold_logprob is not None
    assert math.isfinite(with_ctx.gold_logprob) and with_ctx.gold_logprob < 0
    # the answer is far more likely when the prompt holds it: the log-prob reads the right tokens
    assert with_ctx.gold_logprob > without.gold_logprob + 2
    assert isinstance(with_ctx.answer, str) and "\n" not in with_ctx.answer
    # measure() takes the KV-cache-sharing path (one prefill, not three; with the pinned
    # transformers the forward returns the legacy tuple cache, which must be converted), and
    # that path agrees with separate full forward passes
    ids = backend.prompt_ids(WITH_CONTEXT)
    shared = backend._measure_sharing_cache(ids, "zebrafish")
    assert shared is not None
    separate, n = backend.answer_logprob(ids, "zebrafish")
    assert n == with_ctx.gold_tokens and separate == pytest.approx(with_ctx.gold_logprob, abs=1e-3)
    assert shared[1] == with_ctx.answer == backend.generate(ids)[0]

    run = run_bench(_tiny_dataset(), backend, parse_configs("baseline"))
    assert [r.error for r in run.rows] == [None, None]
    assert run.summary["configs"]["baseline"]["first_token_s"]["p50"] > 0


@pytest.mark.slow
def test_openai_backend_against_a_real_llama_cpp_server(llama_server: str) -> None:  # noqa: F811
    backend = load_backend(f"openai:{llama_server}", max_new_tokens=8)
    assert isinstance(backend, OpenAIBackend)
    try:
        m = backend.measure(WITH_CONTEXT, answers=["zebrafish"])
        assert m.ttft_s is not None and 0 < m.ttft_s <= (m.generate_s or math.inf)
        assert m.answer.strip()
        assert m.prefill_s is None and m.gold_logprob is None  # a server gives neither
        run = run_bench(_tiny_dataset(), backend, parse_configs("baseline"))
        assert [r.error for r in run.rows] == [None, None]
        assert run.summary["configs"]["baseline"]["first_token_s"]["p50"] > 0
    finally:
        backend.close()


def test_openai_backend_maps_connection_errors() -> None:
    from promptslim.errors import BackendError

    from .llama_server import free_port

    backend = OpenAIBackend(f"http://127.0.0.1:{free_port()}/v1", timeout_s=2)
    with pytest.raises(BackendError, match="openai:http://127.0.0.1"):
        backend.measure(WITH_CONTEXT, answers=["x"])
    backend.close()
