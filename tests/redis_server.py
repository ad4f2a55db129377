"""A real ``redis-server`` for tests and benchmarks: on 127.0.0.1, a free port, no persistence,
stopped by its PID. Callers skip when the binary is missing (``scripts/setup.sh`` installs it
from the OS packages where it can)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from typing import Self

from promptslim.loadsim.processes import stop_process

__all__ = ["RedisServer", "redis_server_available"]


def redis_server_available() -> bool:
    return shutil.which("redis-server") is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """``start()`` it (again after ``stop()``: the same port), read ``url``, ``stop()`` it."""

    def __init__(self, *extra: str, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 20.0) -> RedisServer:
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
               "--save", "", "--appendonly", "no", *self.extra]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} not ready after {timeout_s} s")

    def stop(self) -> None:
        """Stop the server we started, by its PID."""
        proc, self.proc = self.proc, None
        stop_process(proc)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
