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
    ("option", "value"), [("max_seq_length", 0), ("batch_size", 0), ("cache_size", -1)]
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
    assert err.value.extra == "retrieval"
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
