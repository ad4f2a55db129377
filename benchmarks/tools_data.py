"""``bench_tools.py``'s data: the cached sources its traces are built from (PyGithub's recorded
GitHub API responses, logs — ``pytest -v`` of some of the project's tests, llama-server
serving a few requests on the packaged SmolLM2 and ``promptslim serve`` in front of it (JSON
lines of 400 characters and more), made here; the set-up's own verbose pip installs
and llama-server build, which ``scripts/setup.sh`` keeps (each pip log as this benchmark first
met it: ``first_seen``), or else pip's verbose download of one package — and source files of
installed packages).

Fetched or made into ``~/.cache/promptslim`` at run time, never committed. Every log is made
by a pinned program from the project's own files, so a fresh clone gets the same kinds of
log; ``log_summary`` says which were found, for the result."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

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
        ("pip install -v " + p.stem.removeprefix("pip_install_"), first_seen(p))
        for p in sorted(folder.glob("pip_install_*.log"))
    ]
    proxy = proxy_log(folder / "promptslim_serve.log")
    if proxy is not None:
        found.append(("promptslim serve --upstream llama-server", proxy))
    builds = sorted(folder.glob("llama_server_build_*.log"), key=lambda p: p.stat().st_mtime)
    if builds:
        found.append(("cmake --build build --target llama-server", builds[-1]))
    if not any(p.name.startswith("pip_install_") for _, p in found):
        found.append(("pip download -v rank-bm25", pip_download_log(folder)))
    return found


def first_seen(log: Path) -> Path:
    """The copy of a set-up log taken the first time a run met it, in ``sources/`` beside it.
    A set-up run again rewrites its logs (a re-install's pip log is a third of a first
    install's, without the long list of versions installed), which would change the traces
    between two runs of this benchmark; the copy keeps every later run on the same text."""
    copy = log.parent / "sources" / log.name
    if not copy.is_file():
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(log.read_bytes())
    return copy


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
    server = _llama_server()
    if server is None:
        return None
    with server:
        for i in range(3):
            body = {
                "messages": [{"role": "user", "content": f"Count to {i + 3}."}],
                "max_tokens": 8,
            }
            _post(f"{server.base_url}/chat/completions", json.dumps(body).encode())
        path.write_text(server.log_tail(10_000_000))
    return path


def _llama_server() -> Any:
    """A ``LlamaServer`` on the packaged SmolLM2 (not started), or None where the set-up has
    not built llama-server."""
    from promptslim.backends.models import smollm2_gguf_path
    from promptslim.errors import BackendUnavailable
    from promptslim.loadsim.llama_server import LlamaServer

    try:
        return LlamaServer(smollm2_gguf_path(), parallel=2, ctx=2048)
    except BackendUnavailable:
        return None


#: requests sent through the proxy for its log (a log of about 50,000 characters: a trace's
#: results are at most 60,000), and how often one is malformed (answered 400 before the
#: upstream)
PROXY_REQUESTS = 80
PROXY_BAD_EVERY = 10


def proxy_log(path: Path) -> Path | None:
    """``promptslim serve``'s own log in front of llama-server, made once: one JSON line per
    request (its id, sizes, token counts and timings: 400 characters and more a line), for
    ``PROXY_REQUESTS`` chat requests of several sizes, with and without documents, every
    ``PROXY_BAD_EVERY``-th malformed. None where the set-up has not built llama-server."""
    if path.is_file():
        return path
    from proxy_support import free_port, stop, wait_ready

    server = _llama_server()
    if server is None:
        return None
    port = free_port()
    with server, path.with_suffix(".tmp").open("wb") as out:
        proxy = subprocess.Popen(
            [sys.executable, "-m", "promptslim", "serve", "--upstream", server.base_url,
             "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_ready(f"http://127.0.0.1:{port}/healthz", proxy, timeout_s=120)
            for i in range(PROXY_REQUESTS):
                _post(f"http://127.0.0.1:{port}/v1/chat/completions", _proxy_body(i))
        finally:
            stop(proxy)
    path.with_suffix(".tmp").replace(path)
    return path


def _proxy_body(i: int) -> bytes:
    if i % PROXY_BAD_EVERY == PROXY_BAD_EVERY - 1:
        return b'{"model": "smollm2", "messages": [{"role": "user"}]}'  # no content: a 400
    # sizes that rarely repeat: a request's token count names it in the log
    facts = [
        f"Record {i}-{k}: item {k * 7 + i} costs {k * 3 + i % 11} euros."
        for k in range(i * 7 % 43)
    ]
    ask = f"Request {i}: what does item {i + 7} cost? " + "Please be brief. " * (i % 13)
    body: dict[str, object] = {
        "model": "smollm2",
        "max_tokens": 2,
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": ask},
        ],
    }
    if facts:
        body["documents"] = [" ".join(facts[k : k + 4]) for k in range(0, len(facts), 4)]
    return json.dumps(body).encode()


def _post(url: str, data: bytes) -> None:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        if exc.code != 400:  # the malformed requests' 400 is the point; nothing else is
            raise
        exc.read()


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
