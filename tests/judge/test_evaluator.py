"""`Evaluator`: a `Judge` behind a pass / score / feedback interface.

Behaviour follows the seed library's docs/judge/JevEvaluator.md
(spring-ai-community/spring-ai-typesafe).
"""

from __future__ import annotations

import pytest

from jevrefine.exceptions import UserError
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Evaluator, Judge, Verdict, check, noul
from jevrefine.retrieval import Document
from jevrefine.testing import FakeJevServer


def _judge(jev: JudgeClient) -> Judge:
    return Judge(
        jev,
        [
            noul("helpful", Noul("Helpful?"), 0.7),
            noul("grounded", Noul("Grounded in `supporting_context`?", when_false="Unsupported"),
                 0.7, applies_when=lambda i: bool(i.supporting_context)),
            noul("plausible", Noul("Plausible?", when_false="Impossible value"), 0.7),
            check("short", lambda i: len(i.assistant_answer) < 80, "Too long"),
        ],
    )  # fmt: skip


async def test_the_score_is_the_fraction_of_applicable_criteria_that_passed() -> None:
    """JevEvaluator.md: the score is the fraction of the criteria that applied which passed;
    NOT_APPLICABLE ones are left out. isPass is verdict.passed, feedback verdict.feedback,
    and the metadata keeps the verdict and a per-criterion outcome map."""
    answers = {"helpful": 0.9, "grounded": 0.9, "plausible": 0.1}
    async with (
        FakeJevServer(lambda s, q: answers) as server,
        JudgeClient("k", base_url=server.base_url) as jev,
    ):
        result = await Evaluator(_judge(jev)).evaluate("Weather in Paris?", "-455 °C in Paris.")
    assert result.score == pytest.approx(2 / 3)  # grounded did not apply: no documents
    assert result.passed is False
    assert result.feedback == "- plausible: Impossible value (P(yes) 0.10, needed at least 0.70)"
    assert isinstance(result.verdict, Verdict)
    assert result.findings == {
        "helpful": "PASSED", "grounded": "NOT_APPLICABLE", "plausible": "FAILED", "short": "PASSED"
    }  # fmt: skip


async def test_documents_reach_the_state_as_supporting_context() -> None:
    """JevEvaluator.md, Supporting documents: their texts reach the state as the
    `supporting_context` array, one entry per document (only when non-empty)."""
    async with (
        FakeJevServer(lambda s, q: {k: 0.9 for k in q}) as server,
        JudgeClient("k", base_url=server.base_url) as jev,
    ):
        evaluator = Evaluator(_judge(jev))
        result = await evaluator.evaluate(
            "Weather?", "Sunny.", documents=[Document("d1", "Paris: sunny"), "Lyon: rain"]
        )
        await evaluator.evaluate("Weather?", "Sunny.")
    assert (result.passed, result.score, result.feedback) == (True, 1.0, "")
    first, second = (r.json["state"] for r in server.requests)
    assert first["supporting_context"] == ["Paris: sunny", "Lyon: rain"]
    assert "supporting_context" not in second
    assert sorted(server.requests[1].json["questions"]) == ["helpful", "plausible"]


async def test_an_inconclusive_criterion_lowers_the_score_without_failing() -> None:
    """JevEvaluator.md: an inconclusive criterion counts as neither passed nor failed."""
    from jevrefine.jev import Choice
    from jevrefine.judge import choice

    def answer(state, questions):
        return {"tone": {"type": "choice", "choice": "polite",
                         "probabilities": {"polite": 0.55, "rude": 0.45}}}  # fmt: skip

    async with FakeJevServer(answer) as server, JudgeClient("k", base_url=server.base_url) as jev:
        judge = Judge(
            jev,
            [choice("tone", Choice("Tone?", ["polite", "rude"]), accept=["polite"]),
             check("ok", lambda i: True, "never")],
            min_confidence=0.6,
        )  # fmt: skip
        result = await Evaluator(judge).evaluate("Hi", "Hello!")
    assert (result.passed, result.score) == (True, 0.5)


async def test_arguments_are_checked() -> None:
    async with FakeJevServer() as server, JudgeClient("k", base_url=server.base_url) as jev:
        evaluator = Evaluator(_judge(jev))
        with pytest.raises(UserError, match="not a single str"):
            await evaluator.evaluate("q", "a", documents="one document")
        with pytest.raises(UserError, match="response_content"):
            await evaluator.evaluate("q", None)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="Evaluator needs a Judge"):
        Evaluator(jev)  # type: ignore[arg-type]
