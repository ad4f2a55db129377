"""The command line's argument parser: one function per command (``promptslim.cli`` runs them)."""

from __future__ import annotations

import argparse
from typing import Any

from . import __version__

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="promptslim", description="Slim LLM prompts before they are sent."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_compress(sub)
    _add_lint(sub)
    _add_bench(sub)
    _add_simulate(sub)
    _add_plan(sub)
    _add_loadtest(sub)
    _add_serve(sub)
    _add_index(sub)
    return parser


def _add_compress(sub: Any) -> None:
    p = sub.add_parser("compress", help="slim one chat-completions request body")
    p.add_argument("input", nargs="?", metavar="IN", help="request body JSON ('-' for stdin)")
    p.add_argument("-o", "--output", metavar="OUT", help="where to write the body (default stdout)")
    p.add_argument("--config", metavar="FILE", help="pipeline config (JSON, TOML or YAML)")
    p.add_argument(
        "--budget", type=int, metavar="TOKENS", help="the prompt's total token budget (overrides"
        " the config's total; its caps and shares still apply)",
    )
    p.add_argument("--report", choices=("table", "json", "none"), default="table")
    p.add_argument(
        "--example", action="store_true", help="use the bundled example request and config"
    )


def _add_lint(sub: Any) -> None:
    p = sub.add_parser("lint", help="find what breaks prefix caching in request bodies")
    p.add_argument("files", nargs="+", metavar="FILE", help="JSON or JSONL request bodies ('-' for stdin)")
    p.add_argument("--json", action="store_true", help="print one JSON summary line instead")


def _add_bench(sub: Any) -> None:
    p = sub.add_parser("bench", help="measure prefill/TTFT and answer quality, side by side")
    p.add_argument("--dataset", metavar="SPEC", help="nq:PATH, kv:PATH, longbench:PATH, jsonl:PATH, builtin:rag|chat|kv|rag-zh|rag-hi|chat-zh")
    p.add_argument("--model", metavar="SPEC", help="hf:NAME_OR_PATH (default hf:default) or openai:URL")
    p.add_argument("--configs", metavar="LIST", help="comma-separated configs, e.g. baseline,retrieval,compress:extractive@0.33,full")
    p.add_argument("--limit", type=int, metavar="N", help="at most N items")
    p.add_argument("--seed", type=int, help="dataset generation and bootstrap seed (default 0)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), help="where an hf model runs")
    p.add_argument("--repeats", type=int, metavar="N", help="timed prefill passes per prompt (median)")
    p.add_argument("--max-new-tokens", type=int, dest="max_new_tokens", metavar="N")
    p.add_argument("--out", metavar="DIR", help="output folder (default bench-out)")
    p.add_argument("--quick", action="store_true", help="a few built-in items, minutes on a CPU")
    p.add_argument("--resume", action="store_true", help="go on with the interrupted run in --out (its progress.jsonl): finished items are not run again")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")


def _server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cost-model", dest="cost_model", required=True, metavar="FILE", help="JSON: a/b/c/decode_step_s, or points [[tokens, seconds], ...] to fit")
    p.add_argument("--dataset", default="builtin:rag", metavar="SPEC", help="request stream (bench dataset spec; default builtin:rag)")
    p.add_argument("--requests", type=int, default=200, metavar="N", help="requests simulated (default 200)")
    p.add_argument("--output-tokens", dest="output_tokens", type=int, default=32, metavar="N")
    p.add_argument("--max-num-seqs", dest="max_num_seqs", type=int, default=256, metavar="N", help="server batch size")
    p.add_argument("--max-batched-tokens", dest="max_batched_tokens", type=int, default=8192, metavar="N", help="token budget per step")
    p.add_argument("--no-chunked-prefill", dest="no_chunked_prefill", action="store_true")
    p.add_argument("--no-prefix-cache", dest="no_prefix_cache", action="store_true")
    p.add_argument("--cache-blocks", dest="cache_blocks", type=int, metavar="N", help="prefix cache capacity in 16-token blocks (default unbounded)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON line")


def _add_simulate(sub: Any) -> None:
    p = sub.add_parser("simulate", help="simulate a continuous-batching server's TTFT under load")
    _server_options(p)
    p.add_argument("--configs", default="baseline", metavar="LIST", help="comma-separated bench config specs")
    p.add_argument("--concurrency", type=int, metavar="N", help="closed-loop clients")
    p.add_argument("--rate", type=float, metavar="R", help="open-loop arrivals per second")
    p.add_argument("--burstiness", type=float, default=1.0, metavar="B", help="gamma shape (1: Poisson)")
    p.add_argument("--sweep", metavar="LIST", help="also simulate these concurrencies, e.g. 1,10,100,1000")
    p.add_argument("--plot", metavar="PNG", help="TTFT percentiles against concurrency")
    p.add_argument("--out", metavar="FILE", help="write the full result as JSON")


def _add_plan(sub: Any) -> None:
    p = sub.add_parser("plan", help="largest prompt budget meeting a TTFT P99 SLO, as a config")
    _server_options(p)
    p.add_argument("--ttft-p99", dest="ttft_p99", type=float, required=True, metavar="SECONDS")
    p.add_argument("--concurrency", type=int, required=True, metavar="N")
    p.add_argument("-o", "--output", default="promptslim-plan.json", metavar="FILE", help="config to write (.json or .toml)")
    p.add_argument("--search", choices=("pipeline", "cap"), default="pipeline",
                   help="each step simulates what the planned stages send under the budget (pipeline, the default), "
                        "or the prompts capped at it (cap: faster, pessimistic)")


def _add_loadtest(sub: Any) -> None:
    p = sub.add_parser("loadtest", help="concurrent streaming requests against a server: TTFT/ITL/E2E percentiles, with and without promptslim")
    p.add_argument("--url", required=True, metavar="URL", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--dataset", default="builtin:rag", metavar="SPEC", help="request stream (bench dataset spec; default builtin:rag)")
    p.add_argument("--concurrency", type=int, metavar="N", help="closed-loop clients (with --rate: most requests in flight)")
    p.add_argument("--rate", type=float, metavar="R", help="open-loop arrivals per second")
    p.add_argument("--burstiness", type=float, default=1.0, metavar="B", help="gamma shape of the gaps (1: Poisson)")
    p.add_argument("--requests", type=int, default=100, metavar="M", help="requests per config (default 100)")
    p.add_argument("--configs", default="baseline", metavar="LIST", help="comma-separated: baseline, pipeline (the default pipeline), or bench config specs")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="per-request limit in seconds (default 60)")
    p.add_argument("--time-limit", dest="time_limit", type=float, default=600.0, metavar="S", help="whole run limit in seconds, shared equally by the configs (default 600)")
    p.add_argument("--block", type=int, metavar="N", help="requests per config per turn: configs take turns in blocks (default: 2x concurrency, or 10 s of arrivals)")
    p.add_argument("--stagger", type=float, default=0.0, metavar="S", help="closed loop: seconds between the clients' first requests (default 0; a few tens of ms keeps a server from batching first prompts by chance)")
    p.add_argument("--slo-ttft", dest="slo_ttft", type=float, metavar="MS", help="TTFT SLO for goodput, in ms")
    p.add_argument("--max-tokens", dest="max_tokens", type=int, default=32, metavar="N")
    p.add_argument("--model", default="default", help="model name sent in each body")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="loadtest-out", metavar="DIR", help="JSON, Markdown and PNG go here")
    p.add_argument("--json", action="store_true", help="print the summaries as one JSON line")


def _add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="OpenAI-compatible streaming proxy that slims every request")
    p.add_argument("--upstream", required=True, metavar="URL", help="the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--config", metavar="FILE", help="pipeline config (JSON, TOML or YAML); default: the default pipeline")
    p.add_argument("--budget", type=int, metavar="TOKENS", help="every prompt's total token budget (overrides the config's total; its caps and shares still apply)")
    p.add_argument("--no-pipeline", dest="no_pipeline", action="store_true", help="forward bodies unchanged (a transparent proxy)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8787)
    p.add_argument("--max-concurrency", dest="max_concurrency", type=int, default=64, metavar="N", help="requests at the upstream at once (default 64)")
    p.add_argument("--max-queue", dest="max_queue", type=int, default=256, metavar="N", help="requests waiting beyond that; more get 429 (default 256)")
    p.add_argument("--queue-timeout", dest="queue_timeout", type=float, default=30.0, metavar="S", help="longest queue wait before 429 (default 30)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="upstream silence before 504 (default 60)")
    p.add_argument("--max-body-bytes", dest="max_body_bytes", type=int, default=8 * 1024 * 1024, metavar="N", help="larger bodies get 413")
    p.add_argument("--api-key-env", dest="api_key_env", metavar="NAME", help="require the key in this environment variable as X-PromptSlim-Key")
    p.add_argument("--log-level", dest="log_level", default="info", choices=("debug", "info", "warning", "error"))
    p.add_argument("--log-content", dest="log_content", action="store_true",
                   help="allow prompt text in logs (failed-pipeline messages; slimmed messages at debug). Off by default")  # fmt: skip
    p.add_argument("--no-warm-up", dest="no_warm_up", action="store_true",
                   help="do not run the pipeline on a built-in sample at start-up (models then load on the first request)")  # fmt: skip
    p.add_argument("--upstream-transport", dest="upstream_transport", default="httpx", choices=("promptslim", "httpx"),
                   help="deprecated and ignored: every upstream is spoken to by httpx's transport")  # fmt: skip
    p.add_argument("--answer-expand", dest="answer_expand", action="store_true",
                   help="answer the model's promptslim_expand calls in the proxy (non-streamed requests; the tools stage's expand_tool)")  # fmt: skip
    p.add_argument("--upstream-keepalive", dest="upstream_keepalive", default="auto", choices=("auto", "on", "off"),
                   help="reuse upstream connections: auto (the default) pools https:// upstreams only; on for an http:// upstream you trust (see the README)")  # fmt: skip
    p.add_argument("--upstream-spares", dest="upstream_spares", type=int, default=2, metavar="N",
                   help="upstream connections opened ahead while connections are not reused, each used for one request (default 2, at most 64; 0: connect per request)")  # fmt: skip
    p.add_argument("--upstream-spare-idle", dest="upstream_spare_idle", type=float, default=2.0, metavar="S",
                   help="an unused upstream spare connection is closed after this (default 2)")  # fmt: skip
    p.add_argument("--priority-classes", dest="priority_classes", metavar="LIST", help="admission classes, highest first, named by the X-PromptSlim-Priority header (e.g. interactive,batch)")
    p.add_argument("--default-priority", dest="default_priority", metavar="CLASS", help="class of requests that name none (default: the lowest)")
    p.add_argument("--shortest-first", dest="shortest_first", action="store_true", help="within a class, the waiting request with the fewest slimmed prompt tokens goes first")
    p.add_argument("--tenant-max-concurrency", dest="tenant_max_concurrency", type=int, metavar="N", help="requests one tenant (X-PromptSlim-Tenant, else its Authorization) may have at the upstream at once")
    p.add_argument("--queue-budget", dest="queue_budget", action="append", metavar="CLASS=S", help="longest queue wait of a class before 429 (repeatable; others: --queue-timeout)")
    p.add_argument("--pipeline-timeout", dest="pipeline_timeout", type=float, default=1.0, metavar="S", help="pipeline time budget; past it the original request is forwarded (default 1)")
    p.add_argument("--header-timeout", dest="header_timeout", type=float, default=10.0, metavar="S", help="a client's time to send its headers before the connection is closed (default 10)")
    p.add_argument("--body-timeout", dest="body_timeout", type=float, default=30.0, metavar="S", help="a client's time to send its body before 408 (default 30)")
    p.add_argument("--max-header-bytes", dest="max_header_bytes", type=int, default=32 * 1024, metavar="N", help="a request's header block; larger gets 400 (default 32768)")
    p.add_argument("--max-headers", dest="max_headers", type=int, default=100, metavar="N", help="headers per request; more get 431 (default 100)")
    p.add_argument("--max-connections", dest="max_connections", type=int, default=1024, metavar="N", help="open client connections per worker; more are closed at once (default 1024)")
    p.add_argument("--keepalive", type=float, default=8.0, metavar="S", help="idle keep-alive connections close after this (default 8)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="processes serving the port (default 1); each admits its share of --max-concurrency and --max-queue, loads its own models, and /metrics adds them all up")  # fmt: skip


def _add_index(sub: Any) -> None:
    p = sub.add_parser("index", help="embed a corpus's document windows ahead of requests, into the shared cache")
    p.add_argument("files", nargs="+", metavar="FILE", help="documents as JSON or JSON Lines ({\"id\", \"text\", ...} each; '-' for stdin)")
    p.add_argument("--config", metavar="FILE", help="the pipeline config the servers run (default: the default pipeline)")
    p.add_argument("--embedding-cache", dest="embedding_cache", metavar="URL", help="redis:// URL of the shared cache (default: $PROMPTSLIM_EMBEDDING_CACHE)")
    p.add_argument("--json", action="store_true", help="print one JSON line: documents and texts indexed")
