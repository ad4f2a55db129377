"""The ONNX embedding backend: a real export of the packaged MiniLM, run by real onnxruntime,
against the torch model it came from."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("sentence_transformers")

from promptslim import ConfigError
from promptslim.backends import models
from promptslim.backends.embeddings import EmbeddingService
from promptslim.backends.onnx_encoder import OnnxSentenceEncoder, onnx_model_dir
from promptslim.stages.retrieval import RetrievalStage
from promptslim.types import Document, Message, Request

pytestmark = pytest.mark.slow

TEXTS = [
    "The capital of France is Paris.",
    "who wrote the novel war and peace",
    "  Leading and trailing spaces are stripped, as sentence-transformers does.  ",
    "x",
    # longer than the truncation: both backends must cut it at the same word piece
    " ".join(f"word{i} of a long passage about rivers and mountains" for i in range(60)),
]


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> object:
    """Each run exports for real into its own cache folder (no stale export from a user's)."""
    folder = tmp_path_factory.mktemp("promptslim-cache")
    before = os.environ.get("PROMPTSLIM_CACHE")
    os.environ["PROMPTSLIM_CACHE"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("PROMPTSLIM_CACHE", None)
    else:
        os.environ["PROMPTSLIM_CACHE"] = before


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=1))


def test_float_export_gives_the_torch_vectors() -> None:
    torch_side = EmbeddingService(backend="torch", max_seq_length=128, cache_size=0).embed(TEXTS)
    service = EmbeddingService(backend="onnx", max_seq_length=128, cache_size=0)
    onnx_side = service.embed(TEXTS)
    assert isinstance(service.load(), OnnxSentenceEncoder)
    assert onnx_side.shape == torch_side.shape == (len(TEXTS), 384)
    assert onnx_side.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(onnx_side, axis=1), 1.0, rtol=1e-5)
    assert cosines(onnx_side, torch_side).min() > 0.9999
    # order is the caller's, whatever the batching sorted by length
    again = service.embed(TEXTS[::-1])
    np.testing.assert_allclose(again[::-1], onnx_side, atol=1e-5)


def test_int8_is_a_separate_close_copy_with_its_own_file() -> None:
    plain = models.load_embedder(backend="onnx")
    int8 = models.load_embedder(backend="onnx", quantize=True)
    assert int8 is not plain and int8.file != plain.file and int8.file.name == "model_int8.onnx"
    assert models.load_embedder(backend="onnx", quantize=True) is int8
    # int8 weights are about a quarter of the float ones
    assert int8.file.stat().st_size < 0.4 * plain.file.stat().st_size
    a = int8.encode(TEXTS, normalize_embeddings=True)
    b = plain.encode(TEXTS, normalize_embeddings=True)
    c = cosines(a, b)
    assert 0.95 < c.min() and c.max() < 0.99999  # close, and really quantised


def test_a_texts_int8_vector_does_not_depend_on_its_neighbours() -> None:
    """int8 activations are quantised with one scale per run: each text runs alone, so its
    vector is the same whatever it is embedded with (and a cached vector is the fresh one)."""
    int8 = models.load_embedder(backend="onnx", quantize=True)
    together = int8.encode(TEXTS, normalize_embeddings=True)
    for i, text in enumerate(TEXTS):
        alone = int8.encode([text], normalize_embeddings=True)[0]
        np.testing.assert_allclose(alone, together[i], atol=1e-6)
    mixed = int8.encode([TEXTS[1], *TEXTS[4:], TEXTS[0]], normalize_embeddings=True)
    np.testing.assert_allclose(mixed, together[[1, 4, 0]], atol=1e-6)
    assert int8.encode([]).shape == (0, 384)


def test_export_is_reused_and_redone_when_the_model_changes(tmp_path: Path) -> None:
    source = Path(models._embedder_path(None))
    copy = tmp_path / "minilm"
    shutil.copytree(source, copy)
    first = OnnxSentenceEncoder(models.load_embedder(str(copy), device="cpu"), str(copy))
    mtime = first.file.stat().st_mtime_ns
    second = OnnxSentenceEncoder(models.load_embedder(str(copy), device="cpu"), str(copy))
    assert second.file == first.file and second.file.stat().st_mtime_ns == mtime  # not redone
    (copy / "README.md").write_text("changed\n")
    assert onnx_model_dir(str(copy)) != first.file.parent  # a changed folder is a new export
    assert not any(p.name.startswith(".tmp-") for p in first.file.parent.iterdir())


def test_unsupported_layout_names_the_backend_field(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Dense

    st = models.load_embedder(device="cpu")
    extended = SentenceTransformer(modules=[st[0], st[1], Dense(384, 16)], device="cpu")
    with pytest.raises(ConfigError) as err:
        OnnxSentenceEncoder(extended, str(tmp_path / "extended"))
    assert err.value.field == "backend" and "Dense" in str(err.value)


def test_auto_takes_onnx_on_the_cpu() -> None:
    auto = EmbeddingService(backend="auto", device="cpu", cache_size=0)
    assert isinstance(auto.load(), OnnxSentenceEncoder)
    # and embeds with it: the same vectors as the ONNX backend named explicitly
    onnx = EmbeddingService(backend="onnx", device="cpu", cache_size=0)
    np.testing.assert_array_equal(auto.embed(TEXTS), onnx.embed(TEXTS))


def test_threads_share_one_encoder_safely() -> None:
    service = EmbeddingService(backend="onnx", quantize=True, cache_size=0)
    expected = service.embed(TEXTS)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                results.append(service.embed(TEXTS))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 12
    for r in results:
        np.testing.assert_allclose(r, expected, atol=1e-5)


def test_retrieval_stage_on_onnx_int8_keeps_the_gold_passage_as_often(eval_data: Path) -> None:
    """Dense recall@5 on the first 40 nq20-dev rows: int8 within 0.05 of the float export
    (which the first test ties to the torch vectors)."""
    with gzip.open(eval_data / "nq20-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(40), f)]
    hits: dict[bool, list[bool]] = {False: [], True: []}
    for quantize in (False, True):
        scorer = RetrievalStage(scorer="dense", backend="onnx", quantize=quantize).get_scorer()
        for row in rows:
            texts = [f"{c['title']}\n{c['text']}" for c in row["ctxs"]]
            scores = scorer.score(row["question"], texts).scores
            gold = next(i for i, c in enumerate(row["ctxs"]) if c["isgold"])
            hits[quantize].append(gold in set(np.argsort(-scores, kind="stable")[:5].tolist()))
    recall = {k: float(np.mean(v)) for k, v in hits.items()}
    print(f"\ndense recall@5, onnx float vs int8, 40 rows: {recall}")
    assert recall[False] >= 0.8  # the scorer does real work
    assert recall[True] >= recall[False] - 0.05


def test_stage_runs_end_to_end_on_onnx() -> None:
    docs = [
        Document(id="a", text="Paris is the capital and largest city of France."),
        Document(id="b", text="The Nile is a major north-flowing river in Africa."),
        Document(id="c", text="Bananas are rich in potassium."),
    ]
    request = Request(
        messages=[Message(role="user", content="What is the capital of France?")], documents=docs
    )
    out = RetrievalStage(backend="onnx", max_k=1, min_k=1).run(request).request
    assert [d.id for d in out.documents] == ["a"]
