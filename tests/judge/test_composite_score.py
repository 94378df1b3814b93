"""`CompositeScore`: weighted, normalised scores, for ranking candidates that already passed.

Behaviour and defaults follow the seed library's docs/patterns/JevCompositeScore.md
(spring-ai-community/spring-ai-typesafe).
"""

from __future__ import annotations

import pytest

from jevrefine.exceptions import UserError
from jevrefine.jev import AnswerNotFoundError, JudgeClient, Score
from jevrefine.jev.responses import ScoreAnswer
from jevrefine.judge import CompositeScore
from jevrefine.testing import FakeJevServer


def _score(value: float, levels: int) -> ScoreAnswer:
    return ScoreAnswer(value, {i: f"level {i}" for i in range(levels)}, {})


def test_each_dimension_is_divided_by_its_rubrics_highest_level() -> None:
    """JevCompositeScore.md, Normalisation: divided by the rubric's own height (from the
    legend the response carries), so rubrics with different numbers of levels compare."""
    assert CompositeScore.normalise(_score(3.0, 4)) == 1.0
    assert CompositeScore.normalise(_score(1.5, 4)) == 0.5
    assert CompositeScore.normalise(_score(1.0, 2)) == 1.0


def test_an_answer_without_a_legend_is_rejected() -> None:
    """JevCompositeScore.md: an answer without a legend is rejected."""
    with pytest.raises(UserError, match="carries no legend"):
        CompositeScore.normalise(ScoreAnswer(1.0, {}, {}))


@pytest.mark.parametrize(
    "weights", [{"a": 0.5, "b": 0.4}, {"a": 0.6, "b": 0.6}, {"a": 1.0, "b": 0.1}]
)
def test_weights_must_sum_to_one(weights) -> None:
    """JevCompositeScore.md, Builder: weights that do not sum to 1 are refused unless you opt
    out (they are usually a typo)."""
    with pytest.raises(
        UserError, match=r"the weights sum to .*, not 1 .*allow_unnormalised_weights"
    ):
        CompositeScore(weights)
    assert CompositeScore(weights, allow_unnormalised_weights=True).weights == weights


def test_rounding_is_not_a_typo() -> None:
    assert CompositeScore({"a": 0.1, "b": 0.2, "c": 0.7}).weights["c"] == 0.7


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({}, "pass score question id -> weight"),
        ([("a", 1.0)], "pass score question id -> weight"),
        ({"a": -0.5, "b": 1.5}, r"weights\['a'\]=-0.5"),
        ({"a": float("nan")}, r"weights\['a'\]"),
        ({"a": 0.0}, "every weight is 0"),
        ({"": 1.0}, "a weight's name"),
    ],
)
def test_bad_weights_say_what_to_pass(weights, message) -> None:
    with pytest.raises(UserError, match=message):
        CompositeScore(weights, allow_unnormalised_weights=True)


LEVELS = ["none", "basic", "solid", "expert"]


async def test_one_set_of_answers_two_profiles_two_rankings() -> None:
    """JevCompositeScore.md: one call produces the answers; two weightings, two shortlists."""
    candidates = {
        "ada": {"python_depth": 3.0, "team_leadership": 0.5},
        "bob": {"python_depth": 1.0, "team_leadership": 3.0},
    }

    def answer(state, questions):
        return candidates[state["name"]]

    questions = {
        name: Score(f"{name}?", levels=LEVELS) for name in ("python_depth", "team_leadership")
    }
    async with FakeJevServer(answer) as server, JudgeClient("k", base_url=server.base_url) as jev:
        responses = {n: await jev.system_one({"name": n}, questions) for n in candidates}
    ic = CompositeScore({"python_depth": 0.8, "team_leadership": 0.2})
    manager = CompositeScore({"python_depth": 0.2, "team_leadership": 0.8})
    assert ic.of(responses["ada"]) == pytest.approx(0.8 * 1.0 + 0.2 * 0.5 / 3)
    assert sorted(candidates, key=lambda n: ic.of(responses[n]), reverse=True) == ["ada", "bob"]
    assert sorted(candidates, key=lambda n: manager.of(responses[n]), reverse=True) == [
        "bob",
        "ada",
    ]
    assert 0.0 <= manager.of(responses["bob"]) <= 1.0
    with pytest.raises(AnswerNotFoundError):
        CompositeScore({"generalist": 1.0}).of(responses["ada"])
    assert repr(ic) == "CompositeScore(python_depth=0.8, team_leadership=0.2)"
