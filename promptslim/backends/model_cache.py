"""Where converted models live, how they are written, and the check that an optional backend
is installed.

Shared by the model loader (``models.py``), the ONNX encoder (``onnx_encoder.py``) and the
static vectors (``static_vectors.py``), which ``models.py`` builds: kept here so none imports
another back.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..errors import BackendUnavailable

__all__ = ["atomic_write", "cache_dir", "converted_path", "require"]


def cache_dir() -> Path:
    """Where converted models live: ``$PROMPTSLIM_CACHE`` or ``~/.cache/promptslim``."""
    return Path(os.environ.get("PROMPTSLIM_CACHE") or Path.home() / ".cache" / "promptslim")


def require(module: str, what: str, extra: str) -> None:
    """``BackendUnavailable`` naming ``extra`` unless ``module`` can be imported."""
    if importlib.util.find_spec(module) is None:
        raise BackendUnavailable(what, extra=extra)


def converted_path(kind: str, path: str, salt: str, suffix: str = "") -> Path:
    """Where the ``kind`` conversion of the model at ``path`` (a folder or a cached name)
    lives: ``cache_dir()/kind/<model>-<digest><suffix>``. The digest covers ``path``, ``salt``
    (what else the conversion depends on: library versions, settings) and the model folder's
    files (name, size, mtime, the ``onnx`` folder left out): a changed model is converted
    again, never served stale."""
    digest = hashlib.sha256(f"{path}\x1f{salt}".encode())
    folder = Path(path)
    if folder.is_dir():
        for f in sorted(folder.rglob("*")):
            if f.is_file() and "onnx" not in f.relative_to(folder).parts:
                st = f.stat()
                digest.update(
                    f"{f.relative_to(folder)}\x1f{st.st_size}\x1f{st.st_mtime_ns}".encode()
                )
    name = folder.name if folder.name not in ("", "model") else folder.parent.name or "model"
    return cache_dir() / kind / f"{name}-{digest.hexdigest()[:16]}{suffix}"


def atomic_write(target: Path, write: Callable[[str], None]) -> None:
    """``write(tmp_path)``, then the file renamed to ``target`` in one step: processes that
    start together never read half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=target.suffix, dir=target.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
