"""llama.cpp's ``llama-server`` for load tests: continuous batching over parallel slots and a
prompt cache, the kind of engine promptslim's TTFT claim is about (llama-cpp-python's own
server runs one request at a time).

``scripts/build_llama_server.sh`` builds it once into the user cache
(``~/.cache/promptslim/llama-server/<version>-<flags hash>/llama-server``); ``find_binary``
finds it there (or at ``$PROMPTSLIM_LLAMA_SERVER``), ``LlamaServer`` starts it on 127.0.0.1,
waits for ``/health`` and stops it by its PID.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, final

from ..errors import BackendUnavailable
from .processes import stop_process

__all__ = ["LlamaServer", "find_binary", "free_port"]

#: the llama-cpp-python release whose vendored llama.cpp the set-up builds
PINNED_VERSION = "0.3.36"
_HINT = "bash scripts/build_llama_server.sh (needs cmake and a C++ compiler)"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(binary: Path) -> bool:
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def find_binary() -> Path:
    """The built ``llama-server``, or ``BackendUnavailable`` saying how to build it."""
    given = os.environ.get("PROMPTSLIM_LLAMA_SERVER")
    if given:
        candidates = [Path(given)]
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        found = sorted((root / "promptslim" / "llama-server").glob("*/llama-server"))
        # the pinned version's build first, then any other
        candidates = sorted(found, key=lambda p: not p.parent.name.startswith(PINNED_VERSION))
    for binary in candidates:
        if binary.is_file() and os.access(binary, os.X_OK) and _answers(binary):
            return binary
    raise BackendUnavailable(f"llama.cpp's llama-server (build it: {_HINT})", extra="bench")


@final
class LlamaServer:
    """``with LlamaServer(model) as server: server.base_url`` (``http://127.0.0.1:N/v1``).

    ``parallel`` slots share a ``ctx``-token KV cache (each slot gets ``ctx / parallel``),
    continuous batching on; ``threads`` CPU threads. The log goes to a temporary file, read
    back in the error when the server exits or is not ready within ``ready_timeout_s``."""

    def __init__(
        self,
        model: str | Path,
        *,
        parallel: int = 4,
        ctx: int = 8192,
        threads: int = 2,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        ready_timeout_s: float = 120.0,
        binary: Path | None = None,
    ) -> None:
        self.binary = binary or find_binary()
        self.model = Path(model)
        self.parallel, self.ctx, self.threads = parallel, ctx, threads
        self.port = port or free_port()
        self.extra_args = tuple(extra_args)
        self.ready_timeout_s = ready_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def command(self) -> list[str]:
        return [
            str(self.binary), "-m", str(self.model), "--host", "127.0.0.1",
            "--port", str(self.port), "-np", str(self.parallel), "-cb", "-c", str(self.ctx),
            "-t", str(self.threads), *self.extra_args,
        ]  # fmt: skip

    def start(self) -> LlamaServer:
        self._log = tempfile.TemporaryFile()  # noqa: SIM115  (closed in stop())
        self._proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.ready_timeout_s
        while not self._healthy():
            code = self._proc.poll()
            if code is not None:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"llama-server exited with {code}:\n{tail}")
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(
                    f"llama-server not ready after {self.ready_timeout_s:g} s\n{tail}"
                )
            time.sleep(0.2)
        return self

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False  # 503 while the model loads, refused before it listens

    def log_tail(self, n: int = 3000) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-n:].decode("utf-8", "replace")

    def stop(self) -> None:
        """Stop the server we started, by its PID only."""
        proc, self._proc = self._proc, None
        stop_process(proc)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
