"""The one model loader: packaged models, offline, loaded once, shared by threads."""

import threading

import pytest

from promptslim import ConfigError, get_counter
from promptslim.backends import models


@pytest.mark.slow
def test_embedder_loads_once_under_concurrent_first_use() -> None:
    seen = []
    barrier = threading.Barrier(6)

    def work() -> None:
        barrier.wait()
        seen.append(models.load_embedder(device="cpu"))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(m) for m in seen}) == 1
    vec = seen[0].encode(["prefix caching needs byte-stable prompts"])
    assert vec.shape == (1, 384)


@pytest.mark.slow
def test_converted_smollm2_matches_the_gguf_it_came_from() -> None:
    import torch
    import transformers

    from promptslim.backends import hf_compat

    converted = models.load_causal_lm(device="cpu")
    direct = models.load_causal_lm(str(models.smollm2_gguf_path()), device="cpu")
    # a folder written by another transformers major loads with the wrong rope_theta
    theta = hf_compat.rope_theta(converted.model.config)
    assert theta == hf_compat.rope_theta(direct.model.config) == 100_000.0
    assert models._smollm2_folder().name.endswith(f"-tf{transformers.__version__}")
    ids = converted.tokenizer("The capital of France is", return_tensors="pt").input_ids
    assert ids.tolist() == direct.tokenizer("The capital of France is", return_tensors="pt").input_ids.tolist()
    with torch.inference_mode():
        a = converted.model(ids).logits
        b = direct.model(ids).logits
    assert torch.allclose(a, b, atol=1e-4)


@pytest.mark.slow
def test_hf_token_counter_uses_the_local_tokenizer() -> None:
    folder = models._smollm2_folder()
    counter = get_counter(str(folder))
    lm = models.load_causal_lm(device="cpu")
    text = "Prefill dominates time to first token."
    assert counter.encode(text) == lm.tokenizer.encode(text, add_special_tokens=False)
    assert counter.count(text) == len(counter.encode(text))
    assert counter.name.startswith("hf:")


def test_unknown_model_path_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError):
        models.load_causal_lm(str(tmp_path / "nope"), device="cpu")


def test_cache_dir_follows_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PROMPTSLIM_CACHE", str(tmp_path))
    assert models.cache_dir() == tmp_path


def test_int8_and_onnx_embedders_run_on_the_cpu_only() -> None:
    pytest.importorskip("sentence_transformers")
    for kwargs, field in (({"quantize": True}, "quantize"), ({"backend": "onnx"}, "device")):
        with pytest.raises(ConfigError) as err:
            models.load_embedder(device="cuda", **kwargs)
        assert err.value.field == field


@pytest.mark.slow
def test_int8_embedder_is_a_separate_quantised_copy() -> None:
    import torch

    plain = models.load_embedder(device="cpu")
    int8 = models.load_embedder(device="cpu", quantize=True)
    assert int8 is not plain and models.load_embedder(device="cpu", quantize=True) is int8
    linear = [m for m in int8.modules() if "Linear" in type(m).__name__]
    assert linear and all(type(m) is not torch.nn.Linear for m in linear)
    assert any(type(m) is torch.nn.Linear for m in plain.modules())  # the float model is untouched
