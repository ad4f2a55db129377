"""What every benchmark dataset is: items (a ``Request`` and its gold answers), a loader
interface, and the line-by-line reading of jsonl files that keeps going past a bad record."""

from __future__ import annotations

import gzip
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatasetError, InvalidRequest
from ..types import Request

__all__ = [
    "BenchItem",
    "DatasetLoader",
    "FileLoader",
    "LoadedDataset",
    "answers_of",
    "read_records",
    "require_str",
]


@dataclass(frozen=True)
class BenchItem:
    """One benchmark item: the request to slim and send, and the answers that count as right."""

    id: str
    request: Request
    answers: tuple[str, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class LoadedDataset:
    """The items of a dataset and the records that were skipped (each a DatasetError)."""

    name: str
    items: list[BenchItem]
    errors: list[DatasetError] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return len(self.errors)


class DatasetLoader(ABC):
    """Turns a source (a path, or a builtin generator's name) into BenchItems.

    ``load`` reads at most ``limit`` items; generators use ``seed``. Errors on single records
    go to ``on_error`` (the run goes on); an unreadable source raises ``DatasetError``.
    """

    kind: str

    def __init__(self, source: str) -> None:
        self.source = source

    @abstractmethod
    def items(
        self, *, seed: int, on_error: Callable[[DatasetError], None]
    ) -> Iterator[BenchItem]: ...

    def load(self, *, limit: int | None = None, seed: int = 0) -> LoadedDataset:
        errors: list[DatasetError] = []
        items: list[BenchItem] = []
        if limit is not None and limit <= 0:
            return LoadedDataset(f"{self.kind}:{self.source}", items, errors)
        for item in self.items(seed=seed, on_error=errors.append):
            items.append(item)
            if limit is not None and len(items) >= limit:
                break
        return LoadedDataset(f"{self.kind}:{self.source}", items, errors)


# ---------------------------------------------------------------- reading files


def _open_lines(path: Path) -> Any:
    # bytes, decoded line by line: a text-mode reader decodes ahead in chunks, so one bad
    # byte on line 3 used to fail the first readline and lose lines 1 and 2 (invariant 9)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")


def read_records(
    path: str | Path, on_error: Callable[[DatasetError], None]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each JSON-object line; blank lines are ignored, anything
    else unreadable goes to ``on_error`` and is skipped."""
    path = Path(path)
    try:
        handle = _open_lines(path)
    except OSError as exc:
        raise DatasetError(f"cannot open: {exc.strerror or exc}", path=str(path)) from exc
    with handle:
        lineno = 0
        while True:
            try:
                raw = handle.readline()
            except (OSError, EOFError) as exc:
                # a truncated .gz: nothing after it can be trusted
                on_error(DatasetError(f"unreadable: {exc}", path=str(path), line=lineno + 1))
                return
            if not raw:
                return
            lineno += 1
            try:
                # utf-8-sig on the first line: a BOM (Windows editors write one) is not content
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                on_error(DatasetError(f"not UTF-8 (byte {exc.start})", path=str(path), line=lineno))
                continue
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                on_error(DatasetError(f"invalid JSON: {exc.msg}", path=str(path), line=lineno))
                continue
            except RecursionError:
                on_error(
                    DatasetError("invalid JSON: nested too deeply", path=str(path), line=lineno)
                )
                continue
            if not isinstance(record, dict):
                on_error(
                    DatasetError(
                        f"expected a JSON object, got {type(record).__name__}",
                        path=str(path),
                        line=lineno,
                    )
                )
                continue
            yield lineno, record


def require_str(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise InvalidRequest(
            "is required" if value is None else f"expected a string, got {type(value).__name__}",
            field=key,
        )
    return value


def answers_of(value: Any, key: str = "answers") -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise InvalidRequest("expected a non-empty list of strings", field=key)
    return tuple(value)


class FileLoader(DatasetLoader):
    """A jsonl file, one record a line; subclasses turn a record into a BenchItem."""

    def items(self, *, seed: int, on_error: Callable[[DatasetError], None]) -> Iterator[BenchItem]:
        for lineno, record in read_records(self.source, on_error):
            try:
                item = self.parse(record, lineno)
            except InvalidRequest as exc:
                on_error(
                    DatasetError(exc.reason, path=self.source, line=lineno, field=exc.field)
                    if exc.field
                    else DatasetError(str(exc), path=self.source, line=lineno)
                )
                continue
            yield item

    @abstractmethod
    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem: ...

    def _id(self, record: Mapping[str, Any], lineno: int) -> str:
        for key in ("id", "_id"):
            if isinstance(record.get(key), (str, int)):
                return str(record[key])
        return f"{Path(self.source).name}:{lineno}"
