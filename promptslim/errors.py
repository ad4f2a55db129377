"""One exception tree for everything promptslim raises.

Callers catch one family; errors from dependencies are mapped into it with ``raise ... from exc``::

    PromptSlimError
    ├── InvalidRequest        bad input; ``field`` names where (``messages[2].role``)
    │   ├── ConfigError       bad configuration; ``field`` names the key (``stages[1].rate``)
    │   │   └── UnknownName   a registry lookup failed; ``known`` lists the names it has
    │   └── DatasetError      an unreadable dataset line; ``path`` and ``line`` say where
    ├── BudgetInfeasible      the budget cannot be met; ``minimum`` is what it would take
    ├── BackendUnavailable    an optional dependency is missing; ``extra`` names what to install
    ├── BackendError          a backend (model, server, index) failed while running
    │   └── StageTimeout      a stage exceeded its time limit
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "BackendError",
    "BackendUnavailable",
    "BudgetInfeasible",
    "ConfigError",
    "DatasetError",
    "InvalidRequest",
    "PromptSlimError",
    "StageTimeout",
    "UnknownName",
]


class PromptSlimError(Exception):
    """Base class of every error promptslim raises."""


class InvalidRequest(PromptSlimError, ValueError):
    """The input is malformed. ``field`` is a dotted path to the offending value."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        self.reason = message
        super().__init__(f"{field}: {message}" if field else message)


class ConfigError(InvalidRequest):
    """A configuration value is wrong. ``field`` names the key."""


class UnknownName(ConfigError, KeyError):
    """A name is not in a registry; the message lists the names that are."""

    def __init__(self, kind: str, name: str, known: Iterable[str], *, field: str | None = None):
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        super().__init__(
            f"unknown {kind} {name!r}; known: {', '.join(self.known) or '(none)'}", field=field
        )

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return self.args[0] if self.args else ""


class DatasetError(InvalidRequest):
    """A dataset record cannot be read. ``path`` and ``line`` (1-based) say which."""

    def __init__(
        self, message: str, *, path: str, line: int | None = None, field: str | None = None
    ) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}", field=field)
        self.field = field


class BudgetInfeasible(PromptSlimError):
    """The budget is smaller than what must be kept. ``minimum``: no smaller total can fit. A
    lower bound, as far as the raising stage can see: a later stage may still need more (the
    retrieval stage keeps at least one document unless told otherwise), so a retry at
    ``minimum`` can fail again with a larger one."""

    def __init__(self, message: str, *, minimum: int, budget: int | None = None) -> None:
        self.minimum = minimum
        self.budget = budget
        said = f"minimum {minimum} tokens" + ("" if budget is None else f", budget {budget}")
        super().__init__(f"{message} ({said})")


class BackendUnavailable(PromptSlimError, ImportError):
    """An optional dependency is not installed. ``extra`` is the promptslim extra that has it;
    ``install``, when given, is the exact command instead (for what no extra installs)."""

    def __init__(self, what: str, *, extra: str, install: str | None = None) -> None:
        self.what = what
        self.extra = extra
        self.install = install or f"pip install 'promptslim[{extra}]'"
        # "starlette, uvicorn and httpx are", "jieba (Chinese word segmentation) is"
        names = what.split(" (", 1)[0]
        verb = "are" if " and " in names or ", " in names else "is"
        super().__init__(f"{what} {verb} not installed: {self.install}")


class BackendError(PromptSlimError):
    """A backend (model, server, index) failed while running. ``backend`` names it."""

    def __init__(self, message: str, *, backend: str) -> None:
        self.backend = backend
        super().__init__(f"{backend}: {message}")


class StageTimeout(BackendError):
    """A stage or backend ran past its time limit."""

    def __init__(self, backend: str, *, limit_ms: float) -> None:
        self.limit_ms = limit_ms
        super().__init__(f"exceeded its time limit of {limit_ms:g} ms", backend=backend)
