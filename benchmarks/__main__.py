"""Run every benchmark (`python -m benchmarks [--quick]`, or `nox -s bench`).

Each `bench_*.py` module runs in its own process (so one benchmark's warm caches and threads do
not colour another's) and prints a Markdown section; the sections are collected into
`benchmarks/RESULTS.md` with the machine's facts.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    parser = argparse.ArgumentParser(description="Run jevrefine's benchmarks.")
    parser.add_argument("--quick", action="store_true", help="short runs, for a smoke test")
    parser.add_argument("only", nargs="*", help="benchmark names to run (default: all)")
    args = parser.parse_args()
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if args.only:
        modules = [m for m in modules if any(name in m for name in args.only)]
    sections = [
        "# Benchmark results",
        "",
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; Python "
        f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs"
        f"{'; quick mode' if args.quick else ''}. Produced by `nox -s bench`.",
        "",
    ]
    failed = []
    for module in modules:
        print(f"running {module} ...", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", f"benchmarks.{module}"]
        if args.quick:
            command.append("--quick")
        result = subprocess.run(
            command, cwd=HERE.parent, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            failed.append(module)
            sections += [f"## {module}: failed", "", "```", result.stderr[-2000:], "```", ""]
        else:
            sections += [result.stdout.strip(), ""]
        print(result.stdout, flush=True)
    (HERE / "RESULTS.md").write_text("\n".join(sections))
    print(f"wrote {HERE / 'RESULTS.md'}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
