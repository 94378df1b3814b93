"""Judge patterns: pairwise with the positions swapped, and consistency statistics."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import pytest

from jevrefine import UserError
from jevrefine.jev import (
    Choice,
    ChoiceAnswer,
    JudgeClient,
    JudgeConnectionError,
    Noul,
    NoulAnswer,
    Score,
    ScoreAnswer,
    SystemOneResponse,
)
from jevrefine.judge import consistency, pairwise
from jevrefine.judge.patterns import PAIRWISE_QUESTION_ID, SAMPLE_ID_KEY
from jevrefine.testing import FakeJevServer

QUESTION = "What is the capital of France?"


class PairJudge:
    """Prefers the answer containing 'Paris' with `skill`, and the first position with `bias`."""

    def __init__(self, skill: float, bias: float) -> None:
        self.skill = skill
        self.bias = bias
        self.states: list[Mapping[str, Any]] = []

    async def system_one(
        self, state: Mapping[str, Any], questions: Mapping[str, Any], **kwargs: Any
    ) -> SystemOneResponse:
        self.states.append(state)
        assert list(questions) == [PAIRWISE_QUESTION_ID]
        first_is_right = "Paris" in state["answer_1"]
        p_first = self.bias + (self.skill if first_is_right else -self.skill)
        p_first = min(1.0, max(0.0, p_first))
        label = "answer_1" if p_first >= 0.5 else "answer_2"
        probabilities = {"answer_1": p_first, "answer_2": 1 - p_first}
        return SystemOneResponse("m", {PAIRWISE_QUESTION_ID: ChoiceAnswer(label, probabilities)})


async def test_pairwise_asks_twice_with_the_positions_swapped() -> None:
    judge = PairJudge(skill=0.3, bias=0.5)
    result = await pairwise(judge, QUESTION, "Paris.", "Lyon.")
    assert result.winner == "a"
    assert result.agreement is True
    assert result.probability_a == pytest.approx(0.8)
    shown_first = sorted(s["answer_1"] for s in judge.states)
    assert shown_first == ["Lyon.", "Paris."]  # each answer was shown first once
    assert all(s["user_question"] == QUESTION for s in judge.states)
    assert result.a_first.choice == "answer_1"
    assert result.b_first.choice == "answer_2"
    flipped = await pairwise(judge, QUESTION, "Lyon.", "Paris.")
    assert flipped.winner == "b"
    assert flipped.probability_a == pytest.approx(0.2)


async def test_a_purely_position_biased_judge_disagrees_and_ties() -> None:
    judge = PairJudge(skill=0.0, bias=0.9)  # always prefers whatever it reads first
    result = await pairwise(judge, QUESTION, "Paris.", "Lyon.")
    assert result.agreement is False
    assert result.winner == "tie"
    assert result.probability_a == pytest.approx(0.5)


async def test_bias_is_cancelled_where_skill_outweighs_it() -> None:
    judge = PairJudge(skill=0.25, bias=0.7)  # Lyon shown first still gets 0.45: loses
    result = await pairwise(judge, QUESTION, "Lyon.", "Paris.")
    assert result.winner == "b"
    assert result.agreement is True
    biased = PairJudge(skill=0.15, bias=0.7)  # Lyon shown first wins that reading: 0.55
    split = await pairwise(biased, QUESTION, "Lyon.", "Paris.")
    assert split.agreement is False
    assert split.winner == "b"  # the mean still favours Paris: (0.55 + 0.15) / 2 < 0.5
    assert split.probability_a == pytest.approx(0.35)


async def test_pairwise_over_fake_jev_sends_the_criteria() -> None:
    def answer(state: dict[str, Any], questions: dict[str, Any]) -> dict[str, str]:
        return {PAIRWISE_QUESTION_ID: "answer_1" if "Paris" in state["answer_1"] else "answer_2"}

    async with FakeJevServer(answer) as server, JudgeClient("k", base_url=server.base_url) as jev:
        result = await pairwise(jev, QUESTION, "Lyon.", "Paris.", criteria="factually correct")
        sent = [r.json for r in server.requests]
    assert result.winner == "b"
    assert result.agreement
    assert len(sent) == 2
    question = sent[0]["questions"][PAIRWISE_QUESTION_ID]
    assert question["type"] == "choice"
    assert "factually correct" in question["instructions"]
    assert set(question["criteria"]) == {"answer_1", "answer_2"}


async def test_pairwise_checks_its_arguments() -> None:
    with pytest.raises(UserError):
        await pairwise(PairJudge(0, 0), QUESTION, "a", None)  # type: ignore[arg-type]


class Sampler:
    """Answers from scripted sequences, one value per call; a `None` entry fails the call."""

    def __init__(self, nouls: list[float | None], scores: list[float], labels: list[str]) -> None:
        self.nouls = iter(nouls)
        self.scores = iter(scores)
        self.labels = iter(labels)
        self.states: list[Mapping[str, Any]] = []

    async def system_one(
        self, state: Mapping[str, Any], questions: Mapping[str, Any], **kwargs: Any
    ) -> SystemOneResponse:
        self.states.append(state)
        value = next(self.nouls)
        score = next(self.scores)
        label = next(self.labels)
        if value is None:
            raise JudgeConnectionError("reset")
        other = "b" if label == "a" else "a"
        return SystemOneResponse(
            "m",
            {
                "grounded": NoulAnswer(value),
                "quality": ScoreAnswer(score, {}, {}),
                "tone": ChoiceAnswer(label, {label: 0.8, other: 0.2}),
            },
        )


QUESTIONS = {
    "grounded": Noul("Grounded?"),
    "quality": Score("Quality?", levels=["bad", "ok", "good"]),
    "tone": Choice("Tone?", options=["a", "b"]),
}


async def test_consistency_statistics_and_failures() -> None:
    nouls = [0.9, 0.6, None, 0.8, 0.7]
    sampler = Sampler(nouls, [2.0, 1.0, 0.0, 2.0, 1.5], ["a", "a", "b", "b", "a"])
    report = await consistency(sampler, {"answer": "x"}, QUESTIONS, samples=5, concurrency=1)
    assert report.samples == 5
    assert len(report.failures) == 1
    assert isinstance(report.failures[0].error, JudgeConnectionError)
    grounded = report.stats["grounded"]
    values = [0.9, 0.6, 0.8, 0.7]
    assert grounded.values == tuple(values)
    assert grounded.mean == pytest.approx(statistics.fmean(values))
    assert grounded.stdev == pytest.approx(statistics.pstdev(values))
    assert (grounded.min, grounded.max) == (0.6, 0.9)
    assert report.stats["quality"].values == (2.0, 1.0, 2.0, 1.5)
    tone = report.stats["tone"]
    assert tone.label == "a"  # chosen 3 times of the 4 answered
    assert tone.values == (0.8, 0.8, 0.2, 0.8)
    assert report.unstable_at(0.75) == ["grounded", "tone"]
    assert report.unstable_at(0.5) == ["tone"]
    assert report.unstable_at(0.95) == []


async def test_every_sample_gets_a_fresh_throwaway_id() -> None:
    sampler = Sampler([0.5] * 6, [1.0] * 6, ["a"] * 6)
    await consistency(sampler, {"answer": "x"}, QUESTIONS, samples=3)
    await consistency(sampler, "plain text state", QUESTIONS, samples=3)
    ids = [s[SAMPLE_ID_KEY] for s in sampler.states]
    assert len(set(ids)) == 6
    assert all(s["answer"] == "x" for s in sampler.states[:3])
    assert all(s["state"] == "plain text state" for s in sampler.states[3:])


async def test_consistency_over_fake_jev_with_bounded_concurrency() -> None:
    async with FakeJevServer() as server, JudgeClient("k", base_url=server.base_url) as jev:
        report = await consistency(jev, {"answer": "x"}, {"g": Noul("Grounded?")}, samples=6)
        states = [r.json["state"] for r in server.requests]
    assert len(states) == 6
    assert len({s[SAMPLE_ID_KEY] for s in states}) == 6
    stats = report.stats["g"]
    assert len(stats.values) == 6
    # The fake's default answer is a hash of the state: a fresh id per sample makes draws differ.
    assert stats.max > stats.min


async def test_all_samples_failing_is_reported_not_raised() -> None:
    sampler = Sampler([None, None], [1.0, 1.0], ["a", "a"])
    report = await consistency(sampler, {"answer": "x"}, QUESTIONS, samples=2)
    assert report.stats == {}
    assert len(report.failures) == 2
    assert report.unstable_at(0.5) == []


async def test_consistency_checks_its_arguments() -> None:
    sampler = Sampler([], [], [])
    with pytest.raises(UserError, match="samples"):
        await consistency(sampler, {}, QUESTIONS, samples=0)
    with pytest.raises(UserError, match=SAMPLE_ID_KEY):
        await consistency(sampler, {SAMPLE_ID_KEY: 1}, QUESTIONS, samples=1)


async def test_a_failing_reading_raises_its_own_error() -> None:
    class Down:
        async def system_one(self, *args: Any, **kwargs: Any) -> SystemOneResponse:
            raise JudgeConnectionError("down")

    with pytest.raises(JudgeConnectionError, match="down"):
        await pairwise(Down(), QUESTION, "a", "b")
