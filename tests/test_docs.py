"""The docs point only inside the repository, the paths they name exist, and the example stage
in docs/architecture.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from promptslim import BaseStage, Message, Pipeline, Request

ROOT = Path(__file__).resolve().parent.parent
DOCS = [
    ROOT / "README.md",
    ROOT / "README.zh-CN.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "tests" / "data" / "README.md",
]
#: a path in backticks under one of the repository's top-level folders
_REPO_PATH = re.compile(r"`((?:promptslim|tests|benchmarks|docs|examples|scripts)/[^`\s*<>{}]*)`")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_points_only_inside_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert "../" not in text, f"{doc.name} points outside the repository"
    missing = [
        p for p in _REPO_PATH.findall(text) if not (ROOT / p.split("::")[0].rstrip(".,:;")).exists()
    ]
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


def test_the_architecture_example_stage_runs_through_a_pipeline() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "BaseStage" in b)
    namespace: dict[str, object] = {}
    exec(compile(block, "docs/architecture.md", "exec"), namespace)  # noqa: S102 (our own doc)
    stage_class = next(
        v for v in namespace.values() if isinstance(v, type) and issubclass(v, BaseStage)
        and v is not BaseStage
    )  # fmt: skip
    request = Request(
        messages=[
            Message(role="system", content="Be brief."),
            Message(role="assistant", content=""),
            Message(role="user", content="hello?"),
        ]
    )
    result = Pipeline([stage_class()]).run(request)
    assert [m.role for m in result.request.messages] == ["system", "user"]
    assert [c.kind for c in result.report.stages[0].changes] == ["dropped"]
