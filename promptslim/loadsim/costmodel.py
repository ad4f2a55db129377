"""The cost of one engine step: a prefill cost curve t(n) and a decode step cost.

``t(n) = a + b*n + c*n**2`` seconds to prefill ``n`` tokens in one forward pass: ``a`` is the
fixed cost of a pass, ``b`` the per-token (matmul) cost, ``c`` attention's quadratic term. A
chunk of ``k`` tokens that starts at position ``p`` costs ``t(p + k) - t(p)`` (without ``a``,
which a step pays once), so a prompt costs ``t(n)`` however it is chunked, and a prefix-cache
hit of ``p`` tokens leaves ``t(p + k) - t(p)`` to compute: the ideal of an engine whose attention
kernel handles a cached prefix as well as a fresh one (on an H200 with transformers' eager path
the measured cost after a 4k-12k cached prefix was 28-33 % higher:
benchmarks/gpu_prefill.py's ``cached`` section). A step that decodes ``m`` sequences adds
``decode_step_s + decode_per_seq_s * m``.

Load with ``CostModel.load(path)`` from JSON, either coefficients::

    {"a": 0.02, "b": 0.0018, "c": 1e-8, "decode_step_s": 0.02}

or measurements to fit (least squares, ``c >= 0``)::

    {"points": [[256, 0.43], [512, 0.89], [1024, 1.86], [2048, 4.23]], "decode_step_s": 0.02}

(``points`` may also be ``{"tokens": n, "seconds": s}`` records.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["CostModel", "fit_prefill"]


@dataclass(frozen=True)
class CostModel:
    """Prefill curve coefficients (seconds) and the decode step cost."""

    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    decode_step_s: float = 0.0
    decode_per_seq_s: float = 0.0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            _number(value, field=name)

    # ---- costs

    def prefill_s(self, n: int) -> float:
        """t(n): one pass over ``n`` tokens (0 for none)."""
        return self.a + self.b * n + self.c * n * n if n > 0 else 0.0

    def chunk_s(self, start: int, length: int) -> float:
        """Tokens ``start .. start+length`` of a prompt, without the per-pass constant."""
        end = start + length
        return self.b * length + self.c * (end * end - start * start)

    def decode_s(self, sequences: int) -> float:
        return self.decode_step_s + self.decode_per_seq_s * sequences if sequences > 0 else 0.0

    # ---- construction

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostModel:
        if not isinstance(data, Mapping):
            raise ConfigError("a cost model is a JSON object", field="cost_model")
        known = {"a", "b", "c", "decode_step_s", "decode_per_seq_s", "points", "source"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown key(s) {', '.join(unknown)}", field="cost_model")
        coeffs = {k: _number(data[k], field=k) for k in ("a", "b", "c") if k in data}
        if "points" in data:
            if coeffs:
                raise ConfigError("give either a/b/c or points, not both", field="cost_model")
            coeffs = fit_prefill(_points(data["points"]))
        if not any(coeffs.values()):
            # an all-zero prefill curve makes every TTFT 0: a typo, never a server
            raise ConfigError(
                "no prefill cost: give a, b or c (> 0), or points [[tokens, seconds], ...]",
                field="cost_model",
            )
        decode = {
            k: _number(data[k], field=k) for k in ("decode_step_s", "decode_per_seq_s") if k in data
        }
        return cls(**coeffs, **decode)

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        try:
            # utf-8-sig: a BOM that an editor left is not an error
            data = json.loads(Path(path).read_bytes().decode("utf-8-sig"))
        except OSError as exc:
            raise ConfigError(f"cannot read: {exc.strerror}", field=str(path)) from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"not UTF-8 text (byte {exc.start})", field=str(path)) from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"invalid JSON at line {exc.lineno}: {exc.msg}", field=str(path)
            ) from exc
        except RecursionError as exc:
            raise ConfigError("JSON nested too deeply", field=str(path)) from exc
        return cls.from_dict(data)


def _number(value: Any, *, field: str, positive: bool = False) -> float:
    """``value`` as a float when it is a finite JSON number >= 0 (> 0 if ``positive``): NaN
    or Infinity would stall the simulated clock, and a string or bool is a typo."""
    bound = "> 0" if positive else ">= 0"
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        raise ConfigError(f"expected a finite number {bound}, got {value!r}", field=field)
    return float(value)


def _points(raw: Any) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for i, p in enumerate(raw if isinstance(raw, list) else []):
        try:
            n, s = (p["tokens"], p["seconds"]) if isinstance(p, Mapping) else p
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"point {i} is not [tokens, seconds]", field="points") from exc
        out.append((n, s))
    if not out:
        raise ConfigError("expected a non-empty list of [tokens, seconds]", field="points")
    return out


def fit_prefill(points: Sequence[tuple[float, float]]) -> dict[str, float]:
    """Least-squares ``a, b, c`` (all >= 0) of ``t(n) = a + b n + c n^2`` through the points.

    Drops terms whose fit comes out negative (noise on a near-linear curve would otherwise give
    a negative ``c`` that makes long prompts cheaper than they are), then refits. Every point
    needs finite ``tokens > 0`` and ``seconds >= 0`` (``ConfigError`` naming the point)."""
    for i, (tokens, seconds) in enumerate(points):
        _number(tokens, field=f"points[{i}]", positive=True)
        _number(seconds, field=f"points[{i}]")

    n = np.array([p[0] for p in points], dtype=float)
    t = np.array([p[1] for p in points], dtype=float)
    columns = {"a": np.ones_like(n), "b": n, "c": n * n}
    # as many terms as the points determine: one point gives a line through the origin
    terms = {1: ["b"], 2: ["a", "b"]}.get(len(points), ["a", "b", "c"])
    while terms:
        x = np.stack([columns[k] for k in terms], axis=1)
        sol, *_ = np.linalg.lstsq(x, t, rcond=None)
        negative = [k for k, v in zip(terms, sol, strict=True) if v < 0]
        if not negative:
            fitted = dict(zip(terms, (float(v) for v in sol), strict=True))
            return {k: fitted.get(k, 0.0) for k in ("a", "b", "c")}
        # drop the quadratic term first, then the constant: the linear term is the physical one
        drop = "c" if "c" in negative else negative[0]
        terms.remove(drop)
    return {"a": 0.0, "b": 0.0, "c": 0.0}
