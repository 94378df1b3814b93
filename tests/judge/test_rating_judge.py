"""rating_judge (seed 003): the 1-4 scale as the seed shows it, and the judge's written feedback."""

from __future__ import annotations

import json
import math

import pytest

from jevrefine import ChatClient, SelfRefineAdvisor
from jevrefine.jev import JudgeUsageError, Score, ScoreAnswer
from jevrefine.judge import JudgeInput, ModelJudgeClient, rating_judge
from jevrefine.judge._judge import RATING_LEVELS
from jevrefine.messages import (
    AssistantMessage,
    ChatResponse,
    Generation,
    Prompt,
    TokenLogprob,
)
from jevrefine.testing import FunctionModel

INPUT = JudgeInput("user: Weather in Paris?", "It is 15 °C and sunny in Paris.")
FEEDBACK_SENTENCE = "Say which source the temperature comes from."


def allowed(prompt: Prompt) -> list[str]:
    fmt = prompt.options.response_format
    assert fmt is not None
    return list(fmt.schema["properties"]["answer"]["enum"])


def rating(value: str) -> str:
    return json.dumps({"answer": value})


async def test_the_judge_model_is_shown_the_seed_scale_and_answers_one_to_four() -> None:
    judge_model = FunctionModel(lambda prompt: rating("4"))
    judge = rating_judge(judge_model, success_rating=4)
    verdict = await judge.evaluate(INPUT)

    assert verdict.passed  # 4 means Excellent, as in the seed: it meets success_rating=4
    (prompt,) = judge_model.prompts
    assert allowed(prompt) == ["1", "2", "3", "4"]
    text = prompt.messages[-1].text
    lines = text.splitlines()
    # Each level shown once, as written: "1 - Unhelpful: ...", never "0: 1 - Unhelpful: ...".
    for level in RATING_LEVELS:
        assert level in lines
    assert not any(line.startswith(("0:", "0 ")) for line in lines)
    assert "1 is the lowest" in text
    answer = verdict.findings[0].answer
    assert isinstance(answer, ScoreAnswer)
    assert answer.level == 3  # Jev's level index: rating - 1
    assert answer.legend[3].startswith("4 - Excellent")


@pytest.mark.parametrize(
    ("answered", "success_rating", "passes"),
    [("3", 3, True), ("2", 3, False), ("4", 4, True), ("3", 4, False), ("1", 1, True)],
)
async def test_the_rating_answered_is_the_rating_held_against_success_rating(
    answered: str, success_rating: int, passes: bool
) -> None:
    judge = rating_judge(
        FunctionModel(lambda prompt: rating(answered)), success_rating=success_rating
    )
    verdict = await judge.evaluate(INPUT)
    assert verdict.passed is passes
    answer = verdict.findings[0].answer
    assert isinstance(answer, ScoreAnswer)
    assert answer.level == int(answered) - 1


async def test_rating_log_probabilities_map_to_the_levels() -> None:
    def answer(prompt: Prompt) -> ChatResponse:
        tokens = ["{", '"', "answer", '":', ' "', "4", '"}']
        logprobs = [TokenLogprob(t, -0.1, ((t, -0.1),)) for t in tokens]
        top = (("4", math.log(0.7)), ("3", math.log(0.2)), ("1", math.log(0.1)))
        logprobs[5] = TokenLogprob("4", math.log(0.7), top)
        text = "".join(tokens)
        return ChatResponse((Generation(AssistantMessage(text), {"logprobs": logprobs}),))

    client = ModelJudgeClient(FunctionModel(answer), score_starts_at=1)
    response = await client.system_one("s", {"r": Score("Rate it", levels=list(RATING_LEVELS))})
    scored = response.score("r")
    assert scored.probabilities == pytest.approx({0: 0.1, 1: 0.0, 2: 0.2, 3: 0.7})
    assert scored.score == pytest.approx(2 * 0.2 + 3 * 0.7)
    assert scored.calibrated


async def test_unnumbered_levels_get_their_number_from_score_starts_at() -> None:
    judge_model = FunctionModel(lambda prompt: rating("2"))
    client = ModelJudgeClient(judge_model, score_starts_at=1, logprobs=False)
    response = await client.system_one("s", {"r": Score("How bad?", levels=["Calm", "Angry"])})
    assert response.score("r").level == 1
    text = judge_model.prompts[0].messages[-1].text
    assert "1: Calm" in text.splitlines()
    assert "2: Angry" in text.splitlines()
    # The default stays Jev's 0-based index.
    zero_based = FunctionModel(lambda prompt: rating("0"))
    await ModelJudgeClient(zero_based).system_one("s", {"r": Score("How bad?", ["Calm", "Angry"])})
    assert allowed(zero_based.prompts[0]) == ["0", "1"]


@pytest.mark.parametrize("bad", [2, -1, True, "1", 1.0])
def test_score_starts_at_is_zero_or_one(bad: object) -> None:
    with pytest.raises(JudgeUsageError, match="score_starts_at"):
        ModelJudgeClient(FunctionModel(lambda p: "x"), score_starts_at=bad)  # type: ignore[arg-type]


def test_success_rating_and_explain_failures_are_checked() -> None:
    model = FunctionModel(lambda p: "x")
    for bad in (0, 5, True, 3.0):
        with pytest.raises(JudgeUsageError, match="success_rating"):
            rating_judge(model, success_rating=bad)  # type: ignore[arg-type]
    with pytest.raises(JudgeUsageError, match="explain_failures"):
        rating_judge(model, explain_failures="yes")  # type: ignore[arg-type]


def scripted_judge(ratings: dict[str, str], requests: list[str]) -> FunctionModel:
    """Rates an answer by its text; a feedback request (no schema) gets one sentence."""

    def answer(prompt: Prompt) -> str:
        if prompt.options.response_format is None:
            requests.append("feedback")
            return FEEDBACK_SENTENCE
        requests.append("rating")
        state = prompt.messages[-1].text.split("State:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        return rating(ratings[json.loads(state)["assistant_answer"]])

    return FunctionModel(answer)


async def test_explain_failures_puts_the_judge_models_feedback_in_the_retry() -> None:
    requests: list[str] = []
    judge_model = scripted_judge({"It is warm.": "2", "It is 15 °C (Météo-France).": "4"}, requests)
    judge = rating_judge(judge_model, success_rating=3, explain_failures=True)
    drafts = iter(["It is warm.", "It is 15 °C (Météo-France)."])
    model = FunctionModel(lambda prompt: next(drafts))
    client = ChatClient(model, advisors=[SelfRefineAdvisor(judge)])
    answer = await client.prompt("Weather in Paris?").content()

    assert answer == "It is 15 °C (Météo-France)."
    # A feedback request only for the failed rating, none once the answer passes.
    assert requests == ["rating", "feedback", "rating"]
    retry = model.prompts[1].messages[-1].text
    assert FEEDBACK_SENTENCE in retry


async def test_without_explain_failures_no_feedback_request_is_made() -> None:
    requests: list[str] = []
    judge = rating_judge(scripted_judge({INPUT.assistant_answer: "1"}, requests))
    verdict = await judge.evaluate(INPUT)
    assert not verdict.passed
    assert requests == ["rating"]
    assert FEEDBACK_SENTENCE not in verdict.feedback


def _rated(distribution: dict[str, float]):  # type: ignore[no-untyped-def]
    """A judge model whose rating token carries `distribution` (rating -> probability)."""

    def answer(prompt: Prompt) -> ChatResponse:
        best = max(distribution, key=lambda r: distribution[r])
        tokens = ["{", '"', "answer", '":', ' "', best, '"}']
        logprobs = [TokenLogprob(t, -0.1, ((t, -0.1),)) for t in tokens]
        top = tuple((r, math.log(p)) for r, p in distribution.items())
        logprobs[5] = TokenLogprob(best, math.log(distribution[best]), top)
        return ChatResponse(
            [Generation(AssistantMessage("".join(tokens)), metadata={"logprobs": logprobs})]
        )

    return FunctionModel(answer)


@pytest.mark.parametrize(
    ("distribution", "success_rating", "passes"),
    [
        # Rated 2 with 0.45, yet 0.55 of the mass at 3 or above: seed 003 fails a 2 at 3.
        ({"2": 0.45, "3": 0.30, "4": 0.25}, 3, False),
        # Rated 4 with 0.45, only 0.45 of the mass at 4: seed 003 passes a 4 at 4.
        ({"4": 0.45, "1": 0.30, "2": 0.25}, 4, True),
        ({"3": 0.5, "2": 0.5}, 3, False),  # a tie goes to the lower rating (deterministic)
    ],
)
async def test_the_verdict_is_the_rating_reaching_success_rating_whatever_the_mass(
    distribution: dict[str, float], success_rating: int, passes: bool
) -> None:
    """Promise (issue 31): rating_judge passes exactly when the rating reaches success_rating
    (seed 003: `rating >= successRating`); the probabilities only pick the rating."""
    judge = rating_judge(_rated(distribution), success_rating=success_rating)
    verdict = await judge.evaluate(INPUT)
    assert verdict.passed is passes
    (finding,) = verdict.findings
    answer = finding.answer
    assert isinstance(answer, ScoreAnswer)
    assert (answer.level + 1 >= success_rating) is passes


async def test_a_failed_rating_speaks_in_the_one_to_four_numbers_and_never_contradicts() -> None:
    """Promise (issue 32, 9): the feedback names the rating reached and the one needed in the
    scale's own 1-4 numbers, not Jev's 0-based level index."""
    judge = rating_judge(_rated({"1": 0.5, "2": 0.3, "3": 0.2}), success_rating=3)
    verdict = await judge.evaluate(INPUT)
    (finding,) = verdict.failures()
    detail = finding.detail
    assert detail.startswith("helpfulness: reached '1 - Unhelpful")
    assert "(rating 1.70)" in detail  # 1 * 0.5 + 2 * 0.3 + 3 * 0.2
    assert "needed '3 - Helpful" in detail
    assert "minimum 3.00" in detail
    assert "score 0." not in detail
    assert "minimum 2.00" not in detail
    assert verdict.feedback == f"- {detail}"
