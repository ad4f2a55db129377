"""The README's two commands: CI runs exactly the test command, and the main-job command is one
the CLI accepts (its options parse), so neither can drift from the code silently."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from promptslim.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def _two_commands() -> list[str]:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Two commands", 1)[1]
    blocks = FENCE.findall(section.split("\n## ", 1)[0])
    assert len(blocks) == 2, blocks
    return [block.strip() for block in blocks]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    _, test_command = _two_commands()
    ci = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]  # fmt: skip
    assert ci == [test_command]


def test_the_main_job_is_the_quick_benchmark_and_its_options_parse() -> None:
    main_job, _ = _two_commands()
    setup, run = (part.strip() for part in main_job.split("&&"))
    assert setup == "bash scripts/setup.sh"
    argv = shlex.split(run)
    assert argv[0] == ".venv/bin/promptslim"
    options = build_parser().parse_args(argv[1:])
    assert options.command == "bench" and options.quick
