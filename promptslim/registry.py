"""Named plug-ins (stages, compressors, scorers, summarisers...) looked up by name.

Built-in entries are ``"module:attribute"`` strings imported on first use, so naming a stage
never imports a heavy dependency before it is needed. Users add their own with ``register``.
An unknown name raises ``UnknownName`` listing the names the registry knows.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar, overload

from .errors import UnknownName

__all__ = ["STAGES", "Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, builtins: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self._lazy: dict[str, str] = dict(builtins or {})
        self._loaded: dict[str, T] = {}
        self._lock = threading.Lock()

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...
    @overload
    def register(self, name: str, obj: T) -> T: ...

    def register(self, name: str, obj: T | None = None) -> T | Callable[[T], T]:
        """Register ``obj`` under ``name`` (usable as a decorator). Replaces an existing entry."""

        def add(value: T) -> T:
            with self._lock:
                self._loaded[name] = value
                self._lazy.pop(name, None)
            return value

        return add if obj is None else add(obj)

    def get(self, name: str, *, field: str | None = None) -> T:
        found = self._loaded.get(name)
        if found is not None:
            return found
        target = self._lazy.get(name)
        if target is None:
            raise UnknownName(self.kind, name, self.names(), field=field)
        module, _, attr = target.partition(":")
        value: T = getattr(importlib.import_module(module), attr)
        with self._lock:
            self._loaded[name] = value
        return value

    def names(self) -> list[str]:
        return sorted({*self._lazy, *self._loaded})

    def __contains__(self, name: object) -> bool:
        return name in self._lazy or name in self._loaded

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


#: Stage classes by name; ``Pipeline.from_config`` builds stages from it.
STAGES: Registry[type] = Registry(
    "stage",
    {
        "passthrough": "promptslim.stages.base:PassThrough",
        "prefix": "promptslim.stages.prefix:PrefixStage",
        "history": "promptslim.stages.history:HistoryStage",
        "retrieval": "promptslim.stages.retrieval:RetrievalStage",
        "compress": "promptslim.stages.compress:CompressStage",
        "tools": "promptslim.stages.tools:ToolsStage",
    },
)
