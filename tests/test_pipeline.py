import asyncio
import json

import pytest

from promptslim import (
    STAGES,
    BaseStage,
    Budget,
    BudgetInfeasible,
    ConfigError,
    HistoryStage,
    PassThrough,
    Pipeline,
    PromptSlimError,
    Request,
    Result,
    Stage,
    StageLog,
    UnknownName,
)

from .conftest import chat_body


class DropOldest(BaseStage):
    """A test seam: drops the first history message and records it."""

    name = "drop_oldest"

    def __init__(self, *, count: int = 1) -> None:
        if count < 0:
            raise ConfigError("must be >= 0", field="count")
        self.count = count

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        start = request.prefix_end()
        for i in range(start, start + self.count):
            log.change("dropped", f"messages[{i}]", reason="oldest")
        kept = request.messages[:start] + request.messages[start + self.count :]
        return request.replace(messages=kept)


class RewritePrefix(BaseStage):
    name = "rewrite_prefix"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        first = request.messages[0].with_text("changed")
        return request.replace(messages=[first, *request.messages[1:]])


STAGES.register("drop_oldest", DropOldest)


def test_pipeline_is_a_stage_and_nests() -> None:
    inner = Pipeline([DropOldest(count=1)])
    outer = Pipeline([PassThrough(), inner, DropOldest(count=1)])
    assert isinstance(outer, Stage)
    result = outer.run(Request.from_openai(chat_body(3)))
    assert [s.stage for s in result.report.stages] == ["passthrough", "drop_oldest", "drop_oldest"]
    assert len(result.messages) == len(chat_body(3)["messages"]) - 2
    assert result.report.tokens_out < result.report.tokens_in
    assert all(s.ms >= 0 for s in result.report.stages)
    assert result.report.stages[1].of_kind("dropped")[0].reason == "oldest"


def test_from_config_dict_json_toml_yaml(tmp_path) -> None:
    config = {"budget": {"total": 500}, "stages": [{"name": "drop_oldest", "count": 2}]}
    (tmp_path / "c.json").write_text(json.dumps(config))
    (tmp_path / "c.toml").write_text('[budget]\ntotal = 500\n[[stages]]\nname = "drop_oldest"\ncount = 2\n')
    (tmp_path / "c.yaml").write_text("budget: {total: 500}\nstages:\n  - name: drop_oldest\n    count: 2\n")
    built = [Pipeline.from_config(config)] + [
        Pipeline.from_config(tmp_path / f"c.{ext}") for ext in ("json", "toml", "yaml")
    ]
    for p in built:
        assert p.budget == Budget(total=500)
        assert p.stages == [DropOldest(count=2)]
    assert Pipeline.from_config(built[0].to_config()).stages == built[0].stages


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"stages": [{"name": "nope"}]}, "stages[0].name"),
        ({"stages": [{"name": "drop_oldest", "cuont": 2}]}, "stages[0].cuont"),
        ({"stages": [{"name": "drop_oldest", "count": -1}]}, "stages[0].count"),
        ({"stages": [{"count": 1}]}, "stages[0].name"),
        ({"budget": {"total": 0}}, "budget.total"),
        ({"budget": {"totl": 10}}, "budget.totl"),
        ({"stagez": []}, "stagez"),
    ],
)
def test_config_errors_name_the_key(config: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config(config)
    assert info.value.field == field


def test_unknown_stage_lists_known_names() -> None:
    with pytest.raises(UnknownName) as info:
        Pipeline.from_config({"stages": [{"name": "nope"}]})
    assert "passthrough" in str(info.value) and "drop_oldest" in info.value.known


def test_unreadable_config_file(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError):
        Pipeline.from_config(bad)
    with pytest.raises(ConfigError):
        Pipeline.from_config(tmp_path / "missing.json")


def test_over_budget_raises_or_degrades_as_configured() -> None:
    request = Request.from_openai(chat_body(3))
    with pytest.raises(BudgetInfeasible) as info:
        Pipeline([PassThrough()], budget=Budget(total=20)).run(request)
    assert info.value.minimum > 20
    result = Pipeline([PassThrough()], budget=Budget(total=20), on_infeasible="best_effort").run(request)
    assert result.report.degraded and "over budget" in result.report.degraded
    assert result.report.tokens_out == result.report.tokens_in  # nothing silently cut


def test_best_effort_sends_a_request_whose_fixed_part_is_over_as_small_as_the_stages_make_it() -> None:
    long_question = "and the final question, " + "with many more words " * 20 + "?"
    body = chat_body(12)
    body["messages"][-1]["content"] = long_question
    request = Request.from_openai(body)
    stages = [HistoryStage(strategy="last")]
    with pytest.raises(BudgetInfeasible) as info:  # the system prompt and question alone are over
        Pipeline(stages, budget=Budget(total=40)).run(request)
    minimum = info.value.minimum
    assert minimum > 40
    result = Pipeline(stages, budget=Budget(total=40), on_infeasible="best_effort").run(request)
    # refused under "raise", sent under best_effort: the history cut as it is at the minimum
    at_minimum = Pipeline(stages, budget=Budget(total=minimum)).run(request)
    assert result.request == at_minimum.request
    assert result.report.tokens_out == at_minimum.report.tokens_out < result.report.tokens_in
    assert result.report.degraded and "over budget" in result.report.degraded
    assert result.request.messages[-1].content == long_question  # invariant 1 still holds


def test_a_stage_changing_the_frozen_prefix_is_caught() -> None:
    request = Request.from_openai(chat_body(2)).replace(frozen_prefix=1)
    with pytest.raises(PromptSlimError, match="rewrite_prefix"):
        Pipeline([RewritePrefix()]).run(request)
    # without a frozen prefix the same stage is allowed
    Pipeline([RewritePrefix()]).run(Request.from_openai(chat_body(2)))


def test_deterministic_and_async_matches_sync() -> None:
    pipeline = Pipeline([DropOldest(count=1), PassThrough()])
    body = chat_body(4)
    a = json.dumps(pipeline.run(Request.from_openai(body)).to_openai())
    b = json.dumps(pipeline.run(Request.from_openai(body)).to_openai())
    c = json.dumps(asyncio.run(pipeline.arun(Request.from_openai(body))).to_openai())
    assert a == b == c


def test_input_warnings_reach_the_report() -> None:
    body = {**chat_body(1), "documents": [{"id": "x", "text": None}]}
    result = Pipeline([PassThrough()]).run(Request.from_openai(body))
    assert any("documents[0].text" in w for w in result.report.warnings)


class AppendInPlace(BaseStage):
    """A misbehaving stage: edits the (frozen) request's message list in place."""

    name = "append_in_place"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        request.messages.append(request.messages[-1].with_text("appended in place, twice as long"))
        return request


def test_stage_counts_chain_and_follow_in_place_edits() -> None:
    from promptslim import count_request

    body = {**chat_body(3), "documents": ["alpha beta", "gamma delta"]}
    result = Pipeline([PassThrough(), PassThrough(), AppendInPlace(), PassThrough()]).run(
        Request.from_openai(body)
    )
    stages = result.report.stages
    before = count_request(Request.from_openai(body))
    sent = {**body, "messages": [m.to_openai() for m in result.messages]}
    after = count_request(Request.from_openai(sent))
    assert after > before
    assert [(s.tokens_in, s.tokens_out) for s in stages[:2]] == [(before, before)] * 2
    # the request object is the same, its list is not: no stage may reuse the old total
    assert (stages[2].tokens_in, stages[2].tokens_out) == (before, after)
    assert stages[3].tokens_in == stages[3].tokens_out == after
    assert (result.report.tokens_in, result.report.tokens_out) == (before, after)


def test_spans_only_when_a_tracer_provider_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = pytest.importorskip("opentelemetry.trace")
    from promptslim import tracing

    monkeypatch.setattr(tracing, "_otel", None)  # look it up again
    assert tracing.tracer() is None  # proxy tracer, no provider: spans go nowhere

    class Provider(trace.NoOpTracerProvider):  # stands in for the SDK's provider
        pass

    monkeypatch.setattr(trace, "get_tracer_provider", Provider)
    assert tracing.tracer() is tracing._otel
    assert isinstance(tracing._otel, trace.ProxyTracer)


class _Seen(BaseStage):
    """A test seam: records what it was given."""

    name = "seen"

    def __init__(self) -> None:
        self.requests: list[tuple[Request, Budget]] = []

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        self.requests.append((request, budget))
        return request


class _Broken(BaseStage):
    name = "broken"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        raise RuntimeError("a bug in a custom stage")


def test_warm_up_gives_every_stage_work_and_loads_what_stages_load() -> None:
    from promptslim import text
    from promptslim.stages.retrieval import RetrievalStage
    from promptslim.tokens import count_documents, count_messages

    seen, later = _Seen(), _Seen()
    pipeline = Pipeline([seen, _Broken(), RetrievalStage(scorer="bm25"), later])
    seconds = pipeline.warm_up()  # the broken stage does not stop the ones after it
    assert seconds > 0 and len(seen.requests) == len(later.requests) == 1
    request, budget = seen.requests[0]
    # each stage sees the whole sample, with more history and documents than the budget allows
    assert budget.history is not None and budget.documents is not None
    start, end = request.prefix_end(), len(request.messages) - 1
    assert count_messages(request.messages[start:end]) > budget.history
    assert count_documents(request.documents) > budget.documents
    assert any("年度" in d.text for d in request.documents)  # Chinese: the segmenter loads
    assert later.requests[0][0] == request
    assert "tokenizer" in text._jieba_state  # jieba's dictionary is loaded (the zh extra is installed)


@pytest.mark.parametrize(
    ("text", "says"),
    [("budget: [\nstages: []\n", "expected ',' or ']'"), ("---\na: 1\n---\nb: 2\n", "single document")],
)
def test_an_unreadable_yaml_config_is_one_line_with_its_place(tmp_path, text: str, says: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        Pipeline.from_config(path)
    assert "\n" not in str(err.value) and says in str(err.value) and "line 3" in str(err.value)


@pytest.mark.parametrize(
    ("stage", "key"),
    [("retrieval", "max_k"), ("retrieval", "min_k"), ("retrieval", "dense_weight")],
)
def test_a_mistyped_stage_option_is_named(stage: str, key: str) -> None:
    # before: "stages[0]: '<' not supported between instances of 'str' and 'int'"
    with pytest.raises(ConfigError) as err:
        Pipeline.from_config({"stages": [{"name": stage, key: "abc"}]})
    assert err.value.field == f"stages[0].{key}" and "'abc'" in err.value.reason


def test_a_segment_cap_no_stage_enforces_is_a_warning() -> None:
    from promptslim import PrefixStage

    body = {"messages": [{"role": "user", "content": "q"}], "documents": ["word " * 150]}
    out = Pipeline([PrefixStage()], budget=Budget(documents=50)).run(Request.from_openai(body))
    assert any("over budget.documents (50)" in w for w in out.report.warnings)
    # within its cap: no warning
    out = Pipeline([PrefixStage()], budget=Budget(documents=500)).run(Request.from_openai(body))
    assert not any("budget.documents" in w for w in out.report.warnings)


@pytest.mark.parametrize(
    ("stage", "key", "value"),
    [("history", "pin_first_user", "no"), ("retrieval", "max_k", True), ("prefix", "min_gain", "1")],
)
def test_a_scalar_option_of_another_type_is_refused_not_coerced(stage, key, value) -> None:
    # "no" would have been a true pin_first_user, true a max_k of 1
    with pytest.raises(ConfigError) as err:
        Pipeline.from_config({"stages": [{"name": stage, key: value}]})
    assert err.value.field == f"stages[0].{key}"


def test_a_stage_that_customises_run_is_run_through_it_by_the_pipeline() -> None:
    # a Pipeline runs BaseStages through run_report; a subclass that overrides run alone
    # must still be run through its own run, its figures kept
    class Tagging(BaseStage):
        name = "tagging"

        def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
            return request

        def run(self, request: Request, budget: Budget | None = None) -> Result:
            result = super().run(request, budget)
            result.report.stages[0].details["tagged"] = True
            result.report.cacheable_tokens = 7
            return result

    alone = Tagging().run(Request.from_openai({"messages": [{"role": "user", "content": "hi"}]}))
    assert alone.report.stages[0].details["tagged"] is True
    res = Pipeline([Tagging()]).run(
        Request.from_openai({"messages": [{"role": "user", "content": "hi"}]})
    )
    assert res.report.stages[0].details["tagged"] is True
    assert res.report.cacheable_tokens == 7
