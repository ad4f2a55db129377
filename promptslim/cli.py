"""``promptslim`` command line.

Exit codes: 0 success; 2 bad input or config (one line naming the field, never a traceback);
3 budget infeasible; 1 any other failure. ``PROMPTSLIM_DEBUG=1`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from .errors import BudgetInfeasible, InvalidRequest, PromptSlimError

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


def write_text(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(path).write_text(text, encoding="utf-8")


def example_path(name: str) -> str:
    return str(resources.files("promptslim") / "examples" / name)


# ---------------------------------------------------------------- commands


def cmd_compress(args: argparse.Namespace) -> int:
    from .pipeline import Pipeline
    from .reporting import format_report_table
    from .types import Request

    source = example_path("request.json") if args.example else args.input
    if source is None:
        raise InvalidRequest("give an input file, '-' for stdin, or --example", field="IN")
    config = args.config or (example_path("config.json") if args.example else None)
    pipeline = Pipeline.from_config(config) if config else Pipeline.default()
    result = pipeline.run(Request.from_openai(read_json(source)))
    body = json.dumps(result.to_openai(), ensure_ascii=False, indent=2) + "\n"
    out = args.output or "-"
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


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="promptslim", description="Slim LLM prompts before they are sent."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("compress", help="slim one chat-completions request body")
    p.add_argument("input", nargs="?", metavar="IN", help="request body JSON ('-' for stdin)")
    p.add_argument("-o", "--output", metavar="OUT", help="where to write the body (default stdout)")
    p.add_argument("--config", metavar="FILE", help="pipeline config (JSON, TOML or YAML)")
    p.add_argument("--report", choices=("table", "json", "none"), default="table")
    p.add_argument(
        "--example", action="store_true", help="use the bundled example request and config"
    )
    p.set_defaults(func=cmd_compress)
    return parser




def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(os.environ.get("PROMPTSLIM_DEBUG"))
    try:
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
