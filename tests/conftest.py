from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Offline, always: a test that tries to download a model fails instead of hanging.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=50, deadline=None)
# the invariant suite's big run (tests/test_invariants.py uses it under CI=true)
settings.register_profile("invariants", max_examples=10_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"shared dev data not found at {SHARED_DATA}")
    return SHARED_DATA


def chat_body(n_turns: int = 3, *, system: str = "You are helpful.") -> dict:
    messages: list[dict] = [{"role": "system", "content": system}]
    for i in range(n_turns):
        messages.append({"role": "user", "content": f"question {i} about topic {i * 7}"})
        messages.append({"role": "assistant", "content": f"answer {i}: the value is {i * 13}."})
    messages.append({"role": "user", "content": "and the final question?"})
    return {"model": "m", "messages": messages}


def assert_missing_extra(module: str, hidden: Sequence[str], extra: str) -> None:
    """Importing ``module`` in a fresh interpreter where the ``hidden`` modules cannot be
    imported raises BackendUnavailable naming ``extra`` (the install hint)."""
    code = (
        f"import sys\nfor name in {list(hidden)!r}:\n    sys.modules[name] = None\n"
        "from promptslim.errors import BackendUnavailable\n"
        f"try:\n    import {module}\nexcept BackendUnavailable as e:\n    print('extra=' + e.extra)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.strip() == f"extra={extra}", out.stderr
