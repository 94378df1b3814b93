"""Which offline model should answer by default? Quality per minute on 2 cores, from kept runs.

Nothing is generated here: the figures come from `bench_quality --dump` files already on disk.

- **Quality** from the published runs (`--quality`): per model, the default loop's final pass rate
  with an answer that echoes the feedback counted as failed, on the prompts every model was run on,
  and each model's paired difference from `--default` with its 95 % interval (the same normal
  approximation `bench_quality` uses for the lift).
- **Minutes** from a timing slice run on a quiet machine with 2 threads (`--timing`): the default
  loop's wall seconds per prompt. The published runs were split over processes sharing the cores
  with other work, so their seconds follow the machine's load and are only printed beside.
- **Quality per minute**: final passes per minute of the 2 cores (pass rate × 60 / seconds per
  prompt) and its inverse, the seconds one passing answer costs.

    python -m benchmarks.bench_offline_default --quality FILE.jsonl ... --timing FILE.jsonl ...
        [--benchmark ifbench] [--default qwen2.5-coder-0.5b]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Mapping, Sequence

from jevrefine.local import OFFLINE_MODEL

from . import bench_quality as bq

DEFAULT_LOOP = "verifiers"
"""The setup name `bench_quality` gives the loop as the SDK ships it."""


def default_loop_rows(rows: Mapping[str, list[bq.Row]]) -> dict[str, dict[str, bq.Row]]:
    """model → case → the default loop's row (an errored row counts as failed, as in
    `bench_quality`'s report)."""
    return {
        model: {r.case: r for r in found if r.setup == DEFAULT_LOOP}
        for model, found in rows.items()
    }


def common_cases(by_model: Mapping[str, Mapping[str, bq.Row]]) -> list[str]:
    """The cases every model has a row for, in a stable order."""
    sets = [set(cases) for cases in by_model.values() if cases]
    return sorted(set.intersection(*sets)) if sets else []


def seconds_per_prompt(rows: Mapping[str, bq.Row]) -> float | None:
    """Mean wall seconds of the default loop per prompt, or None without rows."""
    return statistics.fmean(r.seconds for r in rows.values()) if rows else None


def table(
    quality: Mapping[str, Mapping[str, bq.Row]],
    timing: Mapping[str, Mapping[str, bq.Row]],
    default: str,
) -> str:
    """The markdown table: one line per model, the default first."""
    cases = common_cases(quality)
    if not cases:
        raise SystemExit("bench_offline_default: the --quality files share no prompt")
    if default not in quality:
        raise SystemExit(f"bench_offline_default: --default {default} has no --quality rows")
    base = [quality[default][c].final_answered for c in cases]
    lines = [
        f"{len(cases)} prompts every model was run on; an answer echoing the feedback counts as "
        "failed.",
        "",
        "| model | baseline | final | lift, an echo failing | final − default's (95 % CI) "
        "| s / prompt, 2 threads | final passes / minute | s / passing answer "
        "| s / prompt, published run |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    order = [default, *sorted(m for m in quality if m != default)]
    for model in order:
        final = [quality[model][c].final_answered for c in cases]
        own = bq.paired_summary([quality[model][c].baseline for c in cases], final)
        rate = own["final_pass_rate"]
        if model == default:
            versus = "(the default)"
        else:
            s = bq.paired_summary(base, final)
            low, high = s["lift_ci95"]
            versus = f"{s['lift'] * 100:+.1f} pp ({low * 100:+.1f}, {high * 100:+.1f})"
        quiet = seconds_per_prompt(timing.get(model, {}))
        published = seconds_per_prompt({c: quality[model][c] for c in cases})
        per_minute = f"{rate * 60 / quiet:.2f}" if quiet else "not timed"
        per_pass = f"{quiet / rate:.0f}" if quiet and rate else "—"
        lines.append(
            f"| {model} | {own['baseline_pass_rate']:.1%} | {rate:.1%} "
            f"| {own['lift'] * 100:+.1f} pp "
            f"| {versus} | {f'{quiet:.1f}' if quiet else 'not timed'} | {per_minute} "
            f"| {per_pass} | {published:.1f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quality", nargs="+", required=True, metavar="FILE")
    parser.add_argument("--timing", nargs="+", default=[], metavar="FILE")
    parser.add_argument("--benchmark", choices=bq.BENCHMARKS, default=bq.IFBENCH.name)
    parser.add_argument("--default", default=OFFLINE_MODEL, help="the model compared against")
    args = parser.parse_args(argv)
    benchmark = bq.BENCHMARKS[args.benchmark]
    shown = " ".join(argv if argv is not None else sys.argv[1:])
    print(f"command: python -m benchmarks.bench_offline_default {shown}\n")
    quality = default_loop_rows(bq.load_dumps(args.quality, benchmark))
    timing = default_loop_rows(bq.load_dumps(args.timing, benchmark)) if args.timing else {}
    print(table(quality, timing, args.default))


if __name__ == "__main__":
    main()
