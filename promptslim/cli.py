"""``promptslim`` command line.

Exit codes: 0 success; 2 bad input or config (one line naming the field, never a traceback);
3 budget infeasible; 1 any other failure. ``PROMPTSLIM_DEBUG=1`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from . import __version__
from .errors import BudgetInfeasible, ConfigError, InvalidRequest, PromptSlimError
from .render import json_bytes

if TYPE_CHECKING:
    from .pipeline import Pipeline

__all__ = ["main"]

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_INFEASIBLE = 0, 1, 2, 3


# ---------------------------------------------------------------- input / output helpers


def read_text(path: str) -> str:
    """Text of ``path`` (``-`` is stdin), as an InvalidRequest naming the file when unreadable."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"cannot read: {exc.strerror}", field=path) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"not UTF-8 text (byte {exc.start})", field=path) from exc


def read_json(path: str) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", field=path
        ) from exc
    except RecursionError as exc:
        raise InvalidRequest("invalid JSON: nested too deeply", field=path) from exc
    except ValueError as exc:  # a number JSON allows but Python cannot hold (5,000 digits)
        raise InvalidRequest(f"invalid JSON: {exc}", field=path) from exc


@contextmanager
def writing(path: str | Path, *, flag: str) -> Iterator[None]:
    """Map an unwritable output (a folder, a missing parent folder...) to a one-line error
    naming ``flag`` and ``path``."""
    try:
        yield
    except OSError as exc:
        raise InvalidRequest(f"cannot write {path}: {exc.strerror or exc}", field=flag) from exc


def check_output_file(path: str, *, flag: str) -> None:
    """Fail before the work, not after it, when ``path`` cannot be a new or replaced file."""
    target = Path(path)
    if target.is_dir():
        raise InvalidRequest(f"{path} is a folder; expected a file name", field=flag)
    if not target.parent.is_dir():
        raise InvalidRequest(f"folder {target.parent} does not exist", field=flag)


def check_output_folder(path: str, *, flag: str) -> None:
    """Fail before the work when ``path`` cannot become a folder (it, or the nearest part of
    it that exists, is a file); the command creates it when it writes."""
    target = Path(path).absolute()
    if target.exists() and not target.is_dir():
        raise InvalidRequest(f"{path} exists and is not a folder", field=flag)
    existing = next((p for p in target.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise InvalidRequest(f"{existing} is not a folder", field=flag)


def write_text(path: str, text: str, *, flag: str = "-o") -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with writing(path, flag=flag):
            Path(path).write_text(text, encoding="utf-8")


def example_path(name: str) -> str:
    return str(resources.files("promptslim") / "examples" / name)


def load_pipeline(config: str | None, budget: int | None) -> Pipeline:
    """The config's pipeline (the default one without a config); ``budget`` (``--budget``)
    replaces its total only, so the config's caps and shares still apply."""
    from .pipeline import Pipeline

    pipeline = Pipeline.from_config(config) if config else Pipeline.default()
    if budget is not None:
        if budget < 1:
            raise ConfigError("must be a positive number of tokens", field="--budget")
        pipeline.budget = pipeline.budget.model_copy(update={"total": budget})
    return pipeline


# ---------------------------------------------------------------- commands


def cmd_compress(args: argparse.Namespace) -> int:
    from .reporting import format_report_table
    from .types import Request

    if args.example and args.input is not None:
        raise InvalidRequest("give an input file or --example, not both", field="--example")
    source = example_path("request.json") if args.example else args.input
    if source is None:
        raise InvalidRequest("give an input file, '-' for stdin, or --example", field="IN")
    config = args.config or (example_path("config.json") if args.example else None)
    pipeline = load_pipeline(config, args.budget)
    out = args.output or "-"
    if out != "-":
        check_output_file(out, flag="-o")
    result = pipeline.run(Request.from_openai(read_json(source)))
    body = json_bytes(result.to_openai(), indent=2).decode() + "\n"
    write_text(out, body)
    if args.report != "none":
        report = (
            result.report.model_dump_json(indent=2)
            if args.report == "json"
            else format_report_table(result.report)
        )
        # the body owns stdout when it goes there; the report then goes to stderr
        stream: TextIO = sys.stderr if out == "-" else sys.stdout
        print(report, file=stream)
    return EXIT_OK


def cmd_lint(args: argparse.Namespace) -> int:
    """What breaks prefix caching in a stream of request bodies; exit 1 if the prefix varies."""
    import hashlib

    from .cache import default_models, request_tokens, simulate
    from .errors import DatasetError
    from .stages.prefix import PrefixStage, canonicalise_text
    from .tokens import get_counter
    from .types import Request

    def parse(text: str, *, path: str, line: int) -> Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            where = exc.lineno + line - 1
            message = f"invalid JSON at column {exc.colno}: {exc.msg}"
            raise DatasetError(message, path=path, line=where) from exc
        except RecursionError as exc:
            raise DatasetError("invalid JSON: nested too deeply", path=path, line=line) from exc
        except ValueError as exc:  # a number JSON allows but Python cannot hold
            raise DatasetError(f"invalid JSON: {exc}", path=path, line=line) from exc

    def bodies(path: str) -> list[tuple[int, Any]]:
        text = read_text(path)
        whole, whole_error = None, None
        try:
            whole = parse(text, path=path, line=1)
        except DatasetError as exc:
            whole_error = exc
        if isinstance(whole, dict):
            return [(1, whole)]
        if isinstance(whole, list):
            return [(i + 1, b) for i, b in enumerate(whole)]
        # JSONL: records end at "\n" only; U+2028, U+2029 and U+0085 may stand raw in a JSON
        # string, and str.splitlines() would split the record there
        lines = [line.removesuffix("\r") for line in text.split("\n")]
        out = []
        for n, line in enumerate(lines, 1):
            if line.strip():
                try:
                    out.append((n, parse(line, path=path, line=n)))
                except DatasetError:
                    if not out and whole_error is not None:
                        # the first record is not JSON on its own line: one (pretty-printed)
                        # document, whose parser knows where the error is
                        raise whole_error from None
                    raise
        return out

    flagger = PrefixStage(policy="flag")
    mover = PrefixStage()
    counter = get_counter()
    before: list[list[int]] = []
    after: list[list[int]] = []
    points_before: list[list[int] | None] = []
    points_after: list[list[int] | None] = []
    raw_prefixes: set[str] = set()
    lines: list[str] = []
    for path in args.files:
        for n, body in bodies(path):
            where = f"{path}:{n}"
            try:
                request = Request.from_openai(body)
            except InvalidRequest as exc:
                raise DatasetError(exc.reason, path=path, line=n, field=exc.field) from exc
            end = request.prefix_end()
            raw = json.dumps([request.tools, [m.to_openai() for m in request.messages[:end]]])
            raw_prefixes.add(hashlib.sha256(raw.encode()).hexdigest())
            flagged = flagger.run(request).report
            moved = mover.run(request)
            fingerprint = moved.report.prefix_fingerprint or "-"
            lines.append(f"{where}: stable-prefix fingerprint {fingerprint}")
            details = flagged.stages[0].details
            for v in details["volatile"]:
                index = int(v["target"].split("[")[1].split("]")[0])
                value = canonicalise_text(request.messages[index].text)[v["start"] : v["end"]]
                lines.append(
                    f"  {v['target']}:{v['start']}-{v['end']} {v['kind']} {value!r}: "
                    "varies per request, breaks every cache block after it"
                )
            for change in flagged.stages[0].changes:
                if change.kind in ("rewritten", "reordered"):
                    lines.append(f"  {change.target}: not canonical ({change.reason})")
            for warning in flagged.warnings:
                lines.append(f"  warning: {warning}")
            for tokens_list, points, req in (
                (before, points_before, request),
                (after, points_after, moved.request),
            ):
                tokens, prefix_len = request_tokens(req, counter)
                tokens_list.append(tokens)
                points.append([prefix_len] if prefix_len else None)
    summary = {}
    for label, stream, points in (("before", before, points_before), ("after", after, points_after)):
        results = simulate(stream, {k: m for k, m in default_models().items() if k != "anthropic"})
        results.update(simulate(stream, {"anthropic": default_models()["anthropic"]}, breakpoints=points))
        summary[label] = {k: r.hit_rate for k, r in results.items()}
    varies = len(raw_prefixes) > 1
    if args.json:
        print(json.dumps({"requests": len(before), "prefix_varies": varies, "hit_rate": summary}))
    else:
        print("\n".join(lines))
        print(f"{len(before)} requests; stable prefix {'VARIES' if varies else 'is identical'}")
        print("hit rate      " + "  ".join(f"{k:>9}" for k in summary["before"]))
        for label, rates in summary.items():
            print(f"{label + ' prefix':<13} " + "  ".join(f"{r:>9.1%}" for r in rates.values()))
    return EXIT_ERROR if varies else EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .bench.command import QUICK, BenchOptions, bench

    # --quick sets the defaults; flags given explicitly still win
    base = QUICK if args.quick else BenchOptions()
    given = {k: v for k, v in vars(args).items() if v is not None and k in BenchOptions.__dataclass_fields__}
    for name in ("limit", "repeats", "max_new_tokens"):
        if given.get(name, 1) < 1:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"expected an integer >= 1, got {given[name]}", field=flag)
    options = replace(base, **given)
    out = args.out or ("bench-quick" if args.quick else "bench-out")
    check_output_folder(out, flag="--out")
    run = bench(options, out=out, resume=args.resume)
    if args.json:
        print(json.dumps(run.summary, default=str))
    else:
        print(f"promptslim bench: wrote {out}/report.md ({run.summary['wall_s']:.0f} s)")
    return EXIT_OK


def _server_and_cost(args: argparse.Namespace) -> tuple[Any, Any]:
    from .loadsim import CostModel, ServerConfig

    # checked here so that the error names the flag, not the simulator's field
    for flag, value in (("--output-tokens", args.output_tokens), ("--requests", args.requests)):
        if value < 1:
            raise ConfigError(f"expected an integer >= 1, got {value}", field=flag)
    server = ServerConfig(
        max_num_seqs=args.max_num_seqs,
        max_batched_tokens=args.max_batched_tokens,
        chunked_prefill=not args.no_chunked_prefill,
        prefix_cache=not args.no_prefix_cache,
        cache_blocks=args.cache_blocks,
    )
    return server, CostModel.load(args.cost_model)


def cmd_simulate(args: argparse.Namespace) -> int:
    from .loadsim.command import (
        DEFAULT_SWEEP,
        SimulateOptions,
        format_table,
        plot_sweep,
        run_simulate,
    )

    server, cost = _server_and_cost(args)
    for path, flag in ((args.out, "--out"), (args.plot, "--plot")):
        if path:
            check_output_file(path, flag=flag)
    if args.concurrency is None and args.rate is None:
        args.concurrency = 1
    options = SimulateOptions(
        dataset=args.dataset, configs=tuple(c.strip() for c in args.configs.split(",") if c.strip()),
        requests=args.requests, concurrency=args.concurrency, rate=args.rate,
        burstiness=args.burstiness, output_tokens=args.output_tokens, seed=args.seed,
    )  # fmt: skip
    sweep = parse_sweep(args.sweep) if args.sweep else (DEFAULT_SWEEP if args.plot else [])
    result = run_simulate(options, cost=cost, server=server, sweep=sweep)
    if args.plot:
        with writing(args.plot, flag="--plot"):
            plot_sweep(result, args.plot)
    if args.out:
        write_text(args.out, json.dumps(result, indent=2) + "\n", flag="--out")
    print(json.dumps(result["configs"]) if args.json else format_table(result), end="\n" if args.json else "")
    return EXIT_OK


def parse_sweep(text: str) -> list[int]:
    """``--sweep 1,10,100``: concurrencies, each a positive integer."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        values = [int(part) for part in parts]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise ConfigError(f"expected comma-separated integers >= 1, got {text!r}", field="--sweep")
    return values


def cmd_plan(args: argparse.Namespace) -> int:
    from .loadsim import dataset_profile, pipeline_stream, plan_budget, write_config

    server, cost = _server_and_cost(args)
    check_output_file(args.output, flag="-o")
    prompts, segments = dataset_profile(args.dataset, requests=args.requests, seed=args.seed)
    slim = None
    if args.search == "pipeline":
        slim = pipeline_stream(args.dataset, segments=segments, requests=args.requests, seed=args.seed)
    plan = plan_budget(
        prompts, cost=cost, slo_p99_s=args.ttft_p99, concurrency=args.concurrency,
        segments=segments, server=server, output_tokens=args.output_tokens, slim=slim,
    )  # fmt: skip
    with writing(args.output, flag="-o"):
        write_config(plan.config(), args.output)
    if args.json:
        print(json.dumps(plan.as_dict()))
    else:
        print(
            f"promptslim plan: {plan.total} tokens per request (prefix {plan.prefix}, query "
            f"{plan.query}, history {plan.history}, documents {plan.documents}); simulated TTFT "
            f"P99 {plan.ttft_p99_s:.3f} s <= {plan.slo_p99_s} s at concurrency {plan.concurrency} "
            f"(searched on {'what the pipeline sends' if slim else 'capped prompts'}); wrote {args.output}"
        )
        if plan.unconstrained:
            print("promptslim plan: the stream meets the SLO at its longest prompt: no budget binds")
    return EXIT_OK


def cmd_loadtest(args: argparse.Namespace) -> int:
    from .loadsim.loadtest import LoadtestOptions, run_loadtest, write_report

    options = LoadtestOptions(
        url=args.url, dataset=args.dataset, configs=tuple(c.strip() for c in args.configs.split(",") if c.strip()),
        requests=args.requests, concurrency=args.concurrency, rate=args.rate, burstiness=args.burstiness,
        timeout_s=args.timeout, time_limit_s=args.time_limit, slo_ttft_ms=args.slo_ttft,
        max_tokens=args.max_tokens, model=args.model, seed=args.seed, block=args.block,
    )  # fmt: skip
    check_output_folder(args.out, flag="--out")
    result = run_loadtest(options)
    with writing(args.out, flag="--out"):
        paths = write_report(result, args.out)
    summaries = {label: run["summary"] for label, run in result["configs"].items()}
    if args.json:
        print(json.dumps(summaries, default=str))
    else:
        for label, s in summaries.items():
            t = s["ttft_ms"]
            ttft = f"TTFT p50 {t['p50']:.0f} ms, p99 {t['p99']:.0f} ms" if t.get("n") else "no TTFT"
            print(f"{label}: {s['completed']}/{s['requests']} ok, {ttft}, errors {s['error_rate']:.0%}")
        print(f"promptslim loadtest: wrote {paths['md']}")
    return EXIT_OK


def _queue_budgets(pairs: list[str]) -> dict[str, float]:
    """``--queue-budget CLASS=SECONDS``, repeated, as a dict (a bad one names the flag)."""
    out: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise ConfigError(f"expected CLASS=SECONDS, got {pair!r}", field="--queue-budget")
    return out


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import ServeConfig, serve

    api_key = None
    if args.api_key_env:
        # read from the environment: a key on the command line shows in `ps`
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise InvalidRequest("environment variable is not set or empty", field=args.api_key_env)
    if args.no_pipeline:
        if args.budget is not None or args.config:
            flag = "--budget" if args.budget is not None else "--config"
            raise ConfigError("has no effect with --no-pipeline", field=flag)
        pipeline = None
    else:
        pipeline = load_pipeline(args.config, args.budget)
    config = ServeConfig(
        upstream=args.upstream, host=args.host, port=args.port,
        max_concurrency=args.max_concurrency, max_queue=args.max_queue,
        queue_timeout_s=args.queue_timeout, upstream_timeout_s=args.timeout,
        max_body_bytes=args.max_body_bytes, api_key=api_key, log_content=args.log_content,
        warm_up=not args.no_warm_up, upstream_transport=args.upstream_transport,
        workers=args.workers, header_timeout_s=args.header_timeout,
        body_timeout_s=args.body_timeout, max_header_bytes=args.max_header_bytes,
        max_headers=args.max_headers, max_connections=args.max_connections,
        keepalive_s=args.keepalive, pipeline_timeout_s=args.pipeline_timeout,
        upstream_keepalive={"auto": None, "on": True, "off": False}[args.upstream_keepalive],
        answer_expand=args.answer_expand,
        priority_classes=tuple(c.strip() for c in (args.priority_classes or "").split(",") if c.strip()),
        default_priority=args.default_priority, shortest_first=args.shortest_first,
        tenant_max_concurrency=args.tenant_max_concurrency,
        queue_budget_s=_queue_budgets(args.queue_budget or []),
    )  # fmt: skip
    serve(config, pipeline=pipeline, log_level=args.log_level)
    return EXIT_OK


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="promptslim", description="Slim LLM prompts before they are sent."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

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
    p.set_defaults(func=cmd_compress)

    p = sub.add_parser("lint", help="find what breaks prefix caching in request bodies")
    p.add_argument("files", nargs="+", metavar="FILE", help="JSON or JSONL request bodies ('-' for stdin)")
    p.add_argument("--json", action="store_true", help="print one JSON summary line instead")
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("bench", help="measure prefill/TTFT and answer quality, side by side")
    p.add_argument("--dataset", metavar="SPEC", help="nq:PATH, kv:PATH, longbench:PATH, jsonl:PATH, builtin:rag|chat|kv|rag-zh|chat-zh")
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
    p.set_defaults(func=cmd_bench)

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

    p = sub.add_parser("simulate", help="simulate a continuous-batching server's TTFT under load")
    _server_options(p)
    p.add_argument("--configs", default="baseline", metavar="LIST", help="comma-separated bench config specs")
    p.add_argument("--concurrency", type=int, metavar="N", help="closed-loop clients")
    p.add_argument("--rate", type=float, metavar="R", help="open-loop arrivals per second")
    p.add_argument("--burstiness", type=float, default=1.0, metavar="B", help="gamma shape (1: Poisson)")
    p.add_argument("--sweep", metavar="LIST", help="also simulate these concurrencies, e.g. 1,10,100,1000")
    p.add_argument("--plot", metavar="PNG", help="TTFT percentiles against concurrency")
    p.add_argument("--out", metavar="FILE", help="write the full result as JSON")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("plan", help="largest prompt budget meeting a TTFT P99 SLO, as a config")
    _server_options(p)
    p.add_argument("--ttft-p99", dest="ttft_p99", type=float, required=True, metavar="SECONDS")
    p.add_argument("--concurrency", type=int, required=True, metavar="N")
    p.add_argument("-o", "--output", default="promptslim-plan.json", metavar="FILE", help="config to write (.json or .toml)")
    p.add_argument("--search", choices=("pipeline", "cap"), default="pipeline",
                   help="each step simulates what the planned stages send under the budget (pipeline, the default), "
                        "or the prompts capped at it (cap: faster, pessimistic)")
    p.set_defaults(func=cmd_plan)

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
    p.add_argument("--slo-ttft", dest="slo_ttft", type=float, metavar="MS", help="TTFT SLO for goodput, in ms")
    p.add_argument("--max-tokens", dest="max_tokens", type=int, default=32, metavar="N")
    p.add_argument("--model", default="default", help="model name sent in each body")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="loadtest-out", metavar="DIR", help="JSON, Markdown and PNG go here")
    p.add_argument("--json", action="store_true", help="print the summaries as one JSON line")
    p.set_defaults(func=cmd_loadtest)

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
    p.add_argument("--keepalive", type=float, default=5.0, metavar="S", help="idle keep-alive connections close after this (default 5)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="processes serving the port (default 1); each admits its share of --max-concurrency and --max-queue, loads its own models, and /metrics adds them all up")  # fmt: skip
    p.set_defaults(func=cmd_serve)
    return parser




def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(os.environ.get("PROMPTSLIM_DEBUG"))
    try:
        if getattr(args, "seed", None) is not None and args.seed < 0:  # numpy's generators
            raise ConfigError(f"expected an integer >= 0, got {args.seed}", field="--seed")
        code: int = args.func(args)
        return code
    except InvalidRequest as exc:
        if debug:
            raise
        print(f"promptslim: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BudgetInfeasible as exc:
        if debug:
            raise
        print(f"promptslim: budget infeasible: {exc}", file=sys.stderr)
        return EXIT_INFEASIBLE
    except PromptSlimError as exc:
        if debug:
            raise
        print(f"promptslim: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
