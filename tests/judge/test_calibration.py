"""calibrate: a judge's agreement on known pairs, and when it is near chance (issue 32, 1)."""

from __future__ import annotations

import pytest

from jevrefine.jev import JudgeUsageError
from jevrefine.judge import CALIBRATION_PAIRS, Calibration, Judge, KnownPair, calibrate, check
from jevrefine.judge.calibration import wilson_interval


def _judge(passes: set[str]) -> Judge:
    return Judge(criteria=[check("known", lambda i: i.assistant_answer in passes, "wrong")])


def test_the_set_is_balanced_and_each_question_has_a_right_and_a_wrong_answer() -> None:
    assert len(CALIBRATION_PAIRS) == 12
    assert sum(p.good for p in CALIBRATION_PAIRS) == 6
    for question in {p.question for p in CALIBRATION_PAIRS}:
        assert sorted(p.good for p in CALIBRATION_PAIRS if p.question == question) == [
            False,
            True,
        ]


async def test_a_perfect_judge_tells_every_pair_apart() -> None:
    right = {p.answer for p in CALIBRATION_PAIRS if p.good}
    calibration = await calibrate(_judge(right))
    assert calibration == Calibration(12, 12, 0, 0)
    assert not calibration.near_chance
    assert calibration.summary() == "told 12 of 12 known pairs apart (95 % interval 76-100 %)"


async def test_a_judge_that_passes_everything_is_near_chance() -> None:
    calibration = await calibrate(_judge({p.answer for p in CALIBRATION_PAIRS}))
    assert (calibration.agreed, calibration.passed_bad, calibration.failed_good) == (6, 6, 0)
    assert calibration.near_chance
    assert calibration.summary().endswith(": passed 6 wrong answer(s)")


@pytest.mark.parametrize(("agreed", "near"), [(12, False), (10, False), (9, True), (6, True)])
def test_near_chance_is_the_interval_reaching_half(agreed: int, near: bool) -> None:
    calibration = Calibration(agreed, 12, 12 - agreed, 0)
    assert calibration.near_chance is near
    assert (wilson_interval(agreed, 12)[0] <= 0.5) is near


def test_the_wilson_interval_matches_its_formula() -> None:
    low, high = wilson_interval(9, 10)
    assert (round(low, 3), round(high, 3)) == (0.596, 0.982)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0)


async def test_bad_pairs_are_refused_before_any_judging() -> None:
    judge = _judge(set())
    for pairs in ([], "pairs", [("q", "a", True)]):
        with pytest.raises(JudgeUsageError, match="KnownPair"):
            await calibrate(judge, pairs)  # type: ignore[arg-type]
    with pytest.raises(JudgeUsageError, match="concurrency"):
        await calibrate(judge, [KnownPair("q", "a", True)], concurrency=0)
