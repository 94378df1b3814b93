"""Run every benchmark (`python -m benchmarks [--quick] [--only NAME ...]`, or `nox -s bench`).

Each `bench_*.py` module runs in its own process (so one benchmark's warm caches and threads do
not colour another's), prints a Markdown section and writes its numbers to a JSON file the
harness names. The harness collects them into:

- `benchmarks/results.json`: every number, with the Python and package versions, the CPU count
  and the load average before and after (the machine may be shared);
- `benchmarks/RESULTS.md`: the Markdown sections, with the command and the machine's facts;
- `docs/img/benchmarks/*.png`: one plot per figure (medians with their spread), embedded by
  `docs/benchmarks.md`.

`--quick` runs small sizes (seconds per benchmark): CI's smoke test uses it with `--only` and
`--out` so that a short run never overwrites the published results.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DOCS_IMAGES = HERE.parent / "docs" / "img" / "benchmarks"

# The packages whose versions explain the numbers (absent ones are recorded as absent).
PACKAGES = (
    "jevrefine",
    "openai",
    "httpx2",
    "anyio",
    "pydantic",
    "pydantic-ai-slim",
    "langchain-openai",
    "langchain-core",
    "dspy",
    "litellm",
    "typesafe-sdk",
    "opentelemetry-sdk",
    "matplotlib",
    "xllamacpp",
    "if-verifiable",
    "nltk",
)


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not on every platform
        return None


def run_one(module: str, quick: bool) -> dict[str, Any]:
    """Run `benchmarks.<module>` in a fresh process; its JSON payload (or why it failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = {**os.environ, "JEVREFINE_BENCH_JSON": str(out)}
        command = [sys.executable, "-m", f"benchmarks.{module}"]
        if quick:
            command.append("--quick")
        started = time.perf_counter()
        result = subprocess.run(
            command, cwd=HERE.parent, capture_output=True, text=True, check=False, env=env
        )
        elapsed = time.perf_counter() - started
        if result.returncode != 0:
            return {"failed": True, "stderr": result.stderr[-3000:], "seconds": elapsed}
        if out.exists():
            payload = json.loads(out.read_text())
        else:  # a module that only prints Markdown
            payload = {"markdown": result.stdout.strip(), "data": {}, "figures": []}
        payload["seconds"] = round(elapsed, 1)
        return payload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run jevrefine's benchmarks.")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument(
        "--only", nargs="+", default=[], metavar="NAME", help="run the benchmarks matching NAME"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write results.json, RESULTS.md and the plots here (default: benchmarks/ and "
        "docs/img/benchmarks/)",
    )
    parser.add_argument(
        "--full",
        nargs="+",
        default=[],
        metavar="NAME",
        help="with --quick: run the benchmarks matching NAME at full size all the same (on a "
        "busy machine, the comparisons that matter most at full size, the rest short)",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the other benchmarks' results from the existing results.json and replace "
        "only those run now (each benchmark's comparisons are within its own run)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("names", nargs="*", help="same as --only")
    args = parser.parse_args(argv)
    wanted = args.only + args.names
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if wanted:
        modules = [m for m in modules if any(name in m for name in wanted)]
    out_dir = args.out or HERE
    images = (args.out / "img") if args.out else DOCS_IMAGES
    command = "python -m benchmarks" + (" --quick" if args.quick else "")
    if args.update:
        command += " --update"
    if args.full:
        command += " --full " + " ".join(args.full)
    if wanted:
        command += " --only " + " ".join(wanted)

    results: dict[str, Any] = {
        "started": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "command": command,
        "quick": args.quick,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_before": load(),
        "packages": versions(),
        "benchmarks": {},
    }
    failed = []
    for module in modules:
        print(f"running {module} ...", file=sys.stderr, flush=True)
        quick = args.quick and not any(name in module for name in args.full)
        payload = run_one(module, quick)
        payload["quick"] = quick
        payload["started"] = results["started"]
        payload["command"] = command
        results["benchmarks"][module] = payload
        if payload.get("failed"):
            failed.append(module)
            print(payload["stderr"], file=sys.stderr)
        else:
            print(payload["markdown"], flush=True)
    results["load_after"] = load()
    previous = out_dir / "results.json"
    if args.update and previous.exists():
        # Keep the earlier run's facts beside this one's: each benchmark records its own run.
        earlier = json.loads(previous.read_text())
        merged = {**earlier["benchmarks"], **results["benchmarks"]}
        results["benchmarks"] = {name: merged[name] for name in sorted(merged)}
        results["earlier_runs"] = [
            *earlier.get("earlier_runs", []),
            {k: v for k, v in earlier.items() if k not in ("benchmarks", "earlier_runs")},
        ]

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    plots: list[Path] = []
    if not args.no_plots:
        try:
            from ._plots import plot_all

            plots = plot_all(results, images)
        except ImportError as error:  # matplotlib is in the bench extra, not in dev
            print(f"no plots: {error}", file=sys.stderr)
    (out_dir / "RESULTS.md").write_text(report(results, plots, out_dir))
    print(f"wrote {out_dir / 'results.json'}, {out_dir / 'RESULTS.md'}", file=sys.stderr)
    return 1 if failed else 0


def report(results: dict[str, Any], plots: list[Path], out_dir: Path) -> str:
    packages = ", ".join(f"{k} {v}" for k, v in results["packages"].items() if v)
    sections = [
        "# Benchmark results",
        "",
        f"{results['started']}; {results['implementation']} {results['python']} on "
        f"{results['platform']}, {results['cpu_count']} CPUs; load average (1, 5, 15 min) "
        f"{results['load_before']} before, {results['load_after']} after. Command: "
        f"`{results['command']}`{' (quick mode: small sizes)' if results['quick'] else ''}.",
        "",
        f"Packages: {packages}.",
        "",
    ]
    for earlier in results.get("earlier_runs", []):
        sections += [
            f"Some sections come from an earlier run: {earlier['started']}, load average "
            f"{earlier['load_before']} before, {earlier['load_after']} after, "
            f"`{earlier['command']}` (each section names its run).",
            "",
        ]
    for module, payload in results["benchmarks"].items():
        if payload.get("failed"):
            sections += [f"## {module}: failed", "", "```", payload["stderr"], "```", ""]
            continue
        size = "quick mode (small sizes)" if payload.get("quick") else "full size"
        sections += [
            payload["markdown"].strip(),
            "",
            f"_{module}: {size}, {payload['seconds']} s; run {payload.get('started')} by "
            f"`{payload.get('command')}`._",
            "",
        ]
        for spec in payload.get("figures", []):
            path = next((p for p in plots if p.stem == spec["name"]), None)
            if path is not None:
                sections += [f"![{spec['title']}]({os.path.relpath(path, out_dir)})", ""]
    return "\n".join(sections)


if __name__ == "__main__":
    sys.exit(main())
