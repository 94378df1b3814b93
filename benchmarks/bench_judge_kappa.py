"""Can a local model judge? `ModelJudgeClient`'s verdicts against IFBench's verifiers.

The attempts judged are answers the local models really gave (the attempts kept by
`bench_quality --dump` runs on IFBench's published prompts), so the judge is measured on the
answers it would meet in the loop, not on made-up ones. Each attempt is judged by the model judge
as setup (c) of `bench_quality` asks it (`bench_quality.model_judge`: one noul per instruction,
worded as IFBench describes it), and the oracle is IFBench's own verifier of the same answer.

Reported per judge model: the confusion counts ("positive" = passed), accuracy, balanced accuracy,
Cohen's kappa with a bootstrap 95 % interval, the judge's tokens and seconds per attempt.

    python -m benchmarks.bench_judge_kappa --dumps FILE.jsonl ... --judges qwen2.5-coder-1.5b
        [--n 240] [--seed 7] [--out FILE.jsonl] [--resume]

Attempts are drawn at random (`--seed`) from every attempt in the dumps; each verdict is written
to `--out` as it comes, so a stopped run resumes (`--resume`) without judging an attempt twice.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from jevrefine.judge import JudgeInput, ModelJudgeClient

from . import bench_quality as bq
from .ifbench import convert


@dataclass(frozen=True)
class Judged:
    """One attempt: the answer's oracle verdict and the judge's."""

    judge_model: str
    case: str
    answer_model: str
    attempt: int
    oracle: bool
    judged: bool
    judge_tokens: int
    seconds: float


def attempts_of(paths: Sequence[str]) -> list[tuple[str, str, int, str]]:
    """(answering model, case id, attempt number, answer) of every attempt in the dumps."""
    found: list[tuple[str, str, int, str]] = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a stop
            if row.get("benchmark", "ifbench") != "ifbench":
                continue
            for number, answer in enumerate(row["answers"], start=1):
                found.append((row["model"], row["case"], number, answer))
    # The same answer to the same case is one attempt to judge.
    unique = {
        (case, answer): (model, case, number, answer) for model, case, number, answer in found
    }
    return sorted(unique.values())


def kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of (judge, oracle) pairs; `None` when undefined."""
    value = bq.agreement(pairs)["kappa"]
    return None if value is None else float(value)


def bootstrap_interval(
    pairs: Sequence[tuple[bool, bool]], rounds: int = 2000, seed: int = 11
) -> tuple[float, float] | None:
    """The 2.5th and 97.5th percentiles of kappa over resamples of the pairs."""
    rng = random.Random(seed)
    values = []
    for _ in range(rounds):
        sample = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        value = kappa(sample)
        if value is not None:
            values.append(value)
    if not values:
        return None
    values.sort()
    return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]


def summary(rows: Sequence[Judged]) -> dict[str, Any]:
    """Confusion counts, accuracy, balanced accuracy, kappa and its interval, cost."""
    pairs = [(r.judged, r.oracle) for r in rows]
    counts = bq.agreement(pairs)
    tp, fp, fn, tn = counts["tp"], counts["fp"], counts["fn"], counts["tn"]
    positives, negatives = tp + fn, tn + fp
    recall = tp / positives if positives else None
    specificity = tn / negatives if negatives else None
    balanced = (
        (recall + specificity) / 2 if recall is not None and specificity is not None else None
    )
    return {
        "n": len(rows),
        **counts,
        "accuracy": (tp + tn) / len(rows) if rows else None,
        "balanced_accuracy": balanced,
        "kappa_ci95": bootstrap_interval(pairs) if rows else None,
        "judge_tokens": statistics.mean(r.judge_tokens for r in rows) if rows else 0.0,
        "seconds": statistics.mean(r.seconds for r in rows) if rows else 0.0,
    }


def earlier_verdicts(out: Path) -> list[Judged]:
    """The verdicts a stopped run wrote to `out` (a line cut by the stop is left out)."""
    rows = []
    if out.exists():
        for line in out.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(Judged(**json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                continue
    return rows


async def judge_all(args: argparse.Namespace) -> list[Judged]:
    from jevrefine.local import LocalModelServer

    cases = {c["id"]: bq.Case.of(c) for c in convert.load_cases()}
    pool = attempts_of(args.dumps)
    rng = random.Random(args.seed)
    chosen = rng.sample(pool, min(args.n, len(pool)))
    out = Path(args.out)
    rows = earlier_verdicts(out) if args.resume else []
    done = {(r.judge_model, r.case, r.answer_model, r.attempt) for r in rows}
    if not args.resume:
        out.write_text("")  # noqa: ASYNC240 - before anything runs
    for judge_name in args.judges:
        server = LocalModelServer(model=judge_name, threads=args.threads, ctx=args.ctx)
        async with server, server.openai_model() as judge_chat:
            client = ModelJudgeClient(judge_chat)
            for index, (answer_model, case_id, number, answer) in enumerate(chosen, start=1):
                if (judge_name, case_id, answer_model, number) in done:
                    continue
                case = cases[case_id]
                judge = bq.model_judge(case, client)
                started = time.perf_counter()
                verdict = await judge.evaluate(JudgeInput(case.prompt, answer))
                seconds = time.perf_counter() - started
                usage = verdict.response.usage if verdict.response is not None else None
                row = Judged(
                    judge_name,
                    case_id,
                    answer_model,
                    number,
                    case.passes(answer),
                    verdict.passed,
                    usage.total_tokens if usage is not None else 0,
                    seconds,
                )
                rows.append(row)
                with out.open("a", encoding="utf-8") as file:  # noqa: ASYNC230 - one line
                    file.write(json.dumps(asdict(row)) + "\n")
                print(
                    f"{judge_name} {index}/{len(chosen)} {case_id}#{number}: "
                    f"oracle {int(row.oracle)} judge {int(row.judged)}",
                    file=sys.stderr,
                    flush=True,
                )
    return rows


def markdown(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "## Can a local model judge? ModelJudgeClient against IFBench's verifiers",
        "",
        f"{args.n} attempts drawn at random (seed {args.seed}) from the answers kept by "
        f"`bench_quality --dump` on IFBench's published prompts; command: `{args.command}`.",
        "",
        "| judge | n | tp / fp / fn / tn | accuracy | balanced acc. | kappa (95 % CI) | judge "
        "tokens / attempt | s / attempt |",
        "|---|---:|---|---:|---:|---|---:|---:|",
    ]
    for name, s in results.items():
        kappa_value = s["kappa"]
        ci = s["kappa_ci95"]
        shown = "" if kappa_value is None else f"{kappa_value:.2f}"
        if ci is not None:
            shown += f" ({ci[0]:.2f}, {ci[1]:.2f})"
        balanced = "" if s["balanced_accuracy"] is None else f"{s['balanced_accuracy']:.0%}"
        lines.append(
            f"| {name} | {s['n']} | {s['tp']} / {s['fp']} / {s['fn']} / {s['tn']} "
            f"| {s['accuracy']:.0%} | {balanced} | {shown} | {s['judge_tokens']:,.0f} "
            f"| {s['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dumps", nargs="+", required=True, metavar="FILE.jsonl")
    parser.add_argument("--judges", nargs="+", default=["qwen2.5-coder-1.5b"], choices=bq.MODELS)
    parser.add_argument("--n", type=int, default=240)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--out", default="judge_kappa.jsonl")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--report", action="store_true", help="only report on --out")
    args = parser.parse_args(argv)
    args.command = "python -m benchmarks.bench_judge_kappa " + " ".join(argv or sys.argv[1:])
    rows = earlier_verdicts(Path(args.out)) if args.report else anyio.run(judge_all, args)
    by_judge: dict[str, list[Judged]] = {}
    for row in rows:
        by_judge.setdefault(row.judge_model, []).append(row)
    results = {name: summary(group) for name, group in by_judge.items()}
    sys.stdout.write(markdown(results, args))


if __name__ == "__main__":
    main()
