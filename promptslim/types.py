"""The public types in one namespace: messages and documents (``promptslim.messages``), the
request and its budget (``promptslim.request``), what a run reports (``promptslim.reports``).

Models are frozen: a stage that changes something builds a new object (``model_copy``), so
objects it did not touch keep their identity.
"""

from __future__ import annotations

from .messages import (
    HEADING_KEYS,
    PREFIX_ROLES,
    ContentPart,
    Document,
    FunctionCall,
    Message,
    Role,
    ToolCall,
)
from .reports import Change, Report, Result, StageReport, trusted
from .request import Budget, Request
from .validation import invalid_from_validation

__all__ = [
    "HEADING_KEYS",
    "PREFIX_ROLES",
    "Budget",
    "Change",
    "ContentPart",
    "Document",
    "FunctionCall",
    "Message",
    "Report",
    "Request",
    "Result",
    "Role",
    "StageReport",
    "ToolCall",
    "invalid_from_validation",
    "trusted",
]
