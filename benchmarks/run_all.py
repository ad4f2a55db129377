"""Run the benchmarks one after the other, save each one's result, regenerate the summary.

    python benchmarks/run_all.py                      # full runs of every script in RUN_ALL
    python benchmarks/run_all.py --quick              # each script's --quick mode
    python benchmarks/run_all.py --only bench_prefix  # just these scripts

Each script runs with ``--json``; its last stdout line is saved as ``results/<name>.json``
(with the machine it ran on, when the script did not record it), replacing the previous run.
Then ``summary.py`` rewrites ``results/SUMMARY.md`` from every saved result against ``GOALS``.
The scripts run in sequence so that they do not compete for the CPU; run this on a machine
nothing else is using.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import RESULTS, machine
from summary import RUN_ALL, write

HERE = Path(__file__).resolve().parent


def run(name: str, quick: bool) -> dict[str, Any] | None:
    """Run ``name``.py with ``--json``; its result object, or None when it failed."""
    cmd = [sys.executable, str(HERE / f"{name}.py"), "--json"] + (["--quick"] if quick else [])
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, check=False)
    wall = time.perf_counter() - start
    lines = proc.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict):
        print(f"{name}: FAILED (exit {proc.returncode})\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    result.setdefault("machine", machine())
    result["run_all"] = {"quick": quick, "wall_s": round(wall, 1)}
    print(f"{name}: {wall:.0f} s", file=sys.stderr)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", help="run just these scripts (names without .py)")
    args = ap.parse_args()
    failed = []
    for name in RUN_ALL if args.only is None else args.only:
        result = run(name, args.quick)
        if result is None:
            failed.append(name)  # the previous saved run stays, and so does its summary row
            continue
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(write())
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
