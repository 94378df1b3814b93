"""Can each local model judge? Its agreement on known right and wrong answers, per judge kind.

Every local model in turn serves (llama.cpp, 1 thread) and judges two sets of question/answer
pairs whose verdict nobody disputes: `CALIBRATION_PAIRS` (the 12 built-in pairs `jevrefine judge
--calibrate` uses) and `HOLDOUT_PAIRS` below (16 more, see there). Each pair is judged by
the judges the CLI can build on that model:

- `reference` — `reference_judge(model, constraint="grammar")`, the offline default: the model
  answers the question itself, then says whether the answer agrees (P(yes) >= 0.47);
- `rating` — `rating_judge(model)`, seed 003's 1-4 helpfulness rating, passing at 3;
- `asked` — one noul asked directly, "Does assistant_answer correctly answer user_question?"
  (the question the demo asked before).

Printed: per model and judge, pairs told apart of 28 (and per set), the 95 % Wilson interval,
P(yes) (or the expected rating) of the good and the bad answers, and seconds.

    python -m benchmarks.judge_calibration [--models smollm2-135m qwen2.5-coder-0.5b ...]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import anyio

from jevrefine.jev import Noul, NoulAnswer, ScoreAnswer
from jevrefine.judge import (
    CALIBRATION_PAIRS,
    Judge,
    KnownPair,
    ModelJudgeClient,
    noul,
    rating_judge,
    reference_judge,
)
from jevrefine.judge.calibration import wilson_interval
from jevrefine.local import KNOWN_MODELS, LocalModelServer

HOLDOUT_PAIRS = (
    KnownPair("What is 7 plus 8?", "7 plus 8 is 15.", True),
    KnownPair("What is 7 plus 8?", "7 plus 8 is 13.", False),
    KnownPair("Which planet is closest to the Sun?", "Mercury.", True),
    KnownPair(
        "Which planet is closest to the Sun?", "Venus is the closest planet to the Sun.", False
    ),
    KnownPair("Who wrote Romeo and Juliet?", "William Shakespeare wrote it.", True),
    KnownPair("Who wrote Romeo and Juliet?", "Charles Dickens.", False),
    KnownPair("What is the chemical symbol for gold?", "Au.", True),
    KnownPair("What is the chemical symbol for gold?", "The symbol for gold is Ag.", False),
    KnownPair("How many days are in a week?", "There are seven days in a week.", True),
    KnownPair("How many days are in a week?", "I enjoy long walks on the beach.", False),
    KnownPair(
        "Why do we have seasons on Earth?",
        "Because Earth's axis is tilted, so each hemisphere gets more direct sunlight for part "
        "of the year.",
        True,
    ),
    KnownPair(
        "Why do we have seasons on Earth?",
        "Because Earth is much closer to the Sun in summer than in winter.",
        False,
    ),
    KnownPair(
        "Why is the sky blue?",
        "Sunlight is scattered by the molecules of the air, and blue light the most.",
        True,
    ),
    KnownPair("Why is the sky blue?", "Because the sky reflects the blue of the oceans.", False),
    KnownPair("What is 7 plus 8?", "15.", True),
    KnownPair("What is 7 plus 8?", "It is a number.", False),
)
"""The second set: the first 12 were judged only after the prompt was chosen on the calibration
pairs; the last 4 (a restatement among them) came with the rewording that catches restatements."""

ASKED = Noul(
    "Does assistant_answer correctly answer user_question?",
    when_true="It answers what was asked, and what it says is right",
    when_false="It does not answer what was asked, or what it says is wrong",
)


def _judges(model: Any) -> dict[str, Judge]:
    return {
        "reference": reference_judge(model, constraint="grammar"),
        "rating": rating_judge(model),
        "asked": Judge(ModelJudgeClient(model, constraint="grammar"), [noul("correct", ASKED)]),
    }


def _value(answer: object) -> float:
    if isinstance(answer, NoulAnswer):
        return answer.noul
    assert isinstance(answer, ScoreAnswer)
    return answer.score + 1  # the 1-4 rating's expected value


async def _measure(name: str) -> list[str]:
    rows = []
    server = LocalModelServer(name, threads=1, ctx=4096)
    async with server, server.openai_model() as model:
        for kind, judge in _judges(model).items():
            started = time.perf_counter()
            agreed: dict[str, int] = {}
            good: list[float] = []
            bad: list[float] = []
            for label, pairs in (
                ("calibration", CALIBRATION_PAIRS),
                ("holdout", HOLDOUT_PAIRS),
            ):
                agreed[label] = 0
                for pair in pairs:
                    verdict = await judge.evaluate(pair.judge_input())
                    agreed[label] += verdict.passed == pair.good
                    (good if pair.good else bad).append(_value(verdict.findings[0].answer))
            seconds = time.perf_counter() - started
            total = sum(agreed.values())
            count = len(CALIBRATION_PAIRS) + len(HOLDOUT_PAIRS)
            low, high = wilson_interval(total, count)
            rows.append(
                f"| {name} | {kind} | {total}/{count} ({agreed['calibration']} + "
                f"{agreed['holdout']}) | {round(low * 100)}-{round(high * 100)} % | "
                f"{min(good):.2f}-{max(good):.2f} | {min(bad):.2f}-{max(bad):.2f} | "
                f"{seconds:.0f} |"
            )
            print(rows[-1], flush=True)
    return rows


async def main(models: list[str]) -> None:
    """Measure each model; print the table."""
    header = [
        "| model | judge | told apart (calibration + holdout) | 95 % interval | good answers "
        "| bad answers | s |",
        "|---|---|---|---|---|---|---:|",
    ]
    print("\n".join(header), flush=True)
    for name in models:
        await _measure(name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(KNOWN_MODELS), choices=KNOWN_MODELS)
    anyio.run(main, parser.parse_args().models)
