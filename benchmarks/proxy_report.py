"""``bench_proxy.py``'s result per concurrency level (the proxy's added TTFT against the direct
path, relay times, the proxy's own clock, CPU per request) and its table."""

from __future__ import annotations

from typing import Any

from promptslim.stats import spread

__all__ = ["level_summary", "proxy_table"]


def level_summary(paths: dict[str, Any], cpu: dict[str, Any]) -> dict[str, Any]:
    direct, proxied = paths["direct"], paths["proxy"]
    d, x = spread(direct.ttft), spread(proxied.ttft)
    return {
        "added_ttft_p50_ms": x["p50"] - d["p50"],
        "added_ttft_p99_ms": x["p99"] - d["p99"],
        "ttft_direct_ms": d,
        "ttft_proxy_ms": x,
        "relay_direct_ms": spread(direct.relay),
        "relay_proxy_ms": spread(proxied.relay),
        "proxy_side_ms": {
            "forward": spread(proxied.forward),
            "first_relay": spread(proxied.first_relay),
        },
        "cpu": cpu,
        "requests": {"direct": direct.requests, "proxy": proxied.requests},
        "errors": direct.errors + proxied.errors,
    }


def proxy_table(by_conc: dict[str, Any]) -> str:
    lines = ["conc  path    TTFT p50    p99   relay p50    p99   (ms, client clock)"]
    for level, c in by_conc.items():
        for path in ("direct", "proxy"):
            t, r = c[f"ttft_{path}_ms"], c[f"relay_{path}_ms"]
            lines.append(
                f"{level:>4}  {path:<6} {t['p50']:8.2f} {t['p99']:7.2f} {r['p50']:10.2f} {r['p99']:7.2f}"
            )
        lines.append(
            f"{level:>4}  added  {c['added_ttft_p50_ms']:8.2f} {c['added_ttft_p99_ms']:7.2f}   errors {c['errors']}"
        )
        side, use = c["proxy_side_ms"], c["cpu"]
        fwd, rel = (
            side["forward"].get("p50", float("nan")),
            side["first_relay"].get("p50", float("nan")),
        )
        per = use["ms_per_request"]
        lines.append(
            f"      proxy clock p50: forward {fwd:.2f}, first relay {rel:.2f};  CPU ms/request: "
            f"client {per['client'] or 0:.2f} seam {per['seam'] or 0:.2f} proxy {per['proxy'] or 0:.2f}; "
            f"machine busy {use['machine_busy_fraction'] or 0:.0%}; "
            f"queueing estimate {use['queueing_estimate_ms'] or 0:.1f} ms"
        )
    return "\n".join(lines)
