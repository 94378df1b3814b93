"""The evaluation harness's own cost per case, on FunctionModel at zero model latency.

Contenders, interleaved round by round in one process, each refining the same cases with the
same loop judge (the case's own assertions, `judge="asserts"`) against the same FunctionModel,
whose first answer to each case breaks a word-count assertion and whose retry passes:

- `refine loop alone`: `client.prompt(case).advisors(SelfRefineAdvisor(judge)).call()` for each
  case, one after another, with a judge of the case's checks — what a case's refinement costs
  with no evaluation around it;
- `evals.evaluate`: `evaluate(cases, client, concurrency=1)` — the same refinements, plus the
  harness: the oracle scoring every attempt, the result rows, the workers and the report
  (`to_dict()`).

Overhead = evaluate − loop alone, per case; target ≤ 5 % of the loop's time. A second, shorter
measurement gives the model 1 ms of latency and compares wall times. Both are measured
as this process's CPU time (the model answers at once, so CPU is all there is; on a shared
machine CPU time is also far steadier than wall time), wall time beside it. This is the worst
case: with any real model latency the share is far smaller.

    python -m benchmarks.bench_evals_overhead [--quick]
"""

from __future__ import annotations

import argparse
import platform
import statistics
from typing import Any

import anyio

import jevrefine as jr
from jevrefine import ChatClient
from jevrefine.advisors.self_refine import SelfRefineAdvisor
from jevrefine.evals import Case, evaluate
from jevrefine.evals._cases import Assertion
from jevrefine.evals._judge import asserts_judge
from jevrefine.messages import Prompt
from jevrefine.testing import FunctionModel

from ._harness import bar, emit, figure, interleaved, micros
from ._loop import SHIPPED_LOOP

CASES = 20
TARGET = 0.05
LATENCY = 0.001
"""The model latency of the second measurement (seconds): still far below any real model's."""


def make_cases(count: int) -> list[Case]:
    """Cases with three code assertions each: a word limit, a must-contain, a regex."""
    cases = []
    for i in range(count):
        assertions = (
            Assertion(0, "word-count", {"max": 4}),
            Assertion(1, "icontains", "paris"),
            Assertion(2, "not-icontains", "sorry"),
        )
        cases.append(
            Case(id=f"c{i}", input=f"Where is the Eiffel tower? ({i})", assertions=assertions)
        )
    return cases


def answer(prompt: Prompt) -> str:
    last = prompt.messages[-1]
    text = getattr(last, "text", "")
    return "In Paris." if "use at most" in text else "The Eiffel tower stands in Paris, France."


async def slow_answer(prompt: Prompt) -> str:
    await anyio.sleep(LATENCY)
    return answer(prompt)


async def measure(*, rounds: int, ops: int, latency: bool = False) -> dict[str, Any]:
    cases = make_cases(CASES)
    model = FunctionModel(slow_answer if latency else answer)
    client = ChatClient(model)

    async def loop_alone() -> None:
        # FunctionModel keeps every prompt it saw: dropped, so the garbage collector's work does
        # not grow round by round.
        model.prompts.clear()
        for case in cases:
            # A judge of the case's checks, built per case as the harness does (a judge kept
            # across rounds would answer the repeated answers from its memo).
            advisor = SelfRefineAdvisor(
                asserts_judge(case, None), max_repeat_attempts=2, strategy=SHIPPED_LOOP
            )
            assert isinstance(case.input, str)
            await client.prompt(case.input).advisors(advisor).call()

    async def harness() -> None:
        model.prompts.clear()
        report = await evaluate(cases, client, concurrency=1)
        report.to_dict()

    result = await interleaved(
        {"refine loop alone": loop_alone, "evals.evaluate": harness},
        rounds=rounds,
        ops_per_round=ops,
        warmup=5,
    )
    loop = [t / CASES for t in result["refine loop alone"].cpu_per_op]
    full = [t / CASES for t in result["evals.evaluate"].cpu_per_op]
    overhead = [f - b for f, b in zip(full, loop, strict=True)]
    shares = [o / b for o, b in zip(overhead, loop, strict=True)]
    return {
        "loop_per_case": loop,
        "evaluate_per_case": full,
        "loop_wall_per_case": [t / CASES for t in result["refine loop alone"].per_op],
        "evaluate_wall_per_case": [t / CASES for t in result["evals.evaluate"].per_op],
        "overhead_per_case": overhead,
        "share": statistics.median(shares),
        "share_min": min(shares),
        "share_max": max(shares),
    }


def report(data: dict[str, Any], *, rounds: int, ops: int) -> str:
    loop = statistics.median(data["loop_per_case"])
    full = statistics.median(data["evaluate_per_case"])
    over = statistics.median(data["overhead_per_case"])
    wall_loop = statistics.median(data["loop_wall_per_case"])
    wall_full = statistics.median(data["evaluate_wall_per_case"])
    verdict = "met" if data["share"] <= TARGET else "missed"
    return "\n".join(
        [
            "## Evaluation harness overhead per case (FunctionModel, zero model latency)",
            "",
            f"Python {platform.python_version()}, jevrefine {jr.__version__}; {CASES} cases of "
            f"3 code assertions, 2 attempts each; {rounds} interleaved rounds of {ops} batches; "
            "medians.",
            "",
            "| contender | CPU per case | wall per case |",
            "|---|---|---|",
            f"| refine loop alone | {micros(loop)} | {micros(wall_loop)} |",
            f"| evals.evaluate (loop + harness) | {micros(full)} | {micros(wall_full)} |",
            "",
            f"- harness overhead: **{micros(over)} CPU per case, {data['share']:.1%} of the "
            f"loop's** (per-round range {data['share_min']:.1%} – {data['share_max']:.1%}; target "
            f"≤ {TARGET:.0%}: {verdict})",
            f"- with a model answering after {LATENCY * 1e3:.0f} ms: the harness adds "
            f"{data['latency_share']:.1%} to a case's wall time",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    args = parser.parse_args(argv)
    rounds, ops = (5, 3) if args.quick else (31, 10)
    data = anyio.run(lambda: measure(rounds=rounds, ops=ops))
    slow = anyio.run(
        lambda: measure(rounds=max(3, rounds // 3), ops=max(2, ops // 3), latency=True)
    )
    walls = zip(slow["evaluate_wall_per_case"], slow["loop_wall_per_case"], strict=True)
    data["latency_share"] = statistics.median([(f - b) / b for f, b in walls])
    emit(
        report(data, rounds=rounds, ops=ops),
        {
            "rounds": rounds,
            "ops": ops,
            "cases": CASES,
            "cpu_per_case": {
                "refine loop alone": data["loop_per_case"],
                "evals.evaluate": data["evaluate_per_case"],
            },
            "overhead_per_case": data["overhead_per_case"],
            "overhead_share": data["share"],
            "latency_s": LATENCY,
            "overhead_share_with_latency": data["latency_share"],
            "target": TARGET,
            "skipped": {},
        },
        [
            figure(
                "evals_overhead",
                "Refine loop alone vs with the evaluation harness, per case (FunctionModel)",
                "µs of CPU per case",
                [
                    bar("refine loop alone", data["loop_per_case"], scale=1e6),
                    bar("evals.evaluate", data["evaluate_per_case"], scale=1e6),
                ],
            )
        ],
    )


if __name__ == "__main__":
    main()
