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
#: the sample of the evaluation data committed with the tests (tests/data/README.md)
SAMPLE_DATA = Path(__file__).resolve().parent / "data"
DATA_FILES = ("nq20-dev.jsonl.gz", "kv75-dev.jsonl.gz")


@pytest.fixture(scope="session")
def eval_data() -> Path:
    """The folder holding nq20-dev.jsonl.gz and kv75-dev.jsonl.gz: ``PROMPTSLIM_DATA_DIR`` when
    set (the full files), else the sample in tests/data. A test reads the first rows it needs;
    the sample's rows are the full files' first rows, so either gives the same rows."""
    folder = Path(os.environ.get("PROMPTSLIM_DATA_DIR") or SAMPLE_DATA)
    missing = [name for name in DATA_FILES if not (folder / name).is_file()]
    if missing:
        # a wrong PROMPTSLIM_DATA_DIR is a set-up error, not a reason to skip
        raise FileNotFoundError(f"PROMPTSLIM_DATA_DIR={folder} lacks {', '.join(missing)}")
    return folder


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
