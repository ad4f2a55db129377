"""Agent traces built from tool output that no one here wrote, for the tools benchmarks.

Sources (``TraceSources``), all real: recorded GitHub API responses (PyGithub's
``tests/ReplayData``, read from a local copy; it is LGPL and never shipped here), command
logs (pip's own verbose output, pytest ``-v`` output) and source files of installed packages.

A trace is one task: a system prompt, a user message that asks one question, then 5-30 tool
calls and their results (``github_api``, ``run``, ``read_file``), one of which holds the
answer, a single value (``needle``). Each turn of the agent loop is a request that ends with
the newest tool result, so a trace of n calls is n requests that share their prefix, as an
agent's requests do. ``trace_requests`` gives them; the ``BenchItem`` is the last one.

::

    sources = TraceSources.from_paths(replay_dir=..., logs=[...], source_files=[...])
    items = build_traces(sources, n=50, seed=0, calls=(5, 30))
    for request in trace_requests(items[0]): ...
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatasetError
from ..types import Request
from .datasets import BenchItem, DatasetLoader, LoadedDataset

__all__ = [
    "ApiResponse",
    "ToolTracesLoader",
    "TraceSources",
    "build_traces",
    "read_replay_data",
    "trace_requests",
]

SYSTEM = (
    "You are a software agent. Use the tools to find what the task asks, then answer with the "
    "value alone. Tools: github_api(method, path), run(command), read_file(path)."
)
_ID_FIELDS = ("number", "login", "name", "sha", "title", "id", "node_id", "tag_name")
_ANSWER_FIELDS = (
    "created_at", "updated_at", "state", "title", "login", "sha", "body", "name", "id",
    "html_url", "email", "color", "description", "size", "language", "comments", "ref",
    "label", "type", "message", "closed_at", "merged_at", "position", "path", "filename",
)  # fmt: skip


@dataclass(frozen=True)
class ApiResponse:
    """One recorded API response: the request's method and path, the status, the JSON body."""

    method: str
    path: str
    status: int
    body: str


def read_replay_data(root: Path, *, limit: int | None = None) -> list[ApiResponse]:
    """The JSON responses in a PyGithub ``tests/ReplayData`` folder (each record: scheme,
    method, host, port, path, headers, request body, status, response headers, body)."""
    out: list[ApiResponse] = []
    for path in sorted(root.glob("*.txt")):
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        for start in range(0, len(lines) - 9, 11):
            record = lines[start : start + 10]
            if record[0] not in ("http", "https") or not record[7].isdigit():
                break
            body = record[9]
            if body[:1] in ("{", "[") and len(body) >= 200:
                out.append(ApiResponse(record[1], record[4], int(record[7]), body))
        if limit is not None and len(out) >= limit:
            break
    return out


@dataclass
class TraceSources:
    """The real tool output traces are built from (each list may be empty, not all)."""

    responses: list[ApiResponse] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)  # (command, text)
    files: list[tuple[str, str]] = field(default_factory=list)  # (path, text)

    @classmethod
    def from_paths(
        cls,
        *,
        replay_dir: Path | None = None,
        logs: Sequence[tuple[str, Path]] = (),
        source_files: Sequence[Path] = (),
    ) -> TraceSources:
        responses = read_replay_data(replay_dir) if replay_dir is not None else []
        log_texts = [(cmd, p.read_text(errors="replace")) for cmd, p in logs if p.is_file()]
        files = [(str(p), p.read_text(errors="replace")) for p in source_files if p.is_file()]
        if not (responses or log_texts or files):
            raise DatasetError("no tool output found for traces", path=str(replay_dir))
        return cls(responses, log_texts, files)


# ---------------------------------------------------------------- needles


@dataclass(frozen=True)
class _Needle:
    kind: str
    call: tuple[str, dict[str, Any]]
    result: str
    question: str
    answer: str


def _json_needle(rng: random.Random, r: ApiResponse) -> _Needle | None:
    data = json.loads(r.body)
    call = ("github_api", {"method": r.method, "path": r.path})
    if isinstance(data, list) and len(data) >= 3 and all(isinstance(x, dict) for x in data):
        k = rng.randrange(len(data))
        item = data[k]
        for idf in _ID_FIELDS:
            ident = item.get(idf)
            if _good_ident(ident) and sum(1 for x in data if x.get(idf) == ident) == 1:
                break
        else:
            return None
        fields = [f for f in _ANSWER_FIELDS if f != idf and _good_value(item.get(f))]
        if not fields:
            return None
        f = rng.choice(fields)
        q = f"In the GitHub API's {r.path} list, what is the {f} of the item whose {idf} is {ident}?"
        return _Needle("json", call, r.body, q, str(item[f]))
    if isinstance(data, dict):
        fields = [f for f in _ANSWER_FIELDS if _good_value(data.get(f))]
        if not fields:
            return None
        f = rng.choice(fields)
        q = f"What is the {f} in the GitHub API's response for {r.path}?"
        return _Needle("json", call, r.body, q, str(data[f]))
    return None


def _good_ident(v: Any) -> bool:
    return isinstance(v, (str, int)) and not isinstance(v, bool) and 2 < len(str(v)) < 80


def _good_value(v: Any) -> bool:
    if isinstance(v, bool) or v is None:
        return False
    return isinstance(v, (str, int)) and 3 <= len(str(v)) <= 60 and "\n" not in str(v)


_DOWNLOAD = re.compile(
    r"(?:Downloading|Collecting|Using cached) ([A-Za-z][\w.-]*?)-(\d[\w.]*?)(?:-py|\.tar|-cp|\.whl|\.zip)"
)
_PYTEST = re.compile(r"^(\S+::(\w+)) (PASSED|FAILED|SKIPPED|ERROR)\s+\[\s*(\d+%)\]", re.MULTILINE)


#: a proxy's JSON line per request (``promptslim serve``): its id and the tokens it came with
_REQUEST_LINE = re.compile(
    r'^\{"event": "request".*?"id": "([^"]+)".*?"tokens_in": (\d{3,})', re.MULTILINE
)


def _request_needle(rng: random.Random, command: str, text: str, lines: int) -> _Needle | None:
    """A request of a proxy's JSON-lines log and the prompt tokens it came with (three digits
    or more, and no other line of the window with that count: a short number recurs by
    chance)."""
    found = [(m.group(1), m.group(2), m.start()) for m in _REQUEST_LINE.finditer(text)]
    if not found:
        return None
    rid, tokens, at = rng.choice(found)
    window = _window(rng, text, at, lines)
    if window.count(f'"tokens_in": {tokens},') != 1:
        return None
    q = f"In the output of `{command}`, how many prompt tokens did request {rid} come with?"
    return _Needle("log", ("run", {"command": command}), window, q, tokens)


def _log_needle(rng: random.Random, command: str, text: str, lines: int = 400) -> _Needle | None:
    if _REQUEST_LINE.search(text):
        return _request_needle(rng, command, text, lines)
    found = [(m.group(1), m.group(2), m.start()) for m in _DOWNLOAD.finditer(text)]
    tests = [(m.group(2), m.group(4), m.start()) for m in _PYTEST.finditer(text)]
    if tests and (not found or rng.random() < 0.5):
        name, pct, at = rng.choice(tests)
        q = f"In the output of `{command}`, what progress percentage did pytest print on the line of {name}?"
        return _Needle("log", ("run", {"command": command}), _window(rng, text, at, lines), q, pct)
    if not found:
        return None
    pkg, version, at = rng.choice(found)
    if sum(1 for p, _, _ in found if p == pkg) > 1:
        return None
    q = f"In the output of `{command}`, which version of {pkg} was downloaded?"
    window = _window(rng, text, at, lines)
    return _Needle("log", ("run", {"command": command}), window, q, version)


_DEFAULT_ARG = re.compile(
    r"^\s*def (\w+)\((?=[^)\n]*\b(\w+)\s*(?::\s*[\w\[\]., |]+)?=\s*([\w.\"'-]{1,30})[,)])",
    re.MULTILINE,
)


def _code_needle(rng: random.Random, path: str, text: str) -> _Needle | None:
    found = [m for m in _DEFAULT_ARG.finditer(text) if not m.group(2).startswith("_")]
    if not found:
        return None
    m = rng.choice(found)
    func, param, default = m.group(1), m.group(2), m.group(3)
    if sum(1 for x in found if x.group(1) == func) > 1:
        return None
    q = f"In {path}, what is the default value of the {param} parameter of {func}?"
    return _Needle("code", ("read_file", {"path": path}), text, q, default)


def _window(rng: random.Random, text: str, at: int, lines: int = 400) -> str:
    """About ``lines`` lines of ``text`` around offset ``at`` (the needle's line inside)."""
    all_lines = text.split("\n")
    row = text.count("\n", 0, at)
    start = max(0, row - rng.randrange(lines))
    return "\n".join(all_lines[start : start + lines])


# ---------------------------------------------------------------- traces


def _distractor(
    rng: random.Random, sources: TraceSources, lines: int = 400
) -> tuple[str, dict[str, Any], str]:
    pools = [p for p in ("json", "log", "code") if getattr(sources, _POOL[p])]
    kind = rng.choice(pools)
    if kind == "json":
        r = rng.choice(sources.responses)
        return "github_api", {"method": r.method, "path": r.path}, r.body
    if kind == "log":
        cmd, text = rng.choice(sources.logs)
        return "run", {"command": cmd}, _window(rng, text, rng.randrange(max(1, len(text))), lines)
    path, text = rng.choice(sources.files)
    return "read_file", {"path": path}, text


_POOL = {"json": "responses", "log": "logs", "code": "files"}


def _needle(
    rng: random.Random, sources: TraceSources, kind: str, lines: int = 400
) -> _Needle | None:
    if kind == "log":
        return _any_log_needle(rng, sources, lines)
    for _ in range(50):
        if kind == "json" and sources.responses:
            found = _json_needle(rng, rng.choice(sources.responses))
        elif kind == "code" and sources.files:
            found = _code_needle(rng, *rng.choice(sources.files))
        else:
            return None
        if found is not None and found.answer in found.result:
            return found
    return None


def _any_log_needle(rng: random.Random, sources: TraceSources, lines: int) -> _Needle | None:
    """A needle from a log drawn at random, each log as likely as another that has needles
    (one whose needles are rare is tried again, not passed over for an easier one)."""
    for command, text in rng.sample(sources.logs, len(sources.logs)):
        for _ in range(20):
            found = _log_needle(rng, command, text, lines)
            if found is not None and found.answer in found.result:
                return found
    return None


def build_traces(
    sources: TraceSources,
    *,
    n: int,
    seed: int = 0,
    calls: tuple[int, int] = (5, 30),
    kinds: Sequence[str] = ("json", "json", "log", "code"),
    max_result_chars: int = 60_000,
    log_lines: int = 400,
) -> list[BenchItem]:
    """``n`` traces; the needle's kind cycles through ``kinds``; each has ``calls`` tool calls
    (a random count in the range), the needle's result at a random position. A log result is
    a window of ``log_lines`` lines of its log."""
    rng = random.Random(seed)
    items: list[BenchItem] = []
    attempts = 0
    while len(items) < n and attempts < 20 * n:
        attempts += 1
        kind = kinds[len(items) % len(kinds)]
        needle = _needle(rng, sources, kind, log_lines)
        if needle is None or len(needle.result) > max_result_chars:
            continue
        count = rng.randint(*calls)
        at = rng.randrange(count)
        steps: list[tuple[str, dict[str, Any], str]] = []
        tries = 0
        while len(steps) < count and tries < 50 * count:  # bounded: sources may all be long
            tries += 1
            if len(steps) == at:
                step = needle.call + (needle.result,)
            else:
                step = _distractor(rng, sources, log_lines)
            if len(step[2]) <= max_result_chars:
                steps.append(step)
        if len(steps) == count:
            items.append(_item(len(items), needle, steps, at))
    return items


def _item(
    index: int, needle: _Needle, steps: list[tuple[str, dict[str, Any], str]], at: int
) -> BenchItem:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Task: {needle.question}"},
    ]
    for k, (name, args, result) in enumerate(steps):
        call_id = f"call_{index}_{k}"
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    request = Request.from_openai({"messages": messages})
    meta = {"kind": needle.kind, "calls": len(steps), "needle_message": 3 + 2 * at}
    return BenchItem(f"trace-{index}", request, (needle.answer,), meta)


def trace_requests(item: BenchItem) -> list[Request]:
    """The trace's requests, one per turn: each ends with the newest tool result."""
    messages = item.request.messages
    ends = [i + 1 for i, m in enumerate(messages) if m.role == "tool"]
    return [item.request.replace(messages=messages[:end]) for end in ends]


# ---------------------------------------------------------------- as a dataset


class ToolTracesLoader(DatasetLoader):
    """``tools:REPLAY_DIR``: traces from a PyGithub ``tests/ReplayData`` folder, the logs in
    ``~/.cache/promptslim/logs`` (``*.log``, when there are any) and the standard library's
    ``json``, ``email``, ``http`` and ``logging`` sources. ``limit`` traces (default 200)."""

    kind = "tools"

    def _sources(self) -> TraceSources:
        root = Path(self.source).expanduser()
        if not root.is_dir():
            raise DatasetError("not a folder of recorded API responses", path=self.source)
        logs_dir = Path.home() / ".cache" / "promptslim" / "logs"
        logs = (
            [(f"cat {p.name}", p) for p in sorted(logs_dir.glob("*.log"))]
            if logs_dir.is_dir()
            else []
        )
        stdlib = Path(json.__file__).parent.parent
        files = [
            p
            for pkg in ("json", "email", "http", "logging")
            for p in sorted((stdlib / pkg).glob("*.py"))
            if 2_000 <= p.stat().st_size <= 40_000
        ]
        return TraceSources.from_paths(replay_dir=root, logs=logs, source_files=files)

    def items(self, *, seed: int, on_error: Callable[[DatasetError], None]) -> Iterator[BenchItem]:
        yield from build_traces(self._sources(), n=200, seed=seed)

    def load(self, *, limit: int | None = None, seed: int = 0) -> LoadedDataset:
        n = 200 if limit is None else max(0, limit)
        items = build_traces(self._sources(), n=n, seed=seed) if n else []
        return LoadedDataset(f"{self.kind}:{self.source}", items, [])
