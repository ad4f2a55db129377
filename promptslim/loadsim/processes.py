"""Stopping a server process this program started: by its PID only, SIGTERM first (a graceful
shutdown), SIGKILL when it has not gone after ``grace_s``. Used by the load tools, the
benchmarks and the tests for every server they start on 127.0.0.1."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["stop_process"]


def stop_process(proc: subprocess.Popen[Any] | None, *, grace_s: float = 10.0) -> None:
    """End ``proc`` (a no-op for None or a process that has already exited)."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
