"""``bench_tools.py``'s data: the cached sources its traces are built from (PyGithub's recorded
GitHub API responses, logs — ``pytest -v`` of some of the project's tests and llama-server
serving a few requests on the packaged SmolLM2, made here; the set-up's own verbose pip installs
and llama-server build, which ``scripts/setup.sh`` keeps, or else pip's verbose download of one
package — and source files of installed packages).

Fetched or made into ``~/.cache/promptslim`` at run time, never committed. Every log is made
by a pinned program from the project's own files, so a fresh clone gets the same kinds of
log; ``log_summary`` says which were found, for the result."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
import urllib.request
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
    """pytest -v output and llama-server's log, made here once and kept in the cache, and the
    set-up's own pip and cmake logs (or pip's verbose download of one package)."""
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
    server_log = llama_server_log(folder / "llama_server.log")
    if server_log is not None:
        found.append(("llama-server -m smollm2.gguf -np 2 -cb", server_log))
    # the set-up's own installs and llama-server build (scripts/setup.sh keeps their verbose
    # output here), when it wrote them; else pip's verbose download of one small package
    found += [
        ("pip install -v " + p.stem.removeprefix("pip_install_"), p)
        for p in sorted(folder.glob("pip_install_*.log"))
    ]
    builds = sorted(folder.glob("llama_server_build_*.log"), key=lambda p: p.stat().st_mtime)
    if builds:
        found.append(("cmake --build build --target llama-server", builds[-1]))
    if not any(p.name.startswith("pip_install_") for _, p in found):
        found.append(("pip download -v rank-bm25", pip_download_log(folder)))
    return found


def pip_download_log(folder: Path) -> Path:
    """pip's verbose download of one small package, made once."""
    path = folder / "pip_download_v.log"
    if not path.is_file():
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
        path.write_text(out.stdout + out.stderr)
    return path


def llama_server_log(path: Path) -> Path | None:
    """llama-server's own log (model load, slots, a few requests served), made once; None
    where the set-up has not built llama-server."""
    if path.is_file():
        return path
    from promptslim.backends.models import smollm2_gguf_path
    from promptslim.errors import BackendUnavailable
    from promptslim.loadsim.llama_server import LlamaServer

    try:
        server = LlamaServer(smollm2_gguf_path(), parallel=2, ctx=2048)
    except BackendUnavailable:
        return None
    with server:
        for i in range(3):
            body = {
                "messages": [{"role": "user", "content": f"Count to {i + 3}."}],
                "max_tokens": 8,
            }
            req = urllib.request.Request(
                f"{server.base_url}/chat/completions",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=120) as answer:
                answer.read()
        path.write_text(server.log_tail(10_000_000))
    return path


def log_summary(logs: list[tuple[str, Path]]) -> dict[str, int]:
    """Lines in each log the traces draw on."""
    return {cmd: len(p.read_text(errors="replace").splitlines()) for cmd, p in logs}


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
