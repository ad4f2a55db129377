"""Static checks as tests, so CI keeps them: ``ruff check`` over the repository and
``mypy --strict`` (pyproject's ``[tool.mypy]``) over the package. Both tools are pinned in the
``dev`` extra, so a new release's new rules cannot fail a build whose code did not change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", *args]
    return subprocess.run(
        command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_package_is_mypy_strict_clean() -> None:
    done = _run("mypy", "promptslim")
    assert done.returncode == 0, done.stdout + done.stderr
