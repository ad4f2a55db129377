"""``builtin:NAME`` datasets: items generated from a seed (``rag``, ``rag-zh``, ``rag-hi``,
``chat``, ``chat-zh``, ``kv``), the same seed giving the same items."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator, Mapping

from ..errors import ConfigError, DatasetError
from .dataset_base import BenchItem, DatasetLoader
from .file_datasets import kv_request
from .gen_chat import chat_item, chat_zh_item
from .gen_rag import rag_item, rag_zh_item
from .gen_rag_hi import rag_hi_item

__all__ = ["BuiltinLoader"]


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _kv_item(rng: random.Random, index: int, *, n_pairs: int) -> BenchItem:
    pairs = [(_uuid(rng), _uuid(rng)) for _ in range(n_pairs)]
    key, value = pairs[rng.randrange(n_pairs)]
    return BenchItem(f"kv-{index}", kv_request(pairs, key), (value,))


class BuiltinLoader(DatasetLoader):
    """``builtin:rag|rag-zh|rag-hi|chat|chat-zh|kv``: items generated from ``seed``; the same seed gives the same
    items. Sizes are small on purpose so a CPU run stays short."""

    kind = "builtin"
    GENERATORS: Mapping[str, Callable[[random.Random, int], BenchItem]] = {
        "rag": lambda rng, i: rag_item(rng, i, n_documents=8),
        "rag-zh": lambda rng, i: rag_zh_item(rng, i, n_documents=8),
        "rag-hi": lambda rng, i: rag_hi_item(rng, i, n_documents=8),
        "chat": lambda rng, i: chat_item(rng, i, n_filler_turns=4),
        "chat-zh": lambda rng, i: chat_zh_item(rng, i, n_filler_turns=4),
        "kv": lambda rng, i: _kv_item(rng, i, n_pairs=20),
    }
    #: how many items a builtin dataset has when no limit is given
    SIZE = 100

    def __init__(self, source: str) -> None:
        if source not in self.GENERATORS:
            raise ConfigError(
                f"unknown builtin dataset {source!r}; known: {', '.join(sorted(self.GENERATORS))}",
                field="dataset",
            )
        super().__init__(source)

    def items(self, *, seed: int, on_error: Callable[[DatasetError], None]) -> Iterator[BenchItem]:
        generate = self.GENERATORS[self.source]
        for i in range(self.SIZE):
            # one generator per item: item i is the same whatever the limit
            yield generate(random.Random(f"{self.source}:{seed}:{i}"), i)
