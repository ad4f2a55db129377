"""Where converted models live, and the check that an optional backend is installed.

Shared by the model loader (``models.py``) and the ONNX encoder (``onnx_encoder.py``), which
``models.py`` builds: kept here so neither imports the other back.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ..errors import BackendUnavailable

__all__ = ["cache_dir", "require"]


def cache_dir() -> Path:
    """Where converted models live: ``$PROMPTSLIM_CACHE`` or ``~/.cache/promptslim``."""
    return Path(os.environ.get("PROMPTSLIM_CACHE") or Path.home() / ".cache" / "promptslim")


def require(module: str, what: str, extra: str) -> None:
    """``BackendUnavailable`` naming ``extra`` unless ``module`` can be imported."""
    if importlib.util.find_spec(module) is None:
        raise BackendUnavailable(what, extra=extra)
