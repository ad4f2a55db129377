"""``promptslim index``: a corpus's documents indexed ahead of the requests that will carry
them (``RetrievalStage.index``), into the shared embedding cache every serving host reads."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from .cli_io import read_bodies
from .errors import BackendError, ConfigError, DatasetError
from .types import Document

if TYPE_CHECKING:
    from .pipeline import Pipeline

__all__ = ["cmd_index"]

#: documents handed to the stage at once: a file's documents are indexed in slices this long
BATCH = 256


def _documents(paths: Sequence[str]) -> Iterator[Document]:
    from pydantic import ValidationError

    from .validation import invalid_from_validation

    for path in paths:
        for n, body in read_bodies(path):
            try:
                yield Document.model_validate(body)
            except ValidationError as exc:
                bad = invalid_from_validation(exc)
                raise DatasetError(bad.reason, path=path, line=n, field=bad.field) from exc


def _index(pipeline: Pipeline, docs: Iterable[Document]) -> tuple[int, int]:
    """Documents and texts indexed, ``BATCH`` documents at a time."""
    documents = texts = 0
    batch: list[Document] = []
    for doc in docs:
        batch.append(doc)
        if len(batch) == BATCH:
            texts += pipeline.index(batch)
            documents, batch = documents + len(batch), []
    if batch:
        texts += pipeline.index(batch)
    return documents + len(batch), texts


def cmd_index(args: argparse.Namespace) -> int:
    """Index every document of ``args.files`` with the pipeline (``--config``, else the
    default: ``Pipeline.index``) into ``--embedding-cache`` (else what
    ``PROMPTSLIM_EMBEDDING_CACHE`` names): vectors kept by this process alone would end with it."""
    from .backends.embeddings import EMBEDDING_CACHE_ENV, configure_embedding_cache
    from .backends.shared_stats import degraded_scope
    from .cli import load_pipeline

    url = args.embedding_cache or os.environ.get(EMBEDDING_CACHE_ENV)
    if not url:
        raise ConfigError(
            f"the vectors must go to a shared cache: give a redis:// URL, or set {EMBEDDING_CACHE_ENV}",
            field="--embedding-cache",
        )
    pipeline = load_pipeline(args.config, None)
    configure_embedding_cache(url)
    try:
        with degraded_scope() as degraded:
            documents, texts = _index(pipeline, _documents(args.files))
    finally:  # a caller in this process (a test, a notebook) gets the default back
        configure_embedding_cache(os.environ.get(EMBEDDING_CACHE_ENV) or None)
    if degraded:  # a request path falls back to its own cache; an index must not pass silently
        raise BackendError(
            f"{degraded[0]}: the vectors were not all stored; run the command again",
            backend="embedding cache",
        )
    if documents and not texts:
        print(
            "promptslim: nothing to index: no stage of the pipeline computes anything ahead "
            "(no retrieval stage, or its scorer embeds nothing: bm25, a cross-encoder)",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps({"documents": documents, "texts": texts}))
    else:
        print(f"indexed {documents} documents: {texts} texts embedded into the shared cache")
    return 0
