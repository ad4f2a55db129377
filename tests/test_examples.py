"""Every script in examples/ runs offline and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("plain_openai_request.py", ["tokens:", "kept documents: [", '"messages"']),
        ("langchain_rag.py", ["[eiffel] The Eiffel Tower is 330 metres tall", "--- answer"]),
        (
            "llamaindex_query.py",
            ["  eiffel  {'source': 'eiffel'}", "--- chat history: 26 messages"],
        ),
        ("slo_plan.py", ["as sent:", "planned:   budget", "meets the 1.5 s goal"]),
    ],
)
def test_example_runs_offline(script: str, expected: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    args = ["--out", str(tmp_path / "slim.json")] if script == "slo_plan.py" else []
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for text in expected:
        assert text in out.stdout
