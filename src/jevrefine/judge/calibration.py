"""Does this judge tell right from wrong? Its agreement on a small set of known answers.

```python
from jevrefine.judge import calibrate, rating_judge

calibration = await calibrate(rating_judge(judge_model))
print(calibration.summary())   # told 11 of 12 known pairs apart (95 % interval 65-99 %)
if calibration.near_chance:
    print("WARNING: this judge's verdicts are no better than a coin on known answers")
```

`CALIBRATION_PAIRS` holds twelve short question/answer pairs whose verdict nobody disputes: six
correct answers and six wrong ones (a wrong number, an irrelevant reply, a wrong fact, an
answer that only restates the question), each question once with a right answer and once
with a wrong one, so a judge cannot score well by passing (or failing) everything, or by
reading the question alone. `calibrate` judges every pair with the judge as given and counts
the verdicts that match.

A judge is **near chance** when the 95 % Wilson interval of its accuracy reaches down to 50 %:
on twelve pairs, fewer than 10 right. A judge that passes every answer is right on half the
pairs exactly, and is near chance. Twelve pairs keep the check fast (one judging call per pair)
at the price of a wide interval: it catches a judge that cannot discriminate, not a small
difference between two good ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import anyio

from .. import _validate
from ..jev.errors import JudgeUsageError
from ._input import JudgeInput

if TYPE_CHECKING:
    from ._judge import Judge

__all__ = ["CALIBRATION_PAIRS", "Calibration", "KnownPair", "calibrate", "wilson_interval"]


@dataclass(frozen=True, slots=True)
class KnownPair:
    """A question, an answer to it, and whether a judge should pass that answer."""

    question: str
    """What the user asked."""
    answer: str
    """The answer to judge."""
    good: bool
    """True: a correct, helpful answer that should pass; False: one that should fail."""

    def judge_input(self) -> JudgeInput:
        """The pair as the judge reads it (`user: ...` as in a refined request)."""
        return JudgeInput(f"user: {self.question}", self.answer)


CALIBRATION_PAIRS: Final[tuple[KnownPair, ...]] = (
    KnownPair("What is 12 times 12?", "12 times 12 equals 144.", True),
    KnownPair("What is 12 times 12?", "120.", False),
    KnownPair("What is the capital of France?", "Paris.", True),
    KnownPair("What is the capital of France?", "I like turtles.", False),
    KnownPair("How many legs does a spider have?", "A spider has eight legs.", True),
    KnownPair("How many legs does a spider have?", "Spiders have six legs.", False),
    KnownPair(
        "At what temperature does water boil at sea level, in Celsius?",
        "Water boils at 100 °C at sea level.",
        True,
    ),
    KnownPair(
        "At what temperature does water boil at sea level, in Celsius?",
        "Water boils at 50 °C at sea level.",
        False,
    ),
    KnownPair("Translate 'thank you' into French.", "Merci.", True),
    KnownPair("Translate 'thank you' into French.", "Bonjour.", False),
    KnownPair(
        "Why is the sky blue?",
        "Air molecules scatter blue sunlight much more than red, so blue light reaches us "
        "from every part of the sky.",
        True,
    ),
    KnownPair("Why is the sky blue?", "The sky is blue.", False),
)
"""The built-in set: six good answers and six bad ones, each question once of each."""

_Z95: Final = 1.959963984540054
"""The two-sided 95 % normal quantile."""


def wilson_interval(successes: int, total: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion `successes / total` (0 to 1 each end)."""
    if total <= 0:
        return (0.0, 1.0)
    p = successes / total
    z2 = _Z95 * _Z95
    centre = (p + z2 / (2 * total)) / (1 + z2 / total)
    half = _Z95 * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True, slots=True)
class Calibration:
    """How a judge did on known pairs."""

    agreed: int
    """Pairs whose verdict matched what is known."""
    total: int
    """Pairs judged."""
    passed_bad: int = 0
    """Bad answers the judge passed."""
    failed_good: int = 0
    """Good answers the judge failed."""

    @property
    def accuracy(self) -> float:
        """`agreed / total`."""
        return self.agreed / self.total if self.total else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        """The 95 % Wilson interval of the accuracy."""
        return wilson_interval(self.agreed, self.total)

    @property
    def near_chance(self) -> bool:
        """Whether the accuracy's 95 % interval reaches 50 % (a coin, as far as the set tells)."""
        return self.interval[0] <= 0.5

    def summary(self) -> str:
        """`told 11 of 12 known pairs apart (95 % interval 65-99 %)`, plus what went wrong."""
        low, high = self.interval
        text = (
            f"told {self.agreed} of {self.total} known pairs apart "
            f"(95 % interval {round(low * 100)}-{round(high * 100)} %)"
        )
        wrong = []
        if self.passed_bad:
            wrong.append(f"passed {self.passed_bad} wrong answer(s)")
        if self.failed_good:
            wrong.append(f"failed {self.failed_good} right answer(s)")
        return text + (f": {', '.join(wrong)}" if wrong else "")


async def calibrate(
    judge: Judge, pairs: Sequence[KnownPair] = CALIBRATION_PAIRS, *, concurrency: int = 4
) -> Calibration:
    """Judge every pair with `judge`; how many verdicts match what is known.

    Each pair is one `judge.evaluate` (one judging call), at most `concurrency` at once. The
    judge is used as given: its criteria decide, so calibrate the judge you run with.

    Raises:
        JudgeUsageError: `pairs` is empty or holds something other than `KnownPair`s.
        JudgeError: a judging call failed (nothing is counted then).
    """
    concurrency = _validate.integer(
        "concurrency", concurrency, minimum=1, example=4, error=JudgeUsageError
    )
    known = tuple(pairs) if isinstance(pairs, Sequence) and not isinstance(pairs, str) else ()
    if not known or not all(isinstance(p, KnownPair) for p in known):
        raise JudgeUsageError(
            "calibrate needs a non-empty list of KnownPair(question, answer, good): pass "
            "CALIBRATION_PAIRS or your own"
        )
    passed: dict[int, bool] = {}
    limiter = anyio.CapacityLimiter(concurrency)

    async def judge_one(index: int, pair: KnownPair) -> None:
        async with limiter:
            passed[index] = (await judge.evaluate(pair.judge_input())).passed

    async with anyio.create_task_group() as group:
        for index, pair in enumerate(known):
            group.start_soon(judge_one, index, pair)
    passed_bad = sum(1 for i, p in enumerate(known) if not p.good and passed[i])
    failed_good = sum(1 for i, p in enumerate(known) if p.good and not passed[i])
    agreed = len(known) - passed_bad - failed_good
    return Calibration(agreed, len(known), passed_bad, failed_good)
