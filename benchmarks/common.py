"""Helpers every benchmark script shares: where the evaluation data is, the machine
description, the command line, output, and a llama.cpp server to measure against.

Statistics (percentiles, spreads, bootstrap intervals) come from :mod:`promptslim.stats`, the
one definition the library's own bench and load tools use. This module imports promptslim only
inside the helpers that need it: ``gpu_prefill.py`` runs on GPU machines where only torch and
transformers are installed."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from promptslim.loadsim.processes import stop_process

RESULTS = Path(__file__).resolve().parent / "results"
#: the sample of the evaluation data committed with the tests (tests/data/README.md)
SAMPLE_DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
#: names the folder holding the full evaluation files (nq20-dev.jsonl.gz, kv75-dev.jsonl.gz)
DATA_DIR_ENV = "PROMPTSLIM_DATA_DIR"


def data_dir() -> Path:
    """``$PROMPTSLIM_DATA_DIR`` when set, else the committed sample (the first rows of each file:
    enough for ``--quick``; figures worth recording need the full files)."""
    return Path(os.environ.get(DATA_DIR_ENV) or SAMPLE_DATA)


#: the data folder under its former name (bench_shapes.py reads it; prefer ``data_file``)
SHARED_DATA = data_dir()


def data_file(name: str) -> Path:
    """The evaluation file ``name`` in ``data_dir()``; on stderr, a note when it is the sample."""
    folder = data_dir()
    if folder == SAMPLE_DATA:
        print(
            f"{name}: the {SAMPLE_DATA.relative_to(SAMPLE_DATA.parent.parent)} sample; set "
            f"{DATA_DIR_ENV} or pass --dataset for the full file",
            file=sys.stderr,
        )
    return folder / name


def rows_from(spec: str, offset: int, n: int) -> tuple[list[Any], int]:
    """``n`` items of the dataset ``spec`` from row ``offset`` on (rows the defaults were not
    chosen on), and the offset used: 0 where the file is too short (the committed sample,
    under ``--quick`` without the data)."""
    from promptslim.bench.datasets import load_dataset

    items = load_dataset(spec, limit=offset + n).items
    if len(items) < offset + n:
        return items[:n], 0
    return items[offset:], offset


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def reference_loop_ms() -> float:
    """The time of a fixed pure-Python loop (string, dict and integer work), in ms: a gauge of
    how fast this machine runs Python right now. A shared VM's speed drifts by up to 2x for
    tens of seconds; a benchmark that samples this beside its timings shows which of them ran
    in a slow stretch."""
    start = time.perf_counter()
    table: dict[str, int] = {}
    for i in range(4000):
        key = f"k{i % 97}"
        table[key] = table.get(key, 0) + len(key) * i % 7
    return (time.perf_counter() - start) * 1e3


def with_vectors(request: Any, store: Any, query: str | None = None) -> Any:
    """The request as a production retriever hands it over: each document with the embedding
    its vector store indexed, and the embedding of the query it was searched with (``query``;
    by default the request's). Same model and truncation as the retrieval stage; computed
    here, outside the timed slimming."""
    from promptslim.stages.retrieval_scoring import scoring_text

    if not request.documents:
        return request
    searched = query if query is not None else request.effective_query
    vectors = store.embed([scoring_text(d) for d in request.documents] + [searched])
    return request.replace(
        documents=[
            d.model_copy(update={"embedding": v.tolist()})
            for d, v in zip(request.documents, vectors, strict=False)
        ],
        query_embedding=vectors[-1].tolist(),
    )


#: names another interpreter for llmlingua's rows (default: the repository's .venv-lingua)
LINGUA_PYTHON_ENV = "PROMPTSLIM_LINGUA_PYTHON"


def lingua_python() -> str | None:
    """The interpreter of the lingua environment, when there is one: llmlingua 0.2.2 runs only
    on transformers <= 4.47.1, so it lives in ``.venv-lingua`` (``scripts/setup_lingua.sh``) or
    the interpreter ``$PROMPTSLIM_LINGUA_PYTHON`` names."""
    named = os.environ.get(LINGUA_PYTHON_ENV)
    found = (
        Path(named) if named else Path(__file__).resolve().parent.parent / ".venv-lingua/bin/python"
    )
    return str(found) if found.exists() else None


def run_in_lingua(script: str, args: list[str]) -> dict[str, Any] | str:
    """``script`` (a benchmark's own path, run as its worker) with ``args`` in the lingua
    environment: the JSON object its last stdout line holds, or why there is none (no such
    environment, or the child's last error line)."""
    import subprocess

    from promptslim.backends.compress.lingua import llmlingua_unavailable

    python = lingua_python()
    if python is None:
        missing = llmlingua_unavailable() or "llmlingua"
        return f"needs {missing}: no lingua environment (bash scripts/setup_lingua.sh makes one)"
    done = subprocess.run([python, script, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"the lingua environment failed: {done.stderr.strip().splitlines()[-1:]}"
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="a run under two minutes")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--save", metavar="NAME", help="also write results/NAME.json")
    return p


def emit(result: dict[str, Any], args: argparse.Namespace, table: str) -> None:
    """Print the human table, save when asked, and the JSON object last when --json."""
    print(table)
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{args.save}.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result))


def write_json(result: dict[str, Any], path: Path | None) -> None:
    """Write ``result`` as indented JSON to ``path`` (its folder made), when a path is given."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def print_result(result: dict[str, Any], *, as_json: bool) -> None:
    """``--json``: one JSON object on one line (the last of stdout); otherwise indented."""
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


def logger(as_json: bool) -> Any:
    """``print`` for progress lines, or, under ``--json``, print to stderr: stdout's last line
    is then the JSON object alone."""
    if as_json:
        return lambda *a: print(*a, file=sys.stderr)
    return print


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server on SmolLM2 (the packaged GGUF), on a free
    127.0.0.1 port; its log goes to a temporary file (append mode, so reading it never moves the
    child's offset). Stopped by its PID only."""

    READY_TIMEOUT_S = 120.0

    def __init__(
        self, *extra_args: str, n_ctx: int | None = None, threads: int | None = None
    ) -> None:
        import socket
        import subprocess
        import tempfile
        import time
        import urllib.request

        from promptslim.backends.models import smollm2_gguf_path

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        self.cmd = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf_path()),
            "--host", "127.0.0.1", "--port", str(port),
            "--interrupt_requests", "False",  # the default cuts concurrent streams off
        ]  # fmt: skip
        if n_ctx:  # the default 2,048 is shorter than a 20-document prompt
            self.cmd += ["--n_ctx", str(n_ctx)]
        if threads:
            self.cmd += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
        self.cmd += list(extra_args)
        self._dir = tempfile.TemporaryDirectory(prefix="promptslim-llama-")
        self.log_path = Path(self._dir.name) / "server.log"
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"llama_cpp.server exited: {self.log_text()[-1500:]}")
            try:
                with urllib.request.urlopen(self.base + "/v1/models", timeout=2):
                    return
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise SystemExit(f"llama_cpp.server not ready after {self.READY_TIMEOUT_S:.0f} s")

    def log_text(self) -> str:
        return self.log_path.read_bytes().decode("utf-8", "replace")

    def stop(self) -> None:
        stop_process(self.proc)
        self._dir.cleanup()
