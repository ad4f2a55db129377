"""Benchmark configs by name: the ``stage:opt=val@rate`` shorthand, turned into a Pipeline.

::

    baseline                          the request as it came (no stages)
    prefix | history | retrieval | compress     one stage with its defaults
    compress:extractive@0.33          STAGE[:OPTION...][@RATE]
    retrieval:scorer=bm25:max_k=5     OPTION is KEY=VALUE, or a bare VALUE for the stage's
                                      main choice (compressor, scorer, strategy, policy...)
    prefix+retrieval+compress@0.5     stages chained into one pipeline
    full                              prefix+history+retrieval+compress with defaults
    path/to/pipeline.json             a pipeline config file (JSON, TOML or YAML)

The shorthand only spells a pipeline config: each part becomes ``{"name": STAGE, KEY: VALUE}``
and the whole goes through ``Pipeline.from_config``, so a value is checked by the stage itself
and a bad one is a ``ConfigError`` whose ``field`` names the key as a config file's would
(``stages[1].max_k``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..pipeline import Pipeline
from ..registry import STAGES

__all__ = [
    "BASELINE",
    "FULL_STAGES",
    "BenchConfig",
    "build_config",
    "parse_configs",
    "stage_options",
]

BASELINE = "baseline"
FULL_STAGES = ("prefix", "history", "retrieval", "compress")
#: keyword a bare ``:VALUE`` sets, the first one the stage accepts
MAIN_OPTIONS = ("compressor", "scorer", "strategy", "policy", "summariser", "method", "mode")
#: keyword ``@RATE`` sets
RATE_OPTIONS = ("rate", "ratio")


@dataclass(frozen=True)
class BenchConfig:
    """A named pipeline to benchmark; the baseline has no stages."""

    label: str
    pipeline: Pipeline


def _value(text: str) -> Any:
    """``0.33`` -> float, ``true`` -> bool, ``[1,2]`` -> list; anything else stays a string
    (as a config file would spell it; the stage then checks it)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _stage_class(name: str, spec: str, field: str) -> type:
    if name not in STAGES:
        raise ConfigError(
            f"unknown stage {name!r} in {spec!r}; known: {', '.join(STAGES.names())}",
            field=field,
        )
    try:
        return STAGES.get(name)
    except ImportError as exc:
        # a built-in stage whose module is not in this checkout yet
        raise ConfigError(
            f"stage {name!r} in {spec!r} is not importable yet ({exc})", field=field
        ) from exc


def _accepted(cls: type) -> list[str]:
    params = inspect.signature(cls).parameters
    return [p for p, s in params.items() if s.kind not in (s.VAR_KEYWORD, s.VAR_POSITIONAL)]


def stage_options(part: str, spec: str = "", *, index: int = 0) -> dict[str, Any]:
    """One shorthand part (``retrieval:scorer=bm25:max_k=5``, ``compress@0.3``) as the stage's
    entry in a pipeline config: ``{"name": "retrieval", "scorer": "bm25", "max_k": 5}``.

    Only the spelling is checked here (a known stage, known keys, a numeric rate); the values
    are the stage's to check, through ``Pipeline.from_config``. ``index`` is the part's place
    in the pipeline, so an error's ``field`` reads as ``from_config``'s (``stages[1].max_k``)."""
    spec = spec or part
    root = f"stages[{index}]"
    body, at, rate = part.partition("@")
    name, *options = body.split(":")
    accepted = _accepted(_stage_class(name, spec, f"{root}.name"))
    entry: dict[str, Any] = {"name": name}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq:
            main = next((k for k in MAIN_OPTIONS if k in accepted), None)
            if main is None:
                raise ConfigError(
                    f"stage {name!r} has no main option for {option!r} in {spec!r}; use KEY=VALUE "
                    f"(options: {', '.join(accepted) or 'none'})",
                    field=root,
                )
            key, value = main, option
        if key not in accepted:
            raise ConfigError(
                f"unknown option {key!r} for stage {name!r} in {spec!r}; "
                f"known: {', '.join(accepted) or 'none'}",
                field=f"{root}.{key}",
            )
        entry[key] = _value(value)
    if at:
        rate_key = next((k for k in RATE_OPTIONS if k in accepted), None)
        if rate_key is None:
            raise ConfigError(f"stage {name!r} takes no @RATE (in {spec!r})", field=root)
        try:
            entry[rate_key] = float(rate)
        except ValueError:
            raise ConfigError(
                f"bad rate {rate!r} in {spec!r}: expected a number", field=f"{root}.{rate_key}"
            ) from None
    return entry


def _from_shorthand(spec: str, parts: Sequence[str]) -> Pipeline:
    stages = [stage_options(p, spec, index=i) for i, p in enumerate(parts)]
    try:
        return Pipeline.from_config({"stages": stages})
    except ConfigError as exc:
        # the same error a config file gets, its field unchanged; the message names the spec
        raise ConfigError(f"{exc.reason} (in {spec!r})", field=exc.field) from exc


def build_config(spec: str) -> BenchConfig:
    """One config from its spec (see the module docstring)."""
    spec = spec.strip()
    if not spec:
        raise ConfigError("empty config name", field="configs")
    if spec == BASELINE:
        return BenchConfig(BASELINE, Pipeline([]))
    path = Path(spec)
    if path.suffix in (".json", ".toml", ".yaml", ".yml") or path.is_file():
        return BenchConfig(path.stem, Pipeline.from_config(path))
    parts = list(FULL_STAGES) if spec == "full" else spec.split("+")
    return BenchConfig(spec, _from_shorthand(spec, parts))


def parse_configs(text: str | Sequence[str]) -> list[BenchConfig]:
    """Configs from ``"baseline,prefix,..."``; the baseline is added first if missing (every
    delta is against it). Labels must be unique."""
    specs = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    specs = [s for s in specs if s]
    if BASELINE not in specs:
        specs.insert(0, BASELINE)
    configs = [build_config(s) for s in specs]
    labels = [c.label for c in configs]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ConfigError(f"config given twice: {', '.join(dupes)}", field="configs")
    return configs
