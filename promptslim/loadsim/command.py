"""What ``promptslim simulate`` and ``promptslim plan`` do, apart from argument parsing:
numbers in dicts, formatted by ``format_table``, plotted by ``plot_sweep``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .costmodel import CostModel
from .engine import ServerConfig, SimRequest, simulate_server
from .workload import arrival_times, load_prompts

__all__ = ["SimulateOptions", "format_table", "plot_sweep", "run_simulate"]

#: concurrencies of ``--sweep`` when none are given: 1 to 1,000
DEFAULT_SWEEP: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


@dataclass(frozen=True)
class SimulateOptions:
    """One simulation run: the stream, the load and the server."""

    dataset: str = "builtin:rag"
    configs: tuple[str, ...] = ("baseline",)
    requests: int = 200
    concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    output_tokens: int = 32
    seed: int = 0
    max_items: int = 200


def _run_one(
    prompts: Sequence[Any],
    *,
    options: SimulateOptions,
    cost: CostModel,
    server: ServerConfig,
    concurrency: int | None,
) -> dict[str, Any]:
    reqs = [SimRequest(p, options.output_tokens) for p in prompts]
    if concurrency is not None:
        run = simulate_server(reqs, cost=cost, server=server, concurrency=concurrency)
    else:
        assert options.rate is not None
        times = arrival_times(
            len(reqs), rate=options.rate, burstiness=options.burstiness, seed=options.seed
        )
        run = simulate_server(reqs, cost=cost, server=server, arrivals=times)
    return run.summary()


def run_simulate(
    options: SimulateOptions,
    *,
    cost: CostModel,
    server: ServerConfig,
    sweep: Sequence[int] = (),
) -> dict[str, Any]:
    """Each config on the same stream: ``{"configs": {label: summary}, "sweep": {label:
    {concurrency: summary}}}`` plus what was run."""
    if (options.concurrency is None) == (options.rate is None):
        raise ConfigError("give exactly one of --concurrency or --rate", field="concurrency")
    streams = load_prompts(
        options.dataset,
        configs=options.configs,
        requests=options.requests,
        seed=options.seed,
        max_items=options.max_items,
    )
    kw: dict[str, Any] = {"options": options, "cost": cost, "server": server}
    out: dict[str, Any] = {
        "options": dict(options.__dict__),
        "server": server.as_dict(),
        "cost_model": cost.as_dict(),
        "configs": {
            label: _run_one(prompts, concurrency=options.concurrency, **kw)
            for label, prompts in streams.items()
        },
    }
    if sweep:
        out["sweep"] = {
            label: {str(c): _run_one(prompts, concurrency=c, **kw) for c in sweep}
            for label, prompts in streams.items()
        }
    return out


def format_table(result: Mapping[str, Any]) -> str:
    """A Markdown table of the configs side by side (seconds, three decimals)."""
    rows = [
        "| config | TTFT p50 | TTFT p95 | TTFT p99 | queue p99 | prefill p99 | hit rate | util |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, s in result["configs"].items():
        t, q, p = s["ttft_s"], s["queue_s"], s["prefill_s"]
        rows.append(
            f"| {label} | {t['p50']:.3f} | {t['p95']:.3f} | {t['p99']:.3f} | {q['p99']:.3f} "
            f"| {p['p99']:.3f} | {s['cache_hit_rate']:.2f} | {s['utilisation']:.2f} |"
        )
    return "\n".join(rows) + "\n"


def plot_sweep(result: Mapping[str, Any], path: str) -> None:
    """TTFT P50/P95/P99 against concurrency, per config, as a PNG (log-log)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, by_c in result.get("sweep", {}).items():
        cs = [int(c) for c in by_c]
        for q, style in (("p50", ":"), ("p95", "--"), ("p99", "-")):
            ax.plot(cs, [by_c[str(c)]["ttft_s"][q] for c in cs], style, label=f"{label} {q}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("concurrent clients (simulated)")
    ax.set_ylabel("TTFT (s, simulated server clock)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    # format given: written at ``path`` as named (without it, a name with no suffix gets ".png")
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)
