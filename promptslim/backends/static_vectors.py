"""Static vectors: a text's embedding without running the model, from a table of word-piece
vectors distilled from the sentence-transformers model itself.

What they are for: a vector store hands over each document's vector, but that vector stands for
a long document's head, and embedding the later windows per request is the whole of its cold
cost (3-5 ms a window with int8 MiniLM on two cores). ``store_windows="static"`` scores those
windows by these vectors instead: each word piece's vector looked up, averaged, and compared
with the query's vector, at a fraction of a millisecond a window.

- **Distilled once**: each word piece of the model's vocabulary runs through the model alone,
  between the model's special tokens (its own pooling and normalisation), as Model2Vec
  distils a static model. The table lives in ``cache_dir()/static/`` as float16 (23 MB for
  MiniLM), written through an atomic rename and keyed by the model folder's files and the
  torch version, like the ONNX export. Building it takes seconds (about 15 s for MiniLM's
  30,522 word pieces on two cores); later processes read it back.
- **The model's own space**: the table's rows are the model's sentence vectors of one word
  piece each (less the direction they all share: :func:`centred`), so a text's mean meets the
  store's query vector directly: a soft match of the text's words against what the question
  means, not the model's reading of the sentence. Its similarities run on their own scale:
  :func:`calibrated` puts them on the scale of the texts the model did embed in the same
  request.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .model_cache import atomic_write, converted_path

if TYPE_CHECKING:
    import numpy as np

__all__ = ["StaticVectors", "calibrated", "centred", "static_table_path", "word_pieces"]

#: word pieces per model call while distilling (each input is three word pieces long)
_DISTIL_BATCH = 1024


def static_table_path(path: str) -> Path:
    """Where the static table of the model at ``path`` (a folder or a cached name) lives."""
    import torch

    return converted_path("static", path, torch.__version__, suffix=".npy")


class StaticVectors:
    """Unit vectors of texts as the mean of their word pieces' rows in ``table`` (one row per
    id of ``tokenizer``'s vocabulary; float32 in memory, 47 MB for MiniLM: reading rows of a
    float16 table costs several times the lookup). ``tokenizer``: a ``tokenizers.Tokenizer``
    (see :func:`word_pieces`); ``path``: the model folder both come from."""

    def __init__(self, tokenizer: Any, table: np.ndarray, path: str) -> None:
        self.tokenizer = tokenizer
        self.table = table
        self.path = path

    @classmethod
    def load(cls, path: str, load_model: Any) -> StaticVectors:
        """The model at ``path``'s static vectors: its table read from the cache, or distilled
        from ``load_model()`` (a float ``SentenceTransformer``) and cached first."""
        import numpy as np

        target = static_table_path(path)
        if target.exists():
            return cls(word_pieces(path), centred(np.load(target)), path)
        st = load_model()
        table = distil(st)

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:
                np.save(f, table)

        atomic_write(target, write)
        return cls(word_pieces(path), centred(table), path)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit row per text (a zero row for a text with no word piece)."""
        import numpy as np

        encodings = self.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        for i, encoding in enumerate(encodings):
            if encoding.ids:
                out[i] = self.table[encoding.ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


def word_pieces(path: str) -> Any:
    """The ``tokenizers.Tokenizer`` behind the model's fast tokenizer, loaded for the table
    alone, with no truncation and no padding. Texts go to it straight: its ``encode_batch_fast``
    gives the ids without the character offsets, which are most of the wrapper's cost past the
    word pieces themselves (a per-request cost here, over every later window's text)."""
    from transformers import AutoTokenizer

    from ..errors import ConfigError

    wrapper = AutoTokenizer.from_pretrained(path)
    if not getattr(wrapper, "is_fast", False):
        raise ConfigError(f"static vectors need a fast (Rust) tokenizer; {path!r} has none")
    tokenizer = wrapper.backend_tokenizer
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def distil(st: Any) -> np.ndarray:
    """The table of ``st`` (a ``SentenceTransformer``): the model's sentence vector of each
    word piece alone between its special tokens, float16."""
    import numpy as np
    import torch

    tokenizer = st.tokenizer
    head, tail = _special_tokens(tokenizer)
    n = len(tokenizer)
    rows: list[np.ndarray] = []
    with torch.inference_mode():
        for start in range(0, n, _DISTIL_BATCH):
            ids_range = range(start, min(n, start + _DISTIL_BATCH))
            ids = torch.tensor([[*head, i, *tail] for i in ids_range], device=st.device)
            features = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
            if "token_type_ids" in tokenizer.model_input_names:
                features["token_type_ids"] = torch.zeros_like(ids)
            out = st(features)["sentence_embedding"]
            rows.append(out.float().cpu().numpy().astype(np.float16))
    return np.concatenate(rows)


def centred(table: np.ndarray) -> np.ndarray:
    """``table`` less its mean row, as float32. Every row is a sentence vector of one word
    piece between the same special tokens, so all share one large direction; what tells a word
    from another is the rest. Without that direction a text's mean weighs its words, not what
    all words share: a paraphrase of the question that BM25 cannot see (no word in common)
    scores above an unrelated sentence, where with the raw rows the two came out alike."""
    import numpy as np

    rows = table.astype(np.float32)
    return np.asarray(rows - rows.mean(axis=0), dtype=np.float32)


def _special_tokens(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after a text's word pieces ([CLS] and [SEP] for
    BERT's), read off how it encodes a word with and without them."""
    bare = tokenizer("word", add_special_tokens=False)["input_ids"]
    full = tokenizer("word", add_special_tokens=True)["input_ids"]
    for lead in range(len(full) - len(bare) + 1):
        if full[lead : lead + len(bare)] == bare:
            return full[:lead], full[lead + len(bare) :]
    return [], []


def calibrated(similar: np.ndarray, scores: np.ndarray, known: Sequence[int]) -> np.ndarray:
    """``similar`` (static similarities of every text) put on the scale of ``scores`` (the
    model's similarities, real at ``known``): matched on the mean and spread of the known
    texts, or shifted by their mean difference when there are too few, or too alike, to
    measure a spread by."""
    import numpy as np

    at = list(known)
    if not at:
        return np.asarray(similar, dtype=np.float64)
    mine, theirs = similar[at], scores[at]
    if len(at) >= 2 and float(mine.std()) > 1e-6 and float(theirs.std()) > 1e-6:
        z = (similar - mine.mean()) / mine.std()
        return np.asarray(theirs.mean() + z * theirs.std(), dtype=np.float64)
    return np.asarray(similar + float((theirs - mine).mean()), dtype=np.float64)
