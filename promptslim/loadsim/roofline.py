"""A cost model on paper: a dense transformer's step costs from a GPU's published peak figures.

For when the GPU cannot be measured (``benchmarks/gpu_prefill.py`` measures it when it can).
The rules, and what they leave out:

- a prefill token costs ``2 * params`` FLOPs (one multiply-add per weight), run at
  ``mfu * peak_flops``: ``b = 2 params / (mfu peak)``;
- causal attention adds ``2 * layers * hidden`` FLOPs per (query, earlier key) pair for QK^T
  and AV together, about ``n^2 / 2`` pairs for ``n`` tokens: ``c = 2 layers hidden / (mfu peak)``;
- a decode step reads every weight once from HBM at ``mbu * bandwidth`` (``decode_step_s``);
  each sequence in it adds its token's matmul FLOPs and a read of its KV cache
  (``decode_per_seq_s`` at ``context`` tokens). Adding compute and memory time, rather than
  taking the larger, overstates a large decode batch a little: on the safe side;
- ``step_overhead_s``: the scheduler's and kernel launches' fixed cost per forward pass.

MFU/MBU are assumptions the caller states; they are what a published figure cannot give.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from .costmodel import CostModel

__all__ = ["LLAMA3_8B", "Hardware", "Model", "roofline_cost"]


@dataclass(frozen=True)
class Hardware:
    """Published peak figures of one accelerator and the efficiencies assumed on it."""

    name: str
    peak_flops: float  # dense, in the dtype served (FLOP/s)
    hbm_bytes_per_s: float
    mfu: float = 0.5  # share of peak FLOPs a prefill reaches
    mbu: float = 0.7  # share of peak bandwidth a decode step reaches
    step_overhead_s: float = 0.002

    def __post_init__(self) -> None:
        for name in ("mfu", "mbu"):
            if not 0 < getattr(self, name) <= 1:
                raise ConfigError(f"expected 0 < {name} <= 1", field=name)
        if self.peak_flops <= 0 or self.hbm_bytes_per_s <= 0 or self.step_overhead_s < 0:
            raise ConfigError("expected positive peak figures", field="hardware")


@dataclass(frozen=True)
class Model:
    """A dense decoder's shape (bytes per weight and per KV element: the served dtype)."""

    name: str
    params: float
    layers: int
    hidden: int
    kv_heads: int
    head_dim: int
    bytes_per_param: float = 2.0
    bytes_per_kv: float = 2.0

    @property
    def kv_bytes_per_token(self) -> float:
        """K and V, every layer."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_kv


#: Llama-3-8B's shape (the 8B class of the seed scenario), bf16
LLAMA3_8B = Model("Llama-3-8B (bf16)", 8.03e9, layers=32, hidden=4096, kv_heads=8, head_dim=128)


def roofline_cost(model: Model, hw: Hardware, *, context: float) -> CostModel:
    """The step costs of ``model`` on ``hw``; ``context``: the mean tokens a decoding sequence
    has in its KV cache (prompt plus half its output)."""
    if context < 0:
        raise ConfigError(f"expected context >= 0, got {context!r}", field="context")
    flops = hw.mfu * hw.peak_flops
    bandwidth = hw.mbu * hw.hbm_bytes_per_s
    per_token = 2 * model.params / flops
    return CostModel(
        a=hw.step_overhead_s,
        b=per_token,
        c=2 * model.layers * model.hidden / flops,
        decode_step_s=model.params * model.bytes_per_param / bandwidth,
        decode_per_seq_s=per_token + model.kv_bytes_per_token * context / bandwidth,
    )
