from __future__ import annotations

import importlib.util
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from promptslim.backends.embeddings import EmbeddingService, normalise
from promptslim.errors import BackendUnavailable, ConfigError


def fake_service(cache_size: int = 100) -> tuple[EmbeddingService, list[list[str]]]:
    """A service whose encoder is a deterministic stand-in that records what it was asked."""
    service = EmbeddingService(cache_size=cache_size)
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        rows = [[len(t) + 1.0, float(sum(map(ord, t)) % 97), 1.0] for t in texts]
        return normalise(rows)

    service._encode = encode  # type: ignore[method-assign]
    return service, calls


def test_normalise_gives_unit_float32_rows_and_keeps_zero_rows() -> None:
    out = normalise([[3.0, 4.0], [0.0, 0.0]])
    assert out.dtype == np.float32
    assert np.allclose(out[0], [0.6, 0.8])
    assert np.all(out[1] == 0)
    assert np.isclose(np.linalg.norm(normalise([1.0, 1.0, 1.0])), 1.0)


def test_cache_serves_repeats_without_encoding_again() -> None:
    service, calls = fake_service()
    first = service.embed(["a", "bb", "a"])
    assert calls == [["a", "bb"]]  # a text repeated in one call is encoded once
    again = service.embed(["bb", "ccc"])
    assert calls[-1] == ["ccc"]
    assert np.array_equal(first[1], again[0])
    assert service.cache_info()["hits"] == 1


def test_cache_is_bounded() -> None:
    service, _ = fake_service(cache_size=2)
    service.embed(["a", "b", "c", "d"])
    assert service.cache_info()["size"] == 2


@pytest.mark.parametrize(
    ("option", "value"), [("max_seq_length", 0), ("batch_size", 0), ("cache_size", -1), ("quantize", 1)]
)
def test_bad_options_name_the_field(option: str, value: int) -> None:
    with pytest.raises(ConfigError) as err:
        EmbeddingService(**{option: value})
    assert err.value.field == option


def test_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        EmbeddingService(backend="tensorflow")  # type: ignore[arg-type]
    assert err.value.field == "backend"


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is not None, reason="onnxruntime installed")
def test_onnx_without_onnxruntime_names_the_extra() -> None:
    with pytest.raises(BackendUnavailable) as err:
        EmbeddingService(backend="onnx")
    assert err.value.extra == "onnx"
    assert EmbeddingService(backend="auto")._resolved_backend == "torch"


def test_get_shares_one_service_per_configuration() -> None:
    assert EmbeddingService.get() is EmbeddingService.get()
    assert EmbeddingService.get(max_seq_length=64) is not EmbeddingService.get()


# ---------------------------------------------------------------- the real model


@pytest.mark.slow
def test_real_minilm_unit_vectors_similarity_and_determinism() -> None:
    service = EmbeddingService(cache_size=0)
    texts = ["The cat sat on the mat.", "A cat was sitting on a mat.", "Stock markets fell today."]
    vectors = service.embed(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert np.array_equal(vectors, service.embed(texts))


@pytest.mark.slow
def test_truncation_changes_long_texts_only_and_restores_the_shared_model() -> None:
    long_text = "alpha beta gamma delta " * 100
    short, full = EmbeddingService(max_seq_length=16), EmbeddingService()
    assert not np.allclose(short.embed_one(long_text), full.embed_one(long_text))
    assert np.allclose(short.embed_one("tiny"), full.embed_one("tiny"), atol=1e-5)
    assert short.load().max_seq_length == 256  # the shared model keeps its own setting


@pytest.mark.slow
def test_concurrent_use_matches_serial_use() -> None:
    texts = [f"passage number {i} about topic {i % 7}" for i in range(40)]
    serial = EmbeddingService(cache_size=0).embed(texts)
    shared = EmbeddingService(cache_size=1000)
    barrier = threading.Barrier(4)

    def work(offset: int) -> np.ndarray:
        barrier.wait()
        order = texts[offset:] + texts[:offset]
        return shared.embed(order)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, [0, 10, 20, 30]))
    for offset, got in zip([0, 10, 20, 30], results):
        expected = np.concatenate([serial[offset:], serial[:offset]])
        assert np.allclose(got, expected, atol=1e-5)


# ---------------------------------------------------------------- threads and batches


class RecordingModel:
    """A stand-in ``SentenceTransformer`` that records torch's thread count and the batch size
    of each ``encode``: the seam is ``models.load_embedder``."""

    device = "cpu"
    max_seq_length = 256

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def get_embedding_dimension(self) -> int:
        return 3

    def encode(self, texts: list[str], *, batch_size: int, **_: object) -> np.ndarray:
        import torch

        self.seen.append((torch.get_num_threads(), batch_size))
        return np.ones((len(texts), 3), dtype=np.float32)


@pytest.fixture()
def recording_model(monkeypatch: pytest.MonkeyPatch) -> RecordingModel:
    from promptslim.backends import models

    model = RecordingModel()
    monkeypatch.setattr(models, "load_embedder", lambda *a, **k: model)
    return model


def test_a_query_runs_on_one_thread_and_torch_keeps_its_setting(recording_model: RecordingModel) -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        service = EmbeddingService(cache_size=0)
        service.embed(["who won the prize?"])
        service.embed(["a long passage " * 100])
        EmbeddingService(cache_size=0, threads=2).embed(["who won?"])
        assert [threads for threads, _ in recording_model.seen] == [1, 2, 2]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_batch_size_follows_the_device_unless_given(recording_model: RecordingModel) -> None:
    EmbeddingService(cache_size=0).embed(["a", "b"])
    EmbeddingService(cache_size=0, batch_size=32).embed(["a", "b"])
    assert [batch for _, batch in recording_model.seen] == [8, 32]


def test_threads_must_be_positive() -> None:
    with pytest.raises(ConfigError) as err:
        EmbeddingService(threads=0)
    assert err.value.field == "threads"


@pytest.mark.slow
def test_int8_service_ranks_like_the_float_one() -> None:
    texts = ["The cat sat on the mat.", "A cat was sitting on a mat.", "Stock markets fell today.",
             "The first Nobel Prize in Physics went to Wilhelm Röntgen in 1901."]
    query = "who won the first nobel prize in physics"
    float_, int8 = EmbeddingService(cache_size=0), EmbeddingService(cache_size=0, quantize=True)
    assert int8.load() is not float_.load()
    a, b = float_.embed(texts), int8.embed(texts)
    # close to the float vectors (cosine 0.94-0.95 measured), not identical: int8 vectors are
    # not interchangeable with a vector store's float ones
    assert np.all(np.sum(a * b, axis=1) > 0.9)
    assert not np.allclose(a, b, atol=1e-4)
    assert np.argmax(a @ float_.embed_one(query)) == np.argmax(b @ int8.embed_one(query)) == 3
