"""What a run reports: one StageReport per stage, the Report over all of them, and the Result
that carries the slimmed request with its report."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .errors import ConfigError
from .messages import Document, Message
from .request import Request

__all__ = ["Change", "Report", "Result", "StageReport", "trusted"]


M = TypeVar("M", bound=BaseModel)
#: the field names of each class trusted() has checked it can build
_plain_models: dict[type[BaseModel], frozenset[str]] = {}


def trusted(cls: type[M], **fields: Any) -> M:
    """Our own report objects, every field given: what ``cls.model_construct(**fields)``
    builds, built by ordinary validation.

    Every stage builds a StageReport, a Report and a Result per run. pydantic's
    ``model_construct`` walks each field's aliases and defaults in Python (about 4 us an
    object here); validation runs in pydantic-core and, with model instances passed through
    as they are, costs about 2 us. Only for models without private attributes, extras or
    ``model_post_init``, and only with every field given, which it checks: then the two build
    equal objects (tests/test_types.py compares them).
    """
    names = _plain_models.get(cls)
    if names is None:
        if (
            cls.__private_attributes__
            or cls.model_post_init is not BaseModel.model_post_init
            or cls.model_config.get("extra") == "allow"
        ):
            raise TypeError(f"{cls.__name__}: trusted() is for plain models; use model_construct")
        names = _plain_models[cls] = frozenset(cls.model_fields)
    if fields.keys() != names:
        mismatched = sorted(names ^ fields.keys())
        raise TypeError(f"{cls.__name__}: trusted() needs every field and no other: {mismatched}")
    return cls(**fields)


class Change(BaseModel):
    """One thing a stage did to the input, and why."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["dropped", "moved", "summarised", "compressed", "reordered", "rewritten"]
    #: what it was done to: ``messages[3]``, ``document:<id>``, ``system[0]:120-146``
    target: str
    tokens: int = 0
    reason: str = ""
    score: float | None = None


class StageReport(BaseModel):
    """What one stage did: tokens in and out, time, changes, warnings, stage-specific numbers."""

    stage: str
    tokens_in: int
    tokens_out: int
    ms: float
    changes: list[Change] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)

    def of_kind(self, kind: str) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]


class Report(BaseModel):
    """The whole run: one StageReport per stage, totals, and the prefix-cache figures."""

    stages: list[StageReport] = Field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    ms: float = 0.0
    warnings: list[str] = Field(default_factory=list)
    #: SHA-256 of the stable prefix's canonical bytes, when the prefix stage ran
    prefix_fingerprint: str | None = None
    #: leading tokens a prefix cache can reuse across requests, when known
    cacheable_tokens: int | None = None
    #: the configured degradation taken when the budget was infeasible, if any
    degraded: str | None = None

    @property
    def ratio(self) -> float:
        """tokens out / tokens in (1.0 for an empty prompt)."""
        return self.tokens_out / self.tokens_in if self.tokens_in else 1.0

    def stage(self, name: str) -> StageReport:
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(name)


class Result(BaseModel):
    """The slimmed request and the report of how it was slimmed."""

    request: Request
    report: Report

    @property
    def messages(self) -> list[Message]:
        return self.request.messages

    @property
    def documents(self) -> list[Document]:
        return self.request.documents

    def to_openai(self, *, documents: Literal["message", "merge"] = "message") -> dict[str, Any]:
        """The body to send: kept documents rendered into a message just before the last user
        message (the last user message itself is untouched), every other field as it came.
        ``documents="merge"`` appends them to the message before it instead, for chat
        templates that require user and assistant turns to alternate (``insert_documents``)."""
        if documents not in ("message", "merge"):
            raise ConfigError("expected 'message' or 'merge'", field="documents")
        return self.request._body(render_documents=True, placement=documents)
