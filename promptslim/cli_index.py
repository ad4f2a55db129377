"""``promptslim index``: a corpus's documents indexed ahead of the requests that will carry
them (``RetrievalStage.index``), into the shared embedding cache every serving host reads."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from .cli_io import read_bodies
from .errors import BackendError, ConfigError, DatasetError
from .types import Document

if TYPE_CHECKING:
    from .stages.retrieval import RetrievalStage

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


def _index(stages: Sequence[RetrievalStage], docs: Iterable[Document]) -> tuple[int, int]:
    """Documents and texts indexed, ``BATCH`` documents at a time."""
    documents = texts = 0
    batch: list[Document] = []
    for doc in docs:
        batch.append(doc)
        if len(batch) == BATCH:
            texts += sum(stage.index(batch) for stage in stages)
            documents, batch = documents + len(batch), []
    if batch:
        texts += sum(stage.index(batch) for stage in stages)
    return documents + len(batch), texts


def cmd_index(args: argparse.Namespace) -> int:
    """Index every document of ``args.files`` with the retrieval stages of the pipeline
    (``--config``, else the default) into ``--embedding-cache`` (else what
    ``PROMPTSLIM_EMBEDDING_CACHE`` names): vectors kept by this process alone would end with it."""
    from .backends.embeddings import EMBEDDING_CACHE_ENV, configure_embedding_cache
    from .backends.shared_stats import degraded_scope
    from .cli import load_pipeline
    from .pipeline import Pipeline
    from .stages.retrieval import RetrievalStage

    url = args.embedding_cache or os.environ.get(EMBEDDING_CACHE_ENV)
    if not url:
        raise ConfigError(
            f"the vectors must go to a shared cache: give a redis:// URL, or set {EMBEDDING_CACHE_ENV}",
            field="--embedding-cache",
        )
    pipeline = load_pipeline(args.config, None)
    stages: list[RetrievalStage] = []
    todo = list(pipeline.stages)
    while todo:  # a pipeline is a stage: look inside nested ones
        stage = todo.pop(0)
        if isinstance(stage, Pipeline):
            todo[:0] = stage.stages
        elif isinstance(stage, RetrievalStage):
            stages.append(stage)
    if not stages:
        raise ConfigError("the pipeline has no retrieval stage to index for", field="--config")
    configure_embedding_cache(url)
    try:
        with degraded_scope() as degraded:
            documents, texts = _index(stages, _documents(args.files))
    finally:  # a caller in this process (a test, a notebook) gets the default back
        configure_embedding_cache(os.environ.get(EMBEDDING_CACHE_ENV) or None)
    if degraded:  # a request path falls back to its own cache; an index must not pass silently
        raise BackendError(
            f"{degraded[0]}: the vectors were not all stored; run the command again",
            backend="embedding cache",
        )
    if args.json:
        print(json.dumps({"documents": documents, "texts": texts}))
    else:
        print(f"indexed {documents} documents: {texts} texts embedded into the shared cache")
    return 0
