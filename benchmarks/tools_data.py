"""``bench_tools.py``'s data: the cached sources its traces are built from (PyGithub's recorded
GitHub API responses, pip and pytest logs made here, source files of installed packages).

Fetched or made into ``~/.cache/promptslim`` at run time, never committed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
from pathlib import Path

from promptslim.bench.tool_traces import TraceSources

CACHE = Path.home() / ".cache" / "promptslim"
PYGITHUB = "PyGithub==2.10.0"


def replay_dir() -> Path:
    root = CACHE / "pygithub-2.10.0" / "tests" / "ReplayData"
    if root.is_dir():
        return root
    CACHE.mkdir(parents=True, exist_ok=True)
    sdist = CACHE / "pygithub-2.10.0.tar.gz"
    if not sdist.is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                PYGITHUB,
                "-d",
                str(CACHE),
            ],
            check=True,
            capture_output=True,
        )
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/tests/ReplayData/" in m.name]
        tar.extractall(CACHE, members=members, filter="data")
    return root


def logs() -> list[tuple[str, Path]]:
    """pip's verbose log and pytest -v output, made here once and kept in the cache."""
    folder = CACHE / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    pytest_log = folder / "pytest_v.log"
    if not pytest_log.is_file():
        tests = Path(__file__).resolve().parent.parent / "tests"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-v",
                "-p",
                "no:cacheprovider",
                str(tests / "test_text_robustness.py"),
                str(tests / "test_tool_compressors.py"),
                str(tests / "test_tools_stage.py"),
                str(tests / "test_types.py"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        pytest_log.write_text(out.stdout)
    found = [("pytest -v tests/", pytest_log)]
    found += [
        ("pip install -v " + p.stem.removeprefix("pip_install_"), p)
        for p in sorted(folder.glob("pip_*.log"))
    ]
    if not any(p.name.startswith("pip_") for _, p in found):
        pip_log = folder / "pip_download_v.log"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-v",
                "--no-deps",
                "-d",
                str(folder / "dl"),
                "rank-bm25",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        pip_log.write_text(out.stdout + out.stderr)
        found.append(("pip download -v rank-bm25", pip_log))
    return found


def source_files(limit: int) -> list[Path]:
    files: list[Path] = []
    for package in (
        "json",
        "email",
        "http",
        "logging",
        "asyncio",
        "pydantic",
        "tiktoken",
        "urllib",
    ):
        spec = importlib.util.find_spec(package)
        for root in spec.submodule_search_locations or [] if spec else []:
            files += sorted(
                p for p in Path(root).glob("*.py") if 2_000 <= p.stat().st_size <= 40_000
            )
    return files[:limit]


def trace_sources(files: int = 120) -> TraceSources:
    """Every source, fetched or made once into the cache."""
    return TraceSources.from_paths(
        replay_dir=replay_dir(), logs=logs(), source_files=source_files(files)
    )
