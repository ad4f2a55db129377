"""A real OpenAI-compatible server for end-to-end tests: llama-cpp-python serving the packaged
SmolLM2 GGUF on 127.0.0.1.

Use it from a test module with ``from .llama_server import llama_server  # noqa: F401`` and
take ``llama_server`` (the base URL, ending in ``/v1``) as a fixture argument. It is started
once per session, waited for (``/v1/models`` polled, bounded), and stopped by its PID. Tests
are skipped when llama-cpp-python's server is not installed (``scripts/setup.sh`` builds it).

``llama_cpp_server`` is llama.cpp's own ``llama-server`` (continuous batching over parallel
slots, a prompt cache): the engine the load tests are about. Same use, same lifetime.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from promptslim.loadsim.processes import stop_process

READY_TIMEOUT_S = 90.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server we started, by its PID only."""
    stop_process(proc)


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    """Base URL (``http://127.0.0.1:<port>/v1``) of a llama-cpp-python server on SmolLM2."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (scripts/setup.sh builds it)")
    from promptslim.backends.models import smollm2_gguf_path

    try:
        gguf = smollm2_gguf_path()
    except ImportError as exc:
        pytest.skip(str(exc))
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed in the finally below)
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf),
        "--host", "127.0.0.1",
        "--port", str(port),
        # the default cuts concurrent streams off
        "--interrupt_requests", "False",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(base_url):
            if proc.poll() is not None:
                log.seek(0)
                tail = log.read()[-2000:].decode("utf-8", "replace")
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{tail}")
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server not ready after {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.25)
        yield base_url
    finally:
        _stop(proc)
        log.close()


@pytest.fixture(scope="session")
def llama_cpp_server() -> Iterator[str]:
    """Base URL of llama.cpp's own ``llama-server`` on SmolLM2: 4 parallel slots, continuous
    batching, an 8,192-token cache (2,048 per slot), 2 threads. Built once into the user cache
    by ``scripts/build_llama_server.sh``; the tests that need it are skipped without it."""
    from promptslim.backends.models import smollm2_gguf_path
    from promptslim.errors import BackendUnavailable
    from promptslim.loadsim.llama_server import LlamaServer, find_binary

    try:
        binary = find_binary()
        gguf = smollm2_gguf_path()
    except (BackendUnavailable, ImportError) as exc:
        pytest.skip(str(exc))
    server = LlamaServer(gguf, parallel=4, ctx=8192, threads=2, binary=binary)
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server.base_url
    finally:
        server.stop()
