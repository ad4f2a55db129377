"""``bench_proxy.py``'s plumbing: CPU time per process tree from ``/proc`` (client, seam and
proxy, so a figure says which of them a core spent its time on) and the child processes'
ports, readiness and stopping (by PID)."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import time
import urllib.request
from typing import Any

from promptslim.loadsim.processes import stop_process

__all__ = [
    "CpuMeter",
    "free_port",
    "machine_busy",
    "self_cpu_ms",
    "stop",
    "tree_cpu_ms",
    "wait_ready",
]

# ---------------------------------------------------------------- CPU accounting


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree_cpu_ms(pid: int) -> float | None:
    """User + system CPU of a process we started and its live descendants (uvicorn's worker
    processes) from Linux ``/proc``, or None elsewhere."""
    if _stat(pid) is None:
        return None
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        this = todo.pop()
        if (fields := _stat(this)) is not None:
            total += int(fields[11]) + int(fields[12])
            todo.extend(children.get(this, []))
    return total * 1e3 / os.sysconf("SC_CLK_TCK")


def self_cpu_ms() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return (use.ru_utime + use.ru_stime) * 1e3


def machine_busy() -> tuple[float, float] | None:
    """(busy, total) jiffies of all CPUs, every process on the machine included."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return float(sum(values) - idle), float(sum(values))


class CpuMeter:
    """CPU used by the client (this process and its client processes), the seam and the
    proxy (each with its worker processes) over one phase."""

    def __init__(self, seam: int, proxy: int) -> None:
        self.pids = {"seam": seam, "proxy": proxy}
        self.start = self._read()

    def _read(self) -> dict[str, Any]:
        now: dict[str, Any] = {name: tree_cpu_ms(pid) for name, pid in self.pids.items()}
        now["client"] = self_cpu_ms()
        now["machine"] = machine_busy()
        return now

    def report(
        self, *, requests: int, proxied: int, concurrency: int, client_processes_ms: float = 0.0
    ) -> dict[str, Any]:
        """``client_processes_ms``: what the client processes reported for their rounds."""
        end, start = self._read(), self.start
        end["client"] += client_processes_ms
        per_request: dict[str, float | None] = {}
        for name, n in (("client", requests), ("seam", requests), ("proxy", proxied)):
            a, b = start[name], end[name]
            per_request[name] = None if a is None or b is None or n == 0 else (b - a) / n
        busy = None
        if start["machine"] is not None and end["machine"] is not None:
            total = end["machine"][1] - start["machine"][1]
            busy = (end["machine"][0] - start["machine"][0]) / total if total else None
        cores = os.cpu_count() or 1
        proxy_ms = per_request["proxy"]
        return {
            "ms_per_request": per_request,  # client and seam: over both paths' requests
            "machine_busy_fraction": busy,
            "cores": cores,
            "queueing_estimate_ms": None if proxy_ms is None else concurrency * proxy_ms / cores,
        }


# ---------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout_s} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process we started, by its PID only."""
    stop_process(proc, grace_s=15)
