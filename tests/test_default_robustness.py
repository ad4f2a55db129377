"""The default pipelines on the invariant suite's generated requests (every role, tool rounds,
content parts, unicode, empty and huge fields, odd documents): the dense scorer, the ask read
question by question and the tools stage, which ``test_invariants`` leaves out for speed.
Whatever comes in, a request either goes out or fails with a typed error, the same way twice."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptslim.bench.runner import build_config
from promptslim.errors import InvalidRequest, PromptSlimError
from promptslim.types import Budget, Request
from tests.test_invariants import bodies

PIPELINES = {
    "full": build_config("full").pipeline,
    "tools": build_config("prefix+history+tools+retrieval+compress").pipeline,
}
BUDGETS = st.sampled_from(
    [Budget(), Budget(total=64), Budget(total=1500), Budget(documents=40), Budget(documents=300)]
)


def _outcome(name: str, request: Request, budget: Budget) -> str:
    try:
        return json.dumps(PIPELINES[name].run(request, budget).to_openai(), sort_keys=True)
    except PromptSlimError as exc:  # typed: anything else fails the test
        return type(exc).__name__


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(body=bodies(), budget=BUDGETS)
def test_the_default_pipelines_fail_only_with_typed_errors(
    body: dict[str, Any], budget: Budget
) -> None:
    try:
        request = Request.from_openai(body)
    except InvalidRequest:
        return
    for name in PIPELINES:
        assert _outcome(name, request, budget) == _outcome(name, request, budget)
