"""Sentence embeddings on ONNX Runtime, from a local sentence-transformers model.

``load_embedder(..., backend="onnx")`` returns an :class:`OnnxSentenceEncoder`: the model's
transformer exported once to an ONNX graph (float32, and int8 with ``quantize=True``), run by
onnxruntime, with the model's own pooling and normalisation done in numpy. It answers the part
of ``SentenceTransformer``'s interface that :class:`~promptslim.backends.embeddings.EmbeddingService`
uses (``encode``, ``max_seq_length``, ``device``, ``get_embedding_dimension``).

Why not sentence-transformers' own ONNX backend: it exports through optimum, whose releases
track transformers closely. With the transformers that llmlingua needs (<= 4.47.1), optimum
2.1's export fails on the packaged MiniLM here ("Unrecognized model"). The export below needs
only torch, which sentence-transformers brings anyway, and no network: the weights are the
local ones.

Why it is worth a backend (all-MiniLM-L6-v2, 20 nq20-dev passages at 128 word pieces, the
2-core development VM, ``benchmarks/bench_retrieval.py --cold-options``): float32 takes about
the torch time, with the torch vectors (to 1e-6); int8 (weights per channel, activations
quantised per call) is 1.4-1.6x faster than torch's float model. One new query, beside passage
vectors a vector store handed over, takes 9 ms at the median instead of 23 (float32, in the
retrieval stage).

- **Export**: the transformer with dynamic batch and sequence axes (opset 17), written to
  ``cache_dir()/onnx/<model>-<digest>/`` through a temporary file and an atomic rename, so
  processes that start together never read half a file. The digest covers the model folder's
  files (name, size, mtime), the model's name and the torch version: a changed model is
  exported again, never served stale.
- **int8**: ``onnxruntime.quantization.quantize_dynamic`` on the exported graph (needs the
  ``onnx`` package, in the same extra). Its vectors differ from the float model's (cosine
  0.98-0.99 here), so they are never mixed with a vector store's float vectors (the service
  keeps a cache per ``quantize`` setting, as for torch's int8).
- **One text per run, texts in parallel**: each text runs on its own, unpadded, on one
  onnxruntime thread, and up to one text per CPU this process may run on (at most 8) runs at
  once, longest first. Two reasons:

  - *A text's vector does not depend on its neighbours.* The int8 graph quantises activations
    with one scale per call, taken over the whole input tensor, padding included: a passage
    batched with others got a vector up to 0.02 away (per component) from the one it got with
    other neighbours. Alone, it always gets the same one, so a cached vector is the vector the
    text would get now.
  - *Speed.* An intra-op pool wakes its threads for every operator (a few hundred per call),
    and no padding is computed. 20 nq20-dev passages on the 2-core development VM, median ms,
    this way against sorted batches of 8 on two intra-op threads (interleaved, one process):
    int8 at 64 word pieces 75 vs 93, int8 at 128 126 vs 184, float32 at 128 300 vs 394.
    The price: one short text runs on one thread, which for the float32 graph is slower
    (a query: 7.1 ms vs 5.6; int8: 3.0 vs 3.7).

  Threads wait asleep rather than spin: on a shared CPU a spinning pool burns the time other
  requests need.
- Only models made of a Transformer, a Pooling (mean, cls or max) and optionally a Normalize
  module are supported; any other layout raises ``ConfigError`` naming ``backend``.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BackendError, BackendUnavailable, ConfigError
from .model_cache import atomic_write, converted_path, require

if TYPE_CHECKING:
    import numpy as np

__all__ = ["OnnxSentenceEncoder", "onnx_model_dir"]

OPSET = 17
_POOLING_MODES = ("mean", "cls", "max")
_MAX_THREADS = 8
_export_lock = threading.Lock()


def _usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells it, e.g. a container's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _require_onnxruntime() -> None:
    require("onnxruntime", "onnxruntime (the ONNX embedding backend)", "onnx")


def onnx_model_dir(path: str) -> Path:
    """Where the ONNX export of the model at ``path`` (a folder or a cached name) lives."""
    import torch

    return converted_path("onnx", path, f"{torch.__version__}\x1f{OPSET}")


def _exportable(auto_model: Any, names: Sequence[str]) -> Any:
    """The transformer as a module with positional inputs and one output (what the exporter
    traces)."""
    import torch

    class Exportable(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = auto_model

        def forward(self, *inputs: Any) -> Any:
            out = self.model(**dict(zip(names, inputs, strict=True)), return_dict=True)
            return out.last_hidden_state

    return Exportable().eval()


def _export(st: Any, names: Sequence[str], target: Path) -> None:
    import torch

    tokenizer = st.tokenizer
    sample = tokenizer(["an example sentence", "another one"], padding=True, return_tensors="pt")
    inputs = tuple(sample[n] for n in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}

    def write(tmp: str) -> None:
        with warnings.catch_warnings(), torch.no_grad():
            # the exporter's notices (deprecations, tracer hints) say nothing about the graph
            warnings.simplefilter("ignore")
            kwargs: dict[str, Any] = {}
            if "dynamo" in torch.onnx.export.__code__.co_varnames:
                kwargs["dynamo"] = False  # the TorchScript exporter: no onnxscript needed
            torch.onnx.export(
                _exportable(st[0].auto_model, names),
                inputs,
                tmp,
                input_names=list(names),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=OPSET,
                **kwargs,
            )

    atomic_write(target, write)


def _quantize(source: Path, target: Path) -> None:
    require("onnx", "onnx (the int8 ONNX export)", "onnx")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def write(tmp: str) -> None:
        # the quantiser logs advice through the root logger, whose first use with no handler
        # would configure the application's logging: give it a handler that drops the line
        root = logging.getLogger()
        quiet = logging.NullHandler()
        quiet.addFilter(lambda record: False)
        drop = _DropQuantiserAdvice()
        root.addHandler(quiet)
        root.addFilter(drop)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # per channel: cosine to the float vectors 0.98-0.99 here (per tensor: ~0.94)
                quantize_dynamic(source, tmp, weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.removeFilter(drop)
            root.removeHandler(quiet)

    atomic_write(target, write)


class _DropQuantiserAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _layout(st: Any) -> tuple[str, bool]:
    """``(pooling mode, normalised)`` of a Transformer + Pooling [+ Normalize] model."""
    kinds = [type(m).__name__ for m in st]
    normalised = kinds[2:] == ["Normalize"]
    if kinds[:2] != ["Transformer", "Pooling"] or not (len(kinds) == 2 or normalised):
        raise ConfigError(
            f"the onnx backend supports Transformer + Pooling (+ Normalize) models, this one "
            f"is {' + '.join(kinds)}: use backend='torch'",
            field="backend",
        )
    pooling = st[1]
    # sentence-transformers 5.x: ``pooling_mode``; earlier releases: ``get_pooling_mode_str()``
    mode = getattr(pooling, "pooling_mode", None)
    if mode is None and hasattr(pooling, "get_pooling_mode_str"):
        mode = pooling.get_pooling_mode_str()
    if mode not in _POOLING_MODES:
        raise ConfigError(
            f"the onnx backend pools by {', '.join(_POOLING_MODES)}, not {mode!r}: use "
            "backend='torch'",
            field="backend",
        )
    return mode, normalised


class OnnxSentenceEncoder:
    """A sentence-transformers model's embeddings through onnxruntime (see the module doc).

    Built by :func:`promptslim.backends.models.load_embedder`; ``st`` is the torch model it is
    exported from (not kept: only its tokenizer and settings are)."""

    device = "cpu"

    def __init__(self, st: Any, path: str, *, quantize: bool = False) -> None:
        _require_onnxruntime()
        import onnxruntime as ort

        self.pooling, self.normalised = _layout(st)
        self.tokenizer = st.tokenizer
        self.do_lower_case = bool(getattr(st[0], "do_lower_case", False))
        self.max_seq_length: int | None = st.max_seq_length
        self.quantize = quantize
        # renamed in sentence-transformers 5.x; older releases have only the old name
        get_dim = (
            getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
        )
        dim = get_dim()
        self._dim = int(dim) if dim else None
        names = [n for n in ("input_ids", "attention_mask", "token_type_ids")
                 if n in self.tokenizer.model_input_names]  # fmt: skip
        self.input_names = names
        folder = onnx_model_dir(path)
        float_file = folder / "model.onnx"
        file = folder / ("model_int8.onnx" if quantize else "model.onnx")
        with _export_lock:
            try:
                if not float_file.exists():
                    _export(st, names, float_file)
                if quantize and not file.exists():
                    _quantize(float_file, file)
            except (BackendUnavailable, ConfigError):
                raise
            except Exception as exc:  # the exporter raises many kinds; all mean the same here
                raise BackendError(
                    f"ONNX export of {path!r} failed: {exc}", backend="onnx"
                ) from exc
        options = ort.SessionOptions()
        # parallel across texts, not inside one (see the module doc): one thread per run
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.log_severity_level = 3  # warnings about unused initialisers are noise here
        self.file = file
        # InferenceSession.run is thread-safe and lets go of the GIL while it computes
        self.session = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
        self.workers = min(_MAX_THREADS, _usable_cpus())
        self._executor: ThreadPoolExecutor | None = None
        self._executor_pid = 0
        self._executor_lock = threading.Lock()

    def get_embedding_dimension(self) -> int | None:
        return self._dim

    get_sentence_embedding_dimension = get_embedding_dimension

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 8,
        convert_to_numpy: bool = True,
        normalize_embeddings: bool = False,
        show_progress_bar: bool = False,
    ) -> np.ndarray:
        """``(len(texts), dim)`` float32, in order. Each text runs alone (``batch_size`` is
        accepted for sentence-transformers' signature and not used: see the module doc)."""
        import numpy as np

        del batch_size, convert_to_numpy, show_progress_bar  # numpy always; one text a run
        prepared = [t.strip() for t in texts]
        if self.do_lower_case:
            prepared = [t.lower() for t in prepared]
        if not prepared:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        # one tokenizer call for all texts (the fast tokenizer's batch path), no padding
        encoded = self.tokenizer(
            prepared,
            padding=False,
            truncation="longest_first",
            max_length=self.max_seq_length,
        )
        columns = [encoded[n] for n in self.input_names]
        rows = [dict(zip(self.input_names, row, strict=True)) for row in zip(*columns)]
        # longest first: the pool's last runs are the short ones, so its threads end together
        order = sorted(range(len(rows)), key=lambda i: -len(columns[0][i]))
        if len(order) == 1 or self.workers == 1:
            vectors = [self._embed_one(rows[i]) for i in order]
        else:
            vectors = list(self._pool_executor().map(lambda i: self._embed_one(rows[i]), order))
        out = np.empty((len(rows), vectors[0].shape[0]), dtype=np.float32)
        out[order] = np.stack(vectors)
        if self.normalised or normalize_embeddings:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            out = out / norms
        return out

    def _embed_one(self, encoded: dict[str, list[int]]) -> np.ndarray:
        """One tokenised text's pooled vector (the tokenizer's own inputs for it, as a batch
        of one): one run, one thread, no padding."""
        import numpy as np

        feeds = {n: np.asarray([v], dtype=np.int64) for n, v in encoded.items()}
        hidden = self.session.run(None, feeds)[0]
        vector: np.ndarray = self._pool(hidden, np.ones(hidden.shape[:2], dtype=np.int64))[0]
        return vector

    def _pool_executor(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            # a forked child inherits the executor but not its threads: it gets its own
            if self._executor is None or self._executor_pid != os.getpid():
                self._executor = ThreadPoolExecutor(
                    max_workers=self.workers, thread_name_prefix="promptslim-onnx"
                )
                self._executor_pid = os.getpid()
            return self._executor

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import numpy as np

        if self.pooling == "cls":
            return np.asarray(hidden[:, 0], dtype=np.float32)
        m = mask[..., None].astype(np.float32)
        if self.pooling == "max":
            return np.asarray(np.where(m > 0, hidden, -1e9).max(axis=1), dtype=np.float32)
        mean = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return np.asarray(mean, dtype=np.float32)

    def __repr__(self) -> str:
        kind = "int8" if self.quantize else "float32"
        return f"OnnxSentenceEncoder({str(self.file)!r}, {kind}, pooling={self.pooling!r})"
