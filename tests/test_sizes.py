"""The size rules of CONTRIBUTING.md hold: a module of the package or of benchmarks/ is at
most 400 lines, and a function at most 60 (a longer one is several ideas, better named apart)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
SOURCES = sorted(
    p for folder in ("promptslim", "benchmarks") for p in (ROOT / folder).rglob("*.py")
)


def _oversized(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    found = []
    lines = source.count("\n")
    if lines > MAX_MODULE_LINES:
        found.append(f"{lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > MAX_FUNCTION_LINES:
                found.append(f"{node.name} ({size} lines, line {node.lineno})")
    return found


def test_there_are_sources_to_check() -> None:
    assert len(SOURCES) > 50


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_and_function_sizes(path: Path) -> None:
    assert _oversized(path) == []


def test_the_check_finds_an_oversized_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    module = tmp_path / "big.py"
    module.write_text(f"def big() -> None:\n{body}\n" + "\n" * MAX_MODULE_LINES)
    assert _oversized(module) == [
        f"{MAX_FUNCTION_LINES + 1 + MAX_MODULE_LINES} lines",
        f"big ({MAX_FUNCTION_LINES + 1} lines, line 1)",
    ]
