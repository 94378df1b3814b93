"""Judge escalation: a small model judge escalating its unsure criteria to a larger one.

IFBench instructions are the criteria (one noul per instruction, worded as in bench_quality's
model judge) and IFBench's verifiers the truth. The answers judged are the attempts recorded in
`benchmarks/quality_pilot/*.jsonl` (SmolLM2's and Qwen's own answers to IFBench prompts), so the
items are fixed and nothing is generated. Three judges, each a real `Judge` over
`ModelJudgeClient` on a local llama.cpp server (temperature 0, P(yes) from the answer token's
log probabilities):

- `weak`: `--weak` alone (SmolLM2-135M unless told);
- `strong`: `--strong` alone (Qwen2.5-Coder-0.5B unless told; `qwen2.5-coder-1.5b` is the
  largest offline model);
- `cascade`: `Judge(weak, criteria, escalate_to=strong, escalate_below=B)`: the criteria whose
  P(yes) or P(no) is under B go to the strong model in one more call per item.

Reported: each judge's accuracy against the verifiers (criterion level), the cascade's accuracy
as a share of the strong judge's (`retained`), the share of criteria escalated, and the strong
model's tokens and seconds the cascade spent as a share of the strong judge's (its cost).
Anchor: the seed library's docs claim 99 % of the strong judge's accuracy at about half its fee.

    python -m benchmarks.bench_escalation [--quick] [--n N] [--below B ...]
        [--weak MODEL] [--strong MODEL]

`--quick` = 6 items. CI does not run it (minutes of CPU on two local models).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from jevrefine.judge import DEFAULT_ESCALATE_BELOW, Judge, JudgeInput, ModelJudgeClient, Outcome
from jevrefine.messages import ChatResponse, Prompt
from jevrefine.models.base import ChatModel

from ._harness import emit
from .bench_quality import MODELS, Case, model_judge
from .ifbench import convert

HERE = Path(__file__).parent
PILOTS = sorted((HERE / "quality_pilot").glob("*.jsonl"))
WEAK, STRONG = "smollm2-135m", "qwen2.5-coder-0.5b"
BORROWED = 2


@dataclass(frozen=True)
class Item:
    """One answer to judge, and the verifiers' truth per instruction."""

    case: Case
    answer: str
    truth: tuple[bool, ...]


def load_items(n: int, borrowed: int = BORROWED) -> list[Item]:
    """The first `n` distinct (case, answer) pairs of the pilot dumps, cases interleaved.

    Each answer is judged on its own prompt's instructions and on the first instruction of the
    next `borrowed` prompts (not `repeat:*` ones, which compare the answer with their own
    prompt): the small models follow few of their own instructions, and a judge answering "no"
    throughout would otherwise look accurate. The verifiers decide every one of them.
    """
    cases = {c["id"]: Case.of(c) for c in convert.load_cases()}
    by_case: dict[str, list[str]] = {}
    for path in PILOTS:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            answers = by_case.setdefault(row["case"], [])
            answers.extend(a for a in row["answers"] if a.strip() and a not in answers)
    order = sorted(cases)
    items: list[Item] = []
    # Round-robin over the cases, so a small n still spans many prompts.
    for depth in range(max((len(a) for a in by_case.values()), default=0)):
        for case_id, answers in sorted(by_case.items()):
            if depth >= len(answers) or len(items) >= n:
                continue
            own = cases[case_id]
            extra = [
                (cases[other].ids[0], cases[other].kwargs[0])
                for other in order[order.index(case_id) + 1 :]
                if not cases[other].ids[0].startswith("repeat:")
            ][:borrowed]
            case = Case(
                own.id,
                own.prompt,
                own.ids + tuple(i for i, _ in extra),
                own.kwargs + tuple(k for _, k in extra),
            )
            truth = tuple(r.passed for r in case.results(answers[depth]))
            items.append(Item(case, answers[depth], truth))
    return items


class Metered(ChatModel):
    """Counts a model's tokens and the seconds spent waiting for it, with a response cache.

    The judges ask the same prompts (temperature 0): the cascade's first pass is the weak
    judge's, its escalations are the strong judge's questions. A prompt seen before is answered
    from the cache and charged the tokens and seconds its generation took, so every judge's
    cost is what it would be alone, and each prompt is generated once.
    """

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.tokens = 0
        self.seconds = 0.0
        self.calls = 0
        self.cache: dict[str, tuple[ChatResponse, float]] = {}

    provider = "metered"
    supports_tools = False
    supports_native_structured_output = True

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    async def call(self, prompt: Prompt) -> ChatResponse:
        key = repr(prompt)
        if key not in self.cache:
            started = time.perf_counter()
            response = await self.inner.call(prompt)
            self.cache[key] = (response, time.perf_counter() - started)
        response, seconds = self.cache[key]
        self.seconds += seconds
        self.calls += 1
        self.tokens += response.metadata.usage.total_tokens
        return response

    def reset(self) -> None:
        self.tokens, self.seconds, self.calls = 0, 0.0, 0


@dataclass
class Tally:
    """One judge's record over the items."""

    right: int = 0
    criteria: int = 0
    escalated: int = 0
    errors: int = 0
    strong_tokens: int = 0
    strong_seconds: float = 0.0
    strong_calls: int = 0
    seconds: float = 0.0
    decisions: list[tuple[bool, bool]] = field(default_factory=list)
    """(judged passed, verifier passed) per criterion."""

    def balanced_accuracy(self) -> float | None:
        """The mean of the rates on followed and on broken instructions (the truth is skewed)."""
        rates = []
        for side in (True, False):
            judged = [d for d, t in self.decisions if t is side]
            if judged:
                rates.append(sum(d is side for d in judged) / len(judged))
        return sum(rates) / len(rates) if rates else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "accuracy": self.right / self.criteria if self.criteria else None,
            "balanced_accuracy": self.balanced_accuracy(),
            "right": self.right,
            "criteria": self.criteria,
            "escalated": self.escalated,
            "escalated_share": self.escalated / self.criteria if self.criteria else None,
            "errors": self.errors,
            "strong_tokens": self.strong_tokens,
            "strong_seconds": self.strong_seconds,
            "strong_calls": self.strong_calls,
            "seconds": self.seconds,
        }


async def judge_all(
    items: Sequence[Item], make: Any, weak: Metered, strong: Metered, label: str
) -> Tally:
    tally = Tally()
    strong.reset()
    weak.reset()
    for number, item in enumerate(items, 1):
        judge: Judge = make(item.case)
        verdict = await judge.evaluate(JudgeInput(item.case.prompt, item.answer))
        for finding, truth in zip(verdict.findings, item.truth, strict=True):
            decided = finding.outcome is Outcome.PASSED
            tally.criteria += 1
            tally.right += decided == truth
            tally.escalated += finding.escalated
            tally.errors += finding.outcome is Outcome.ERROR
            tally.decisions.append((decided, truth))
        print(f"{label} {number}/{len(items)}", file=sys.stderr, flush=True)
    tally.seconds = weak.seconds + strong.seconds
    tally.strong_tokens, tally.strong_seconds, tally.strong_calls = (
        strong.tokens, strong.seconds, strong.calls)  # fmt: skip
    # As it goes: a long run that is stopped keeps the judges it finished.
    print(json.dumps({label: tally.to_dict()}), file=sys.stderr, flush=True)
    return tally


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from jevrefine.local import LocalModelServer

    items = load_items(args.n)
    weak_server = LocalModelServer(model=args.weak, threads=args.threads, ctx=args.ctx)
    strong_server = LocalModelServer(model=args.strong, threads=args.threads, ctx=args.ctx)
    results: dict[str, Any] = {"items": len(items), "criteria": sum(len(i.truth) for i in items)}
    results["truth_pass_share"] = sum(sum(i.truth) for i in items) / results["criteria"]
    async with (
        weak_server,
        strong_server,
        weak_server.openai_model() as w,
        strong_server.openai_model() as s,
    ):
        weak, strong = Metered(w), Metered(s)
        weak_client, strong_client = ModelJudgeClient(weak), ModelJudgeClient(strong)
        tallies = {
            "weak": await judge_all(
                items, lambda c: model_judge(c, weak_client), weak, strong, "weak"
            ),
            "strong": await judge_all(
                items, lambda c: model_judge(c, strong_client), weak, strong, "strong"
            ),
        }
        for below in args.below:

            def cascade(case: Case, below: float = below) -> Judge:
                plain = model_judge(case, weak_client)
                return Judge(
                    weak_client, plain.criteria, escalate_to=strong_client, escalate_below=below
                )

            tallies[f"cascade@{below}"] = await judge_all(
                items, cascade, weak, strong, f"cascade@{below}"
            )
    strong_tally = tallies["strong"]
    for name, tally in tallies.items():
        row = tally.to_dict()
        if name.startswith("cascade") and strong_tally.right:
            row["retained"] = tally.right / strong_tally.right
            strong_balanced = strong_tally.balanced_accuracy()
            if strong_balanced and row["balanced_accuracy"] is not None:
                row["retained_balanced"] = row["balanced_accuracy"] / strong_balanced
            row["strong_token_share"] = tally.strong_tokens / strong_tally.strong_tokens
            row["strong_seconds_share"] = tally.strong_seconds / strong_tally.strong_seconds
        results[name] = row
    return results


def markdown(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"## Judge escalation ({args.weak} -> {args.strong}, IFBench instructions)",
        "",
        f"`{args.command}`: {results['items']} recorded answers, {results['criteria']} "
        f"instructions; {results['truth_pass_share']:.0%} of them followed (verifiers). "
        "Balanced accuracy: the mean of the rates on followed and on broken instructions.",
        "",
        "| judge | accuracy | balanced accuracy | escalated | retained (of strong) "
        "| strong tokens (of strong) | strong seconds (of strong) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in results.items():
        if not isinstance(row, dict):
            continue
        escalated = _pct(row, "escalated_share") if name.startswith("cascade") else "–"
        lines.append(
            f"| {name} | {row['accuracy']:.1%} ({row['right']}/{row['criteria']}) "
            f"| {_pct(row, 'balanced_accuracy')} | {escalated} | {_pct(row, 'retained')} "
            f"| {_pct(row, 'strong_token_share')} | {_pct(row, 'strong_seconds_share')} |"
        )
    return "\n".join(lines) + "\n"


def _pct(row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    return "–" if value is None else f"{value:.0%}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 items")
    parser.add_argument("--n", type=int, default=None, help="answers to judge (default 40)")
    parser.add_argument(
        "--below", type=float, nargs="+", default=[DEFAULT_ESCALATE_BELOW],
        help="escalate_below values to measure",
    )  # fmt: skip
    parser.add_argument("--weak", choices=MODELS, default=WEAK, help="the first judge's model")
    parser.add_argument(
        "--strong", choices=MODELS, default=STRONG, help="the model unsure criteria go to"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=4096)
    args = parser.parse_args(argv)
    args.command = "python -m benchmarks.bench_escalation " + " ".join(argv or sys.argv[1:])
    if args.n is None:
        args.n = 6 if args.quick else 40
    results = anyio.run(run, args)
    emit(markdown(results, args), results)


if __name__ == "__main__":
    main()
