"""Reading and writing files for the command line, each failure an error naming the file or
the flag (exit status 2), never a traceback."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import DatasetError, InvalidRequest

__all__ = [
    "check_output_file",
    "check_output_folder",
    "read_bodies",
    "read_json",
    "read_text",
    "write_text",
    "writing",
]


def read_text(path: str) -> str:
    """Text of ``path`` (``-`` is stdin), as an InvalidRequest naming the file when unreadable."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"cannot read: {exc.strerror}", field=path) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"not UTF-8 text (byte {exc.start})", field=path) from exc


def read_json(path: str) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", field=path
        ) from exc
    except RecursionError as exc:
        raise InvalidRequest("invalid JSON: nested too deeply", field=path) from exc
    except ValueError as exc:  # a number JSON allows but Python cannot hold (5,000 digits)
        raise InvalidRequest(f"invalid JSON: {exc}", field=path) from exc


@contextmanager
def writing(path: str | Path, *, flag: str) -> Iterator[None]:
    """Map an unwritable output (a folder, a missing parent folder...) to a one-line error
    naming ``flag`` and ``path``."""
    try:
        yield
    except OSError as exc:
        raise InvalidRequest(f"cannot write {path}: {exc.strerror or exc}", field=flag) from exc


def check_output_file(path: str, *, flag: str) -> None:
    """Fail before the work, not after it, when ``path`` cannot be a new or replaced file."""
    target = Path(path)
    if target.is_dir():
        raise InvalidRequest(f"{path} is a folder; expected a file name", field=flag)
    if not target.parent.is_dir():
        raise InvalidRequest(f"folder {target.parent} does not exist", field=flag)


def check_output_folder(path: str, *, flag: str) -> None:
    """Fail before the work when ``path`` cannot become a folder (it, or the nearest part of
    it that exists, is a file); the command creates it when it writes."""
    target = Path(path).absolute()
    if target.exists() and not target.is_dir():
        raise InvalidRequest(f"{path} exists and is not a folder", field=flag)
    existing = next((p for p in target.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise InvalidRequest(f"{existing} is not a folder", field=flag)


def write_text(path: str, text: str, *, flag: str = "-o") -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with writing(path, flag=flag):
            Path(path).write_text(text, encoding="utf-8")


def _parse_json(text: str, *, path: str, line: int) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = exc.lineno + line - 1
        message = f"invalid JSON at column {exc.colno}: {exc.msg}"
        raise DatasetError(message, path=path, line=where) from exc
    except RecursionError as exc:
        raise DatasetError("invalid JSON: nested too deeply", path=path, line=line) from exc
    except ValueError as exc:  # a number JSON allows but Python cannot hold
        raise DatasetError(f"invalid JSON: {exc}", path=path, line=line) from exc


def read_bodies(path: str) -> list[tuple[int, Any]]:
    """A file's request bodies with their line numbers: one JSON object, a JSON list of them,
    or JSON Lines."""
    text = read_text(path)
    whole, whole_error = None, None
    try:
        whole = _parse_json(text, path=path, line=1)
    except DatasetError as exc:
        whole_error = exc
    if isinstance(whole, dict):
        return [(1, whole)]
    if isinstance(whole, list):
        return [(i + 1, b) for i, b in enumerate(whole)]
    # JSONL: records end at "\n" only; U+2028, U+2029 and U+0085 may stand raw in a JSON
    # string, and str.splitlines() would split the record there
    out = []
    for n, line in enumerate((x.removesuffix("\r") for x in text.split("\n")), 1):
        if line.strip():
            try:
                out.append((n, _parse_json(line, path=path, line=n)))
            except DatasetError:
                if not out and whole_error is not None:
                    # the first record is not JSON on its own line: one (pretty-printed)
                    # document, whose parser knows where the error is
                    raise whole_error from None
                raise
    return out


