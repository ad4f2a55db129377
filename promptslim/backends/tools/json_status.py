"""The status-like fields of a JSON array's items: which key paths hold a status (``state``,
``status``, ``error``...) or a measurement, and the note a marker gives of the status values
its left-out items held."""

from __future__ import annotations

import json
from collections import Counter
from itertools import chain
from operator import itemgetter
from typing import Any

__all__ = ["Paths", "status_note"]

_STATUS_KEYS = frozenset([
    "state", "status", "error", "errors", "level", "severity", "conclusion", "result", "ok",
    "success", "failed", "failure", "code", "status_code", "exit_code", "exception", "outcome",
    "health",
])  # fmt: skip
_ERROR_KEYS = frozenset(["error", "errors", "exception", "failure", "traceback", "stack", "fault"])
# keys whose numbers are labels, not measurements: an id far from the median is no anomaly
_LABEL_SUFFIXES = ("id", "_id", "number", "_at", "_ts", "timestamp", "version", "sha", "hash")
_path = itemgetter(0)


class Paths:
    """The key paths of one array's items, each classified once (not once per leaf):
    ``status``, status-like paths (True for an error key); ``measured``, paths whose numbers
    are measurements; ``noted``, the top-level status paths a marker's note counts, by key."""

    __slots__ = ("measured", "noted", "status")

    def __init__(self, leaves: list[list[tuple[str, Any]]]) -> None:
        self.status: dict[str, bool] = {}
        self.measured: set[str] = set()
        self.noted: dict[str, str] = {}
        for p in set(map(_path, chain.from_iterable(leaves))):
            key = p.rsplit(".", 1)[-1].rstrip("[]")
            low = key.lower()
            if low in _STATUS_KEYS:
                self.status[p] = low in _ERROR_KEYS
                if p.count(".") == 1:
                    self.noted[p] = key
            if not p.lower().endswith(_LABEL_SUFFIXES):
                self.measured.add(p)


def status_note(leaves: list[list[tuple[str, Any]]], noted: dict[str, str]) -> str:
    """What the left-out items' status fields held: ``state: open 20, closed 4``."""
    values: dict[str, Counter[str]] = {}
    for lv in leaves:
        for p, v in lv:
            key = noted.get(p)
            if key is not None:
                values.setdefault(key, Counter())[_shown(v)] += 1
    parts = []
    for key in sorted(values)[:3]:
        common = values[key].most_common(3)
        parts.append(f"{key}: " + ", ".join(f"{v} {c}" for v, c in common))
    return "; ".join(parts)


def _shown(value: Any) -> str:
    """A status value as a marker's note shows it. One that is only whitespace, such as "\n",
    as its JSON string: ``marker`` puts a note on one line, which would leave nothing of it."""
    text = str(value)
    return text if text.strip() else json.dumps(text)
