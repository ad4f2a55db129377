"""``promptslim`` command line.

Exit codes: 0 success; 2 bad input or config (one line naming the field, never a traceback);
3 budget infeasible; 1 any other failure. ``PROMPTSLIM_DEBUG=1`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, TextIO

from .cache.lint import lint_requests
from .cli_index import cmd_index
from .cli_io import (
    check_output_file,
    check_output_folder,
    read_bodies,
    read_json,
    write_text,
    writing,
)
from .cli_parser import build_parser
from .errors import BudgetInfeasible, ConfigError, DatasetError, InvalidRequest, PromptSlimError
from .render import json_bytes
from .request import Request

if TYPE_CHECKING:
    from .pipeline import Pipeline

__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_INFEASIBLE = 0, 1, 2, 3


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


def _lint_requests(paths: Sequence[str]) -> Iterator[tuple[str, Request]]:
    for path in paths:
        for n, body in read_bodies(path):
            try:
                yield f"{path}:{n}", Request.from_openai(body)
            except InvalidRequest as exc:
                raise DatasetError(exc.reason, path=path, line=n, field=exc.field) from exc


def cmd_lint(args: argparse.Namespace) -> int:
    """What breaks prefix caching in a stream of request bodies; exit 1 if the prefix varies."""
    report = lint_requests(_lint_requests(args.files))
    if args.json:
        print(json.dumps({"requests": report.requests, "prefix_varies": report.prefix_varies,
                          "hit_rate": report.hit_rate}))  # fmt: skip
        return EXIT_ERROR if report.prefix_varies else EXIT_OK
    for label, lines in report.findings:
        print(f"{label}: {lines[0]}")
        for line in lines[1:]:
            print(f"  {line}")
    varies = "VARIES" if report.prefix_varies else "is identical"
    print(f"{report.requests} requests; stable prefix {varies}")
    print("hit rate      " + "  ".join(f"{k:>9}" for k in report.hit_rate["before"]))
    for label, rates in report.hit_rate.items():
        print(f"{label + ' prefix':<13} " + "  ".join(f"{r:>9.1%}" for r in rates.values()))
    return EXIT_ERROR if report.prefix_varies else EXIT_OK


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
        stagger_s=args.stagger,
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
        upstream_spares=args.upstream_spares, upstream_spare_idle_s=args.upstream_spare_idle,
        answer_expand=args.answer_expand,
        priority_classes=tuple(c.strip() for c in (args.priority_classes or "").split(",") if c.strip()),
        default_priority=args.default_priority, shortest_first=args.shortest_first,
        tenant_max_concurrency=args.tenant_max_concurrency,
        queue_budget_s=_queue_budgets(args.queue_budget or []),
    )  # fmt: skip
    serve(config, pipeline=pipeline, log_level=args.log_level)
    return EXIT_OK


# ---------------------------------------------------------------- parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(os.environ.get("PROMPTSLIM_DEBUG"))
    try:
        if getattr(args, "seed", None) is not None and args.seed < 0:  # numpy's generators
            raise ConfigError(f"expected an integer >= 0, got {args.seed}", field="--seed")
        code: int = COMMANDS[args.command](args)
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


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "compress": cmd_compress, "lint": cmd_lint, "bench": cmd_bench, "simulate": cmd_simulate,
    "plan": cmd_plan, "loadtest": cmd_loadtest, "serve": cmd_serve, "index": cmd_index,
}  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
