"""Judge: criteria, outcomes, details, one call, code checks, dependencies, JudgeInput state."""

from __future__ import annotations

from typing import Any

import pytest

from jevrefine.jev import (
    Choice,
    JudgeClient,
    JudgeResponseError,
    JudgeUsageError,
    Noul,
    NoulAnswer,
    Score,
    ScoreAnswer,
    SystemOneResponse,
)
from jevrefine.judge import (
    Finding,
    Judge,
    JudgeInput,
    Outcome,
    Verdict,
    check,
    choice,
    noul,
    rating_judge,
    score,
)
from jevrefine.testing import FakeJevServer, FunctionModel

GROUNDED = Noul(
    "Is every value in `assistant_answer` supported by `tool_calls`?",
    when_false="States a value no tool returned",
)
HELPFUL = Score("How helpful is the answer?", levels=["useless", "weak", "good", "excellent"])
TONE = Choice("What is the tone?", options={"polite": None, "neutral": None, "rude": None})
INPUT = JudgeInput("user: Weather in Paris?", "It is 15 °C and sunny in Paris.")


class Scripted:
    """A SystemOneClient answering from a dict of ready answers; records each call."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[Any, dict[str, Any]]] = []

    async def system_one(
        self,
        state: Any,
        questions: Any,
        *,
        model: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> SystemOneResponse:
        self.calls.append((state, dict(questions)))
        return SystemOneResponse(
            "scripted", {k: v for k, v in self.answers.items() if k in questions}
        )


def noul_score_answer(probabilities: dict[int, float], levels: int = 4) -> ScoreAnswer:
    value = sum(k * p for k, p in probabilities.items())
    return ScoreAnswer(value, {i: f"level {i}" for i in range(levels)}, probabilities)


# -- JudgeInput ------------------------------------------------------------------------------


def test_judge_input_state_keeps_the_order_and_leaves_out_empty_fields() -> None:
    full = JudgeInput(
        "user: q",
        "a",
        expected_output="ref",
        supporting_context=["doc one", "doc two"],
        tool_calls=[{"name": "weather", "arguments": {"location": "Paris"}, "result": "15"}],
        extra={"locale": "fr"},
    )
    assert list(full.state()) == [
        "user_question",
        "assistant_answer",
        "expected_output",
        "supporting_context",
        "tool_calls",
        "locale",
    ]
    assert full.state()["supporting_context"] == ["doc one", "doc two"]
    assert full.state()["tool_calls"] == [
        {"name": "weather", "arguments": {"location": "Paris"}, "result": "15"}
    ]
    assert list(INPUT.state()) == ["user_question", "assistant_answer"]


def test_judge_input_refuses_extra_fields_that_replace_standard_ones() -> None:
    with pytest.raises(JudgeUsageError, match="tool_calls"):
        JudgeInput("q", "a", extra={"tool_calls": []})


# -- building --------------------------------------------------------------------------------


def test_criteria_are_checked_when_built() -> None:
    with pytest.raises(JudgeUsageError, match=r"noul\('g'\): minimum=1.5 must be at most 1"):
        noul("g", GROUNDED, minimum=1.5)
    with pytest.raises(JudgeUsageError, match=r"score\('h'\): minimum=4 must be at most 3"):
        score("h", HELPFUL, minimum=4)
    with pytest.raises(JudgeUsageError, match=r"minimum='0.5' is not a number"):
        noul("g", GROUNDED, minimum="0.5")  # type: ignore[arg-type]
    with pytest.raises(JudgeUsageError, match=r"name=' ' is blank"):
        noul(" ", GROUNDED)
    with pytest.raises(JudgeUsageError, match=r"\['cheerful'\]"):
        choice("t", TONE, accept=["cheerful"])
    with pytest.raises(JudgeUsageError, match="defect"):
        check("c", lambda i: True, defect="")


def test_judge_checks_names_questions_and_dependencies() -> None:
    client = Scripted({})
    with pytest.raises(JudgeUsageError, match="two criteria are named 'g'"):
        Judge(client, [noul("g", GROUNDED), noul("g", GROUNDED)])
    with pytest.raises(JudgeUsageError, match="point backwards"):
        Judge(client, [noul("a", GROUNDED, when_passed="b"), noul("b", GROUNDED)])
    with pytest.raises(JudgeUsageError, match="earlier choice"):
        Judge(client, [noul("a", GROUNDED), noul("b", GROUNDED, when_chosen=("a", ["x"]))])
    with pytest.raises(JudgeUsageError, match="SystemOneClient"):
        Judge(object(), [noul("a", GROUNDED)])  # type: ignore[arg-type]


# -- outcomes and details --------------------------------------------------------------------


async def test_noul_passes_at_the_minimum_and_fails_below_with_its_when_false_text() -> None:
    judge = Judge(Scripted({"g": NoulAnswer(0.7)}), [noul("g", GROUNDED, minimum=0.7)])
    assert (await judge.evaluate(INPUT)).passed
    judge = Judge(Scripted({"g": NoulAnswer(0.31)}), [noul("g", GROUNDED, minimum=0.7)])
    verdict = await judge.evaluate(INPUT)
    assert not verdict.passed
    (finding,) = verdict.failures()
    assert finding.outcome is Outcome.FAILED
    assert finding.detail.startswith("g: States a value no tool returned")
    assert "0.31" in finding.detail
    assert "0.70" in finding.detail
    assert verdict.feedback == f"- {finding.detail}"


async def test_noul_without_when_false_names_the_question() -> None:
    question = Noul("Is the answer polite?")
    judge = Judge(Scripted({"p": NoulAnswer(0.1)}), [noul("p", question, minimum=0.5)])
    assert "Is the answer polite?" in (await judge.evaluate(INPUT)).failures()[0].detail


async def test_score_passes_on_half_the_mass_at_or_above_the_needed_level() -> None:
    # Expected level 1.8 is below 2, yet 0.6 of the mass is on levels >= 2: it passes.
    answer = noul_score_answer({0: 0.4, 2: 0.0, 3: 0.6})
    judge = Judge(Scripted({"h": answer}), [score("h", HELPFUL, minimum=2)])
    assert (await judge.evaluate(INPUT)).passed
    # 0.45 at or above level 2: fails; the detail names the level reached and the one needed.
    answer = noul_score_answer({1: 0.55, 2: 0.45})
    judge = Judge(Scripted({"h": answer}), [score("h", HELPFUL, minimum=1.5)])
    verdict = await judge.evaluate(INPUT)
    detail = verdict.failures()[0].detail
    assert detail.startswith("h: reached level 1 'level 1'")
    assert "needed level 2 'good'" in detail
    assert "minimum 1.50" in detail
    assert "0.45" in detail


async def test_a_failed_score_never_reads_as_reaching_the_level_it_needed() -> None:
    """Promise (issue 31): the detail agrees with the outcome. The most likely level may reach
    the bar while the mass rule fails it; the text then says the mass fell short, not "reached
    level 3, needed level 3"."""
    answer = noul_score_answer({3: 0.45, 0: 0.3, 1: 0.25})
    judge = Judge(Scripted({"h": answer}), [score("h", HELPFUL, minimum=3)])
    detail = (await judge.evaluate(INPUT)).failures()[0].detail
    assert detail.startswith("h: reached level 3 'level 3'")
    assert "but only 0.45 of the probability is at or above level 3 'excellent'" in detail
    assert "needed level" not in detail
    # Without probabilities: 1.9 rounds to level 2, yet it is below the minimum 2.
    unsure = Judge(Scripted({"h": ScoreAnswer(1.9, {}, {})}), [score("h", HELPFUL, minimum=2)])
    detail = (await unsure.evaluate(INPUT)).failures()[0].detail
    assert detail == "h: reached level 2 'good' (score 1.90), below the minimum 2.00"


async def test_a_score_decided_by_level_follows_the_most_likely_level() -> None:
    passing = noul_score_answer({2: 0.4, 0: 0.35, 1: 0.25})  # 0.4 at or above 2: mass fails
    by_level = [score("h", HELPFUL, minimum=2, decide_by="level")]
    assert (await Judge(Scripted({"h": passing}), by_level).evaluate(INPUT)).passed
    failing = noul_score_answer({1: 0.4, 2: 0.3, 3: 0.3})  # 0.6 at or above 2: mass passes
    assert not (await Judge(Scripted({"h": failing}), by_level).evaluate(INPUT)).passed
    with pytest.raises(JudgeUsageError, match="decide_by"):
        score("h", HELPFUL, minimum=2, decide_by="median")  # type: ignore[arg-type]


async def test_score_without_probabilities_compares_the_score() -> None:
    answer = ScoreAnswer(2.0, {}, {})
    judge = Judge(Scripted({"h": answer}), [score("h", HELPFUL, minimum=2)])
    assert (await judge.evaluate(INPUT)).passed
    judge = Judge(Scripted({"h": ScoreAnswer(1.9, {}, {})}), [score("h", HELPFUL, minimum=2)])
    assert not (await judge.evaluate(INPUT)).passed


async def test_choice_passes_on_accepted_mass_even_when_the_argmax_is_elsewhere() -> None:
    from jevrefine.jev import ChoiceAnswer

    answer = ChoiceAnswer("rude", {"polite": 0.3, "neutral": 0.3, "rude": 0.4})
    judge = Judge(Scripted({"t": answer}), [choice("t", TONE, accept=["polite", "neutral"])])
    assert (await judge.evaluate(INPUT)).passed
    judge = Judge(Scripted({"t": answer}), [choice("t", TONE, accept=["polite"])])
    detail = (await judge.evaluate(INPUT)).failures()[0].detail
    assert "0.70 of the probability is outside the accepted labels [polite]" in detail
    assert "'rude'" in detail


async def test_min_confidence_makes_split_answers_inconclusive_but_not_nouls() -> None:
    from jevrefine.jev import ChoiceAnswer

    split = ChoiceAnswer("polite", {"polite": 0.55, "neutral": 0.25, "rude": 0.2})
    client = Scripted({"t": split, "g": NoulAnswer(0.51)})
    criteria = [choice("t", TONE, accept=["polite"]), noul("g", GROUNDED, minimum=0.5)]
    verdict = await Judge(client, criteria, min_confidence=0.7).evaluate(INPUT)
    assert [f.outcome for f in verdict.findings] == [Outcome.INCONCLUSIVE, Outcome.PASSED]
    assert verdict.passed  # inconclusive does not fail by default
    assert "min_confidence 0.70" in verdict.inconclusive()[0].detail
    strict = Judge(client, criteria, min_confidence=0.7, fail_on_inconclusive=True)
    verdict = await strict.evaluate(INPUT)
    assert not verdict.passed
    assert verdict.feedback.startswith("Not sure about these either:")


async def test_a_missing_answer_is_a_response_error_never_a_verdict() -> None:
    client = Scripted({"g": NoulAnswer(0.9)})  # no answer for "h"
    criteria = [noul("g", GROUNDED), score("h", HELPFUL, minimum=1)]
    for fail_fast in (True, False):  # not a finding at all, whatever the options
        judge = Judge(client, criteria, fail_fast=fail_fast)
        with pytest.raises(JudgeResponseError, match=r"'answers\.h'") as caught:
            await judge.evaluate(INPUT)
        assert caught.value.field_path == "answers.h"
        assert not caught.value.is_transient


# -- one call, checks first -------------------------------------------------------------------


async def test_all_questions_go_out_in_one_call_and_checks_are_never_sent(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"g": 0.9, "h": 3.0, "t": "polite"}
    seen: list[JudgeInput] = []

    def short(judge_input: JudgeInput) -> bool:
        seen.append(judge_input)
        return True

    criteria = [
        check("short", short, defect="too long"),
        noul("g", GROUNDED),
        score("h", HELPFUL, minimum=2),
        choice("t", TONE, accept=["polite"]),
    ]
    verdict = await Judge(jev, criteria).evaluate(INPUT)
    assert verdict.passed
    assert seen == [INPUT]
    assert len(jev_server.requests) == 1
    body = jev_server.requests[0].json
    assert list(body["questions"]) == ["g", "h", "t"]
    assert body["state"] == INPUT.state()
    assert verdict.summary() == "passed=true [short=PASSED, g=PASSED, h=PASSED, t=PASSED]"
    assert verdict.response is not None
    assert verdict.response.request_id is not None


async def test_a_failed_check_with_fail_fast_skips_the_call(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    criteria = [
        check("mentions_paris", lambda i: False, defect="Does not name the city"),
        noul("g", GROUNDED),
    ]
    verdict = await Judge(jev, criteria, fail_fast=True).evaluate(INPUT)
    assert jev_server.requests == []
    assert verdict.response is None
    assert verdict.summary() == "passed=false [mentions_paris=FAILED, g=NOT_APPLICABLE]"
    assert verdict.not_applicable()[0].detail == (
        "g: not applicable, skipped, a code check already failed"
    )
    assert verdict.feedback == "- mentions_paris: Does not name the city"
    assert verdict.net_score == -1


async def test_async_checks_and_check_exceptions_propagate() -> None:
    async def slow_ok(judge_input: JudgeInput) -> bool:
        return "Paris" in judge_input.assistant_answer

    judge = Judge(
        Scripted({"g": NoulAnswer(1.0)}), [check("c", slow_ok, defect="x"), noul("g", GROUNDED)]
    )
    assert (await judge.evaluate(INPUT)).passed

    def broken(judge_input: JudgeInput) -> bool:
        raise KeyError("bug in the check")

    client = Scripted({"g": NoulAnswer(1.0)})
    judge = Judge(client, [check("c", broken, defect="x"), noul("g", GROUNDED)])
    with pytest.raises(KeyError, match="bug in the check"):
        await judge.evaluate(INPUT)
    assert client.calls == []


async def test_applies_when_false_is_not_sent() -> None:
    client = Scripted({"g": NoulAnswer(0.0), "h": noul_score_answer({3: 1.0})})
    criteria = [
        noul("g", GROUNDED, applies_when=lambda i: bool(i.tool_calls)),
        score("h", HELPFUL, minimum=2),
    ]
    verdict = await Judge(client, criteria).evaluate(INPUT)
    assert list(client.calls[0][1]) == ["h"]
    assert verdict.finding("g").outcome is Outcome.NOT_APPLICABLE
    assert verdict.passed


async def test_dependent_questions_are_asked_in_the_same_call_and_set_aside_when_unmet() -> None:
    from jevrefine.jev import ChoiceAnswer

    client = Scripted(
        {
            "t": ChoiceAnswer("rude", {"polite": 0.1, "neutral": 0.1, "rude": 0.8}),
            "apology": NoulAnswer(0.0),
            "g": NoulAnswer(0.2),
            "h": noul_score_answer({0: 1.0}),
        }
    )
    criteria = [
        choice("t", TONE, accept=["polite", "neutral", "rude"]),
        noul("apology", Noul("Does it apologise?"), when_chosen=("t", ["polite"])),
        noul("g", GROUNDED),
        score("h", HELPFUL, minimum=2, when_passed="g"),
    ]
    verdict = await Judge(client, criteria).evaluate(INPUT)
    assert len(client.calls) == 1
    assert list(client.calls[0][1]) == ["t", "apology", "g", "h"]
    assert [f.outcome for f in verdict.findings] == [
        Outcome.PASSED,
        Outcome.NOT_APPLICABLE,
        Outcome.FAILED,
        Outcome.NOT_APPLICABLE,
    ]
    assert "t chose 'rude'" in verdict.finding("apology").detail
    assert "g did not pass (FAILED)" in verdict.finding("h").detail
    assert verdict.net_score == 0  # one passed, one failed


def test_summary_and_helpers() -> None:
    findings = (
        Finding("a", None, Outcome.PASSED),
        Finding("b", None, Outcome.FAILED, "b: bad"),
        Finding("c", None, Outcome.ERROR, "c: none"),
    )
    verdict = Verdict(False, findings, counted_failures=(findings[1],))
    assert verdict.summary() == "passed=false [a=PASSED, b=FAILED, c=ERROR]"
    assert verdict.failures() == [findings[1]]
    assert verdict.errors() == [findings[2]]
    assert verdict.net_score == 0
    with pytest.raises(KeyError, match="a, b, c"):
        verdict.finding("z")


async def test_feedback_renderer_replaces_the_default() -> None:
    client = Scripted({"g": NoulAnswer(0.0)})
    judge = Judge(client, [noul("g", GROUNDED)], feedback_renderer=lambda v: "FIX: " + v.summary())
    verdict = await judge.evaluate(INPUT)
    assert verdict.feedback == "FIX: passed=false [g=FAILED]"


# -- rating_judge (seed 003) ------------------------------------------------------------------


async def test_rating_judge_is_a_four_level_helpfulness_score_on_a_chat_model() -> None:
    answers = iter(['{"answer": "2"}', '{"answer": "4"}'])
    judge_model = FunctionModel(lambda prompt: next(answers))
    judge = rating_judge(judge_model, success_rating=3)
    (criterion,) = judge.criteria
    assert criterion.name == "helpfulness"
    assert isinstance(criterion.question, Score)
    assert len(criterion.question.levels) == 4
    # Rating 2 (level 1) is below 3; rating 4 (level 3) passes.
    verdict = await judge.evaluate(INPUT)
    assert not verdict.passed
    detail = verdict.failures()[0].detail
    # Named as the judge model saw them, on the 1-4 scale: no 0-based level index.
    assert "reached '2 - Weak:" in detail
    assert "needed '3 - Helpful:" in detail
    assert "level" not in detail.split("(score")[0]
    assert (await judge.evaluate(INPUT)).passed
    assert "Weather in Paris?" in judge_model.prompts[0].messages[-1].text
    with pytest.raises(JudgeUsageError):
        rating_judge(judge_model, success_rating=5)


# -- a judge of code checks alone (issue 32, 8) ------------------------------------------------


async def test_a_judge_of_code_checks_alone_needs_no_client_and_no_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Promise: `Judge(criteria=[check(...)])` takes no client, so no API key, and judges."""
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    judge = Judge(criteria=[check("short", lambda i: len(i.assistant_answer) < 10, "Too long")])
    assert judge.client is None
    failed = await judge.evaluate(INPUT)
    assert not failed.passed
    assert failed.response is None
    assert failed.feedback == "- short: Too long"
    assert (await judge.evaluate(JudgeInput("user: Hi?", "Hello."))).passed


def test_a_question_without_a_client_is_refused_with_what_to_pass() -> None:
    with pytest.raises(JudgeUsageError, match=r"\['g'\] ask a question and no client"):
        Judge(criteria=[noul("g", GROUNDED)])
    with pytest.raises(JudgeUsageError, match="Judge needs criteria"):
        Judge(Scripted({}))
