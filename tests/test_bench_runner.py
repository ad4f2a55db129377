"""Side-by-side runs with a stand-in model backend (fast), config specs, and the outputs."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from promptslim.bench.backends import (
    Measurement,
    ModelBackend,
    chat_completions_url,
    plain_messages,
)
from promptslim.bench.datasets import load_dataset
from promptslim.bench.report import RunLog, read_rows, row_line, write_outputs
from promptslim.bench.runner import Progress, build_config, parse_configs, run_bench
from promptslim.errors import ConfigError, DatasetError
from promptslim.pipeline import Pipeline


class EchoBackend(ModelBackend):
    """Answers with the gold answer when it is in the prompt; prefill time grows with length."""

    name = "echo"

    def measure(self, messages: Sequence[dict[str, Any]], *, answers: Sequence[str]) -> Measurement:
        text = " ".join(str(m.get("content") or "") for m in messages[:-1])
        hit = answers[0] in text
        return Measurement(
            answer=answers[0] if hit else "unknown",
            prompt_tokens=len(text) // 4,
            prefill_s=len(text) * 1e-5,
            gold_logprob=-1.0 if hit else -9.0,
        )


def test_config_specs_parse_and_name_the_bad_part() -> None:
    configs = parse_configs("compress:extractive@0.33,retrieval:scorer=bm25:max_k=3")
    assert [c.label for c in configs] == ["baseline", "compress:extractive@0.33", "retrieval:scorer=bm25:max_k=3"]
    compress = configs[1].pipeline.stages[0]
    assert compress.compressor == "extractive" and compress.rate == 0.33
    assert configs[2].pipeline.stages[0].max_k == 3
    assert len(build_config("prefix+compress@0.5").pipeline.stages) == 2
    for spec, part in [
        ("nope", "unknown stage 'nope'"),
        ("compress@abc", "bad rate 'abc'"),
        ("compress:colour=red", "unknown option 'colour'"),
        ("baseline,baseline", "given twice"),
    ]:
        with pytest.raises(ConfigError, match=part):
            parse_configs(spec)


@pytest.mark.parametrize(
    ("spec", "stages"),
    [
        ("prefix+retrieval:max_k=abc", [{"name": "prefix"}, {"name": "retrieval", "max_k": "abc"}]),
        ("retrieval:max_k=0", [{"name": "retrieval", "max_k": 0}]),
        ("retrieval:max_k=2.5", [{"name": "retrieval", "max_k": 2.5}]),
        ("history:pin_first_user=no", [{"name": "history", "pin_first_user": "no"}]),
        ("compress@5", [{"name": "compress", "rate": 5.0}]),
    ],
)
def test_shorthand_values_are_checked_as_a_config_file_is(
    spec: str, stages: list[dict[str, Any]]
) -> None:
    """The shorthand spells a pipeline config: a bad value fails as the same config given to
    Pipeline.from_config does, naming the same key path."""
    with pytest.raises(ConfigError) as from_config:
        Pipeline.from_config({"stages": stages})
    with pytest.raises(ConfigError) as shorthand:
        build_config(spec)
    assert shorthand.value.field == from_config.value.field
    assert shorthand.value.field is not None and shorthand.value.field.startswith("stages[")
    assert shorthand.value.reason.startswith(from_config.value.reason)
    assert repr(spec) in str(shorthand.value)


def test_shorthand_spelling_errors_name_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        build_config("prefix+compress:colour=red")
    assert err.value.field == "stages[1].colour"
    with pytest.raises(ConfigError) as err:
        build_config("compress@abc")
    assert err.value.field == "stages[0].rate"


def test_config_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"stages": [{"name": "compress", "rate": 0.5}]}))
    config = build_config(str(path))
    assert config.label == "mine" and config.pipeline.stages[0].rate == 0.5


def test_run_side_by_side_writes_all_outputs(tmp_path: Path) -> None:
    dataset = load_dataset("builtin:rag", limit=3, seed=1)
    configs = parse_configs("baseline,compress:extractive@0.33,retrieval:scorer=bm25:max_k=2")
    progress_log = tmp_path / "progress.txt"
    with progress_log.open("w") as stream:
        run = run_bench(dataset, EchoBackend(), configs, progress=Progress(9, stream=stream))
    assert "[9/9] 100%" in progress_log.read_text() and "ETA" in progress_log.read_text()
    assert len(run.rows) == 9 and not any(r.error for r in run.rows)
    summary = run.summary["configs"]
    # the baseline pays only the empty pipeline's bookkeeping
    assert summary["baseline"]["net_ttft_ratio"]["median"] == pytest.approx(1.0, rel=0.05)
    small = summary["retrieval:scorer=bm25:max_k=2"]
    assert small["tokens_out"] < small["tokens_in"]
    assert small["first_token_s"]["p50"] < summary["baseline"]["first_token_s"]["p50"]
    delta = small["delta_vs_baseline"]
    assert {"em", "f1", "evidence", "gold_logprob", "first_token_s"} <= set(delta)
    assert delta["first_token_s"]["high"] < 0
    assert set(small["segments_out"]) == {"prefix", "history", "documents", "query"}

    paths = write_outputs(run, tmp_path / "out")
    rows = [json.loads(line) for line in paths["results"].read_text().splitlines()]
    assert len(rows) == 9 and {"config", "item_id", "em", "prefill_s", "net_ttft_ratio"} <= set(rows[0])
    assert json.loads(paths["summary"].read_text())["dataset"]["items"] == 3
    report = paths["report"].read_text()
    assert "| retrieval:scorer=bm25:max_k=2 |" in report and "Deltas against the baseline" in report
    assert paths["plot"].read_bytes()[:4] == b"\x89PNG"


def test_helpers() -> None:
    assert chat_completions_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/v1/chat/completions"
    assert chat_completions_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    flat = plain_messages([{"role": "assistant", "content": None, "tool_calls": [call]}])
    assert flat == [{"role": "assistant", "content": "[tool call f({})]"}]


def test_cli_rejects_a_bad_config_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from promptslim.cli import main

    assert main(["bench", "--configs", "compress@x", "--limit", "1"]) == 2
    assert "bad rate 'x'" in capsys.readouterr().err


class CountingBackend(EchoBackend):
    """EchoBackend that counts how many prompts it was asked to measure."""

    def __init__(self) -> None:
        self.calls = 0

    def measure(self, messages: Sequence[dict[str, Any]], *, answers: Sequence[str]) -> Measurement:
        self.calls += 1
        return super().measure(messages, answers=answers)


def test_identical_prompts_are_measured_once_per_item() -> None:
    # on a RAG item the prefix and history stages have nothing to do: their prompts equal the
    # baseline's, so the model runs once for the three of them; retrieval changes the prompt
    dataset = load_dataset("builtin:rag", limit=2, seed=3)
    configs = parse_configs("baseline,prefix,history,retrieval:scorer=bm25:max_k=2")
    backend = CountingBackend()
    run = run_bench(dataset, backend, configs, warm_up=False)
    assert backend.calls == 2 * 2
    by_config = {c.label: [r for r in run.rows if r.config == c.label] for c in configs}
    assert [r.reused_measurement for r in by_config["prefix"]] == [True, True]
    assert [r.reused_measurement for r in by_config["history"]] == [True, True]
    assert not any(r.reused_measurement for r in by_config["baseline"] + by_config["retrieval:scorer=bm25:max_k=2"])
    for reused, first in zip(by_config["prefix"], by_config["baseline"]):
        assert (reused.prefill_s, reused.prediction, reused.em) == (first.prefill_s, first.prediction, first.em)


def test_an_interrupted_run_resumes_from_its_rows(tmp_path: Path) -> None:
    dataset = load_dataset("builtin:rag", limit=4, seed=2)
    configs = parse_configs("baseline,compress:extractive@0.33")
    full = run_bench(dataset, EchoBackend(), configs, warm_up=False)
    path = tmp_path / "progress.jsonl"
    # a kill after item 1, half-way through item 2, in the middle of writing a line
    lines = [row_line(r) for r in full.rows[:3]]
    path.write_text("".join(lines) + lines[0][:25], encoding="utf-8")
    done = read_rows(path)
    assert [r.as_dict() for r in done] == [r.as_dict() for r in full.rows[:3]]

    backend = CountingBackend()
    resumed = run_bench(dataset, backend, configs, done=done, warm_up=False)
    # item 1 is not measured again; item 2 (only half done) is run again whole
    assert backend.calls == 3 * 2
    assert resumed.summary["resumed_items"] == 1
    assert sorted((r.item_id, r.config) for r in resumed.rows) == sorted(
        (r.item_id, r.config) for r in full.rows
    )
    ours = resumed.summary["configs"]["compress:extractive@0.33"]
    theirs = full.summary["configs"]["compress:extractive@0.33"]
    assert ours["tokens_out"] == theirs["tokens_out"] and ours["n"] == theirs["n"] == 4


def test_a_last_row_cut_inside_a_character_is_dropped(tmp_path: Path) -> None:
    dataset = load_dataset("builtin:rag", limit=2, seed=2)
    rows = run_bench(dataset, EchoBackend(), parse_configs("baseline"), warm_up=False).rows
    whole = row_line(rows[0]).encode()
    cut = row_line(rows[1]).replace('"item_id"', '"note": "日本", "item_id"', 1).encode()
    path = tmp_path / "progress.jsonl"
    path.write_bytes(whole + cut[: cut.index("日".encode()) + 1])  # one byte of three
    assert [r.as_dict() for r in read_rows(path)] == [rows[0].as_dict()]


def test_a_bad_row_in_the_middle_is_named(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    path.write_text('{"config": "baseline", "item_id": "a"}\nnot json\n{"config": "x", "item_id": "b"}\n')
    with pytest.raises(DatasetError, match=r"progress.jsonl:2"):
        read_rows(path)
    path.write_text('{"config": "baseline", "item_id": "a", "colour": 1}\n{"config": "x", "item_id": "b"}\n')
    with pytest.raises(DatasetError, match=r"progress.jsonl:1: not a result row"):
        read_rows(path)


def test_run_log_keeps_rows_across_an_interruption(tmp_path: Path) -> None:
    dataset = load_dataset("builtin:rag", limit=3, seed=3)
    configs = parse_configs("baseline,compress:extractive@0.33")
    log = RunLog(tmp_path / "out", start=time.perf_counter() - 5.0)  # a run 5 s old
    first = run_bench(dataset, EchoBackend(), configs, on_row=log.write, warm_up=False)
    log.close()  # cut off before the outputs were written
    assert (tmp_path / "out" / "progress.jsonl").exists()

    again = RunLog(tmp_path / "out", resume=True)
    assert [r.as_dict() for r in again.done] == [r.as_dict() for r in first.rows]
    assert again.finished_items(len(configs)) == 3 and again.previous_wall_s >= 5.0
    backend = CountingBackend()
    resumed = run_bench(dataset, backend, configs, done=again.done, on_row=again.write)
    assert backend.calls == 0 and resumed.summary["resumed_items"] == 3
    write_outputs(resumed, tmp_path / "out")
    again.finish()
    assert not (tmp_path / "out" / "progress.jsonl").exists()
    assert len((tmp_path / "out" / "results.jsonl").read_text().splitlines()) == 6

    # without resume an old progress file is replaced, not continued
    (tmp_path / "out" / "progress.jsonl").write_text(row_line(first.rows[0]))
    assert RunLog(tmp_path / "out").done == []
    assert (tmp_path / "out" / "progress.jsonl").read_text() == ""
