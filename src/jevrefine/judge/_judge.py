"""`Judge`: criteria + a `SystemOneClient` -> a `Verdict` for one answer.

```python
judge = Judge(JudgeClient(), criteria=[
    check("short", lambda i: len(i.assistant_answer.split()) <= 50, defect="Longer than 50 words"),
    noul("is_grounded", Noul("Is every value in `assistant_answer` supported by `tool_calls`?",
                             when_false="States a value no tool returned"), minimum=0.7),
])
verdict = await judge.evaluate(JudgeInput("user: Weather in Paris?", "It is 15 °C.", tool_calls=[
    {"name": "weather", "arguments": {"location": "Paris"}, "result": "15 °C, sunny"}]))
```

Code checks run first, locally; then every question criterion goes out in **one** `system_one`
call (the service answers them in parallel). A judge of code checks alone takes no client
(`Judge(criteria=[check(...)])`) and makes no call. `rating_judge` is the seed-003 helpfulness
judge as a preset.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from .. import _validate
from ..jev.errors import JudgeUsageError
from ..jev.protocol import SystemOneClient
from ..jev.questions import Noul, Score
from ..jev.responses import check_answers
from ._escalation import DEFAULT_ESCALATE_BELOW, escalate, needs_escalation
from ._explain import FailureExplainer, explain_failed
from ._input import JudgeInput
from .criteria import (
    CheckCriterion,
    Criterion,
    Predicate,
    QuestionCriterion,
    check_criteria,
    noul,
    score,
    unmet_dependency,
)
from .verdict import FeedbackRenderer, Finding, Outcome, Verdict, render_feedback

if TYPE_CHECKING:
    from ..jev.responses import SystemOneResponse
    from ..models.base import ChatModel

__all__ = [
    "RATING_LEVELS",
    "RATING_QUESTION",
    "REFERENCE_QUESTION",
    "Judge",
    "JudgeInput",
    "JudgePlan",
    "rating_judge",
    "reference_judge",
]

_SKIPPED_AFTER_CHECK: Final = "skipped, a code check already failed"


@dataclass(frozen=True, slots=True)
class JudgePlan:
    """The local half of an evaluation: code-check findings and the questions to send.

    `Judge.prepare` makes one (running user code: checks and `applies_when`); `Judge.ask` makes
    the one remote call. Callers that treat a failing judging call differently from a failing
    check (`SelfRefineAdvisor`) use the two halves.
    """

    input: JudgeInput
    """What is being judged."""
    local: Mapping[str, Finding]
    """Findings already known: code checks, and questions that are not applicable."""
    send: tuple[QuestionCriterion, ...]
    """The question criteria to ask, in declaration order."""


class Judge:
    """Evaluates an answer against criteria: code checks locally, questions in one call.

    Args:
        client: Whatever answers the questions: `JudgeClient` (Jev) or `ModelJudgeClient`;
            `None` for a judge of code checks alone (`Judge(criteria=[check(...)])`), which
            makes no judging call and so needs no client and no API key.
        criteria: Built with `noul`, `score`, `choice` and `check`; names unique, dependencies
            (`when_passed`, `when_chosen`) pointing backwards. Code checks alone are allowed:
            such a judge never calls `client`.
        fail_fast: When a code check fails, skip the judging call; every question is then
            NOT_APPLICABLE ("skipped, a code check already failed").
        min_confidence: A choice or score whose supporting share (the probability on the
            verdict's side) is below this is INCONCLUSIVE. Nouls are not affected.
        fail_on_inconclusive: Count INCONCLUSIVE findings as failures.
        fail_on_error: Deprecated, no effect (a `DeprecationWarning` when given): no judge
            produces an ERROR finding, because a judging response that leaves a question
            unanswered, or answers it with something not allowed, raises `JudgeResponseError`
            instead (below). An ERROR finding, should a later version produce one, always
            counts as failed.
        feedback_renderer: Turns a failed verdict into the model's feedback (default: one
            `- <detail>` line per failure, then the inconclusive ones).
        model: The judge model to ask (default: the client's).
        escalate_to: A stronger `SystemOneClient` for the criteria `client` was unsure about:
            after the first call, the question criteria that came out INCONCLUSIVE or ERROR,
            or whose answer gives less than `escalate_below` of its probability to the label
            it lands on, are asked of it in **one** more call (none when the first client was
            sure throughout). Its answers are judged by the same thresholds; those findings
            are marked `escalated` (the summary reads `FAILED(escalated)`). When that call
            fails, the first client's findings stand, marked `escalation_failed`, and one
            warning is logged. Its token usage is added to the verdict's response.
        escalate_below: The least support the first client's verdict needs to be kept (0 to 1,
            default 0.9). Code checks and criteria that did not apply are never escalated.
        escalate_model: The model `escalate_to` is asked (default: its own); with it,
            `escalate_to` may be the same `JudgeClient` asking a stronger model.

    A judging response that is not a valid answer to the questions sent (an answer missing, of
    the wrong type, a label or level the question does not have, a number out of range, an
    answer to a question not asked) is a `JudgeResponseError` from `evaluate` / `ask`, never a
    verdict: `check_answers` is applied to whatever the client returned. It is not transient,
    so `SelfRefineAdvisor` re-raises it under either error policy.
    """

    def __init__(
        self,
        client: SystemOneClient | None = None,
        criteria: Sequence[Criterion] | None = None,
        *,
        fail_fast: bool = False,
        min_confidence: float | None = None,
        fail_on_inconclusive: bool = False,
        fail_on_error: bool | None = None,
        feedback_renderer: FeedbackRenderer | None = None,
        model: str | None = None,
        escalate_to: SystemOneClient | None = None,
        escalate_below: float = DEFAULT_ESCALATE_BELOW,
        escalate_model: str | None = None,
    ) -> None:
        if client is not None and not callable(getattr(client, "system_one", None)):
            raise JudgeUsageError(
                f"Judge needs a SystemOneClient (JudgeClient or ModelJudgeClient), got "
                f"{type(client).__name__}"
            )
        if criteria is None:
            raise JudgeUsageError(
                "Judge needs criteria: pass criteria=[noul(...), check(...), ...]"
            )
        if isinstance(criteria, str | bytes) or not isinstance(criteria, Sequence):
            raise JudgeUsageError("criteria must be a list of noul(), score(), choice(), check()")
        if feedback_renderer is not None and not callable(feedback_renderer):
            raise JudgeUsageError(
                f"feedback_renderer={_validate.shown(feedback_renderer)} is not callable: pass "
                "a function of the Verdict returning the feedback text, or None"
            )
        self.client = client
        """What answers the questions (`None`: code checks only, no judging call)."""
        # Checks alone are allowed (evals turns a case's assertions into such a judge); the
        # CLI config keeps asking for a question, as a Jev judge without one is a mistake there.
        self.criteria = check_criteria(criteria, require_question=False)
        """The criteria, in declaration order."""
        asking = [c.name for c in self.criteria if isinstance(c, QuestionCriterion)]
        if client is None and asking:
            raise JudgeUsageError(
                f"criteria {asking} ask a question and no client answers it: pass "
                "JudgeClient() (Jev) or ModelJudgeClient(chat_model) first; a judge of code "
                "checks alone needs none"
            )
        self.fail_fast = _validate.boolean("fail_fast", fail_fast, error=JudgeUsageError)
        """Skip the judging call once a code check failed."""
        self.min_confidence = _validate.number(
            "min_confidence",
            min_confidence,
            minimum=0,
            maximum=1,
            optional=True,
            example=0.6,
            error=JudgeUsageError,
        )
        """The least supporting share of a conclusive choice or score."""
        self.fail_on_inconclusive = _validate.boolean(
            "fail_on_inconclusive", fail_on_inconclusive, error=JudgeUsageError
        )
        """Whether INCONCLUSIVE counts as failed."""
        if fail_on_error is not None:
            _validate.boolean("fail_on_error", fail_on_error, error=JudgeUsageError)
            warnings.warn(
                "Judge(fail_on_error=...) has no effect and will be removed: no judge produces "
                "an ERROR finding (an answer the judge could not give raises JudgeResponseError)",
                DeprecationWarning,
                stacklevel=2,
            )
        self.feedback_renderer: FeedbackRenderer = feedback_renderer or render_feedback
        """Renders a failed verdict's feedback."""
        self.model = _validate.text(
            "model", model, optional=True, example="jev-latest", error=JudgeUsageError
        )
        """The judge model asked (`None`: the client's default)."""
        if escalate_to is not None and not callable(getattr(escalate_to, "system_one", None)):
            raise JudgeUsageError(
                f"escalate_to needs a SystemOneClient (JudgeClient or ModelJudgeClient), got "
                f"{type(escalate_to).__name__}"
            )
        self.escalate_to = escalate_to
        """The stronger client for unsure criteria, or `None` (no escalation)."""
        self.escalate_below = _validate.number(
            "escalate_below",
            escalate_below,
            minimum=0,
            maximum=1,
            example=DEFAULT_ESCALATE_BELOW,
            error=JudgeUsageError,
        )
        """The least support of a first-client verdict that is kept."""
        self.escalate_model = _validate.text(
            "escalate_model",
            escalate_model,
            optional=True,
            example="jev-latest",
            error=JudgeUsageError,
        )
        """The model `escalate_to` is asked (`None`: its default)."""

    @property
    def questions(self) -> dict[str, Any]:
        """Every question criterion's question, by name."""
        return {c.name: c.question for c in self.criteria if isinstance(c, QuestionCriterion)}

    async def evaluate(self, judge_input: JudgeInput) -> Verdict:
        """Judge one answer: code checks, then one call with every applicable question.

        Raises:
            JudgeError: the judging call failed (see the client's errors).
            Exception: whatever a code check or `applies_when` raised (a bug, never a verdict).
        """
        return await self.ask(await self.prepare(judge_input))

    async def prepare(self, judge_input: JudgeInput) -> JudgePlan:
        """Run the code checks and `applies_when` conditions; decide what to send."""
        if not isinstance(judge_input, JudgeInput):
            raise JudgeUsageError(f"evaluate() needs a JudgeInput, got {type(judge_input)}")
        local: dict[str, Finding] = {}
        failed_check = False
        for criterion in self.criteria:
            if isinstance(criterion, CheckCriterion):
                ok = await _call(criterion.predicate, judge_input)
                if ok:
                    local[criterion.name] = Finding(criterion.name, True, Outcome.PASSED, "", 1.0)
                else:
                    failed_check = True
                    detail = f"{criterion.name}: {criterion.defect}"
                    local[criterion.name] = Finding(
                        criterion.name, False, Outcome.FAILED, detail, 0.0
                    )
        send: list[QuestionCriterion] = []
        for criterion in self.criteria:
            if not isinstance(criterion, QuestionCriterion):
                continue
            if failed_check and self.fail_fast:
                local[criterion.name] = _not_applicable(criterion.name, _SKIPPED_AFTER_CHECK)
            elif criterion.applies_when is not None and not await _call(
                criterion.applies_when, judge_input
            ):
                local[criterion.name] = _not_applicable(criterion.name, "applies_when was false")
            else:
                send.append(criterion)
        return JudgePlan(judge_input, MappingProxyType(local), tuple(send))

    async def ask(self, plan: JudgePlan) -> Verdict:
        """Make the one judging call for `plan` (none when nothing is to be sent); the verdict."""
        response = None
        if plan.send:
            assert self.client is not None  # a judge without one holds no questions
            questions = {c.name: c.question for c in plan.send}
            response = await self.client.system_one(plan.input.state(), questions, model=self.model)
            # Whatever the client: an answer that does not fit the questions is no verdict.
            check_answers(response, questions)
        decided: dict[str, Finding] = {}
        if response is not None:
            # Every sent answer is there, of its question's type: checked above.
            decided = {
                c.name: c.decide(response.answers[c.name], self.min_confidence) for c in plan.send
            }
            response = await self._escalate(plan, decided, response)
        # Dependencies are resolved on the final findings, so dependents follow an escalated
        # decision.
        found: dict[str, Finding] = dict(plan.local)
        for criterion in self.criteria:
            if criterion.name in found or not isinstance(criterion, QuestionCriterion):
                continue
            finding = decided[criterion.name]
            unmet = unmet_dependency(criterion, found)
            if unmet is not None:
                finding = replace(finding, outcome=Outcome.NOT_APPLICABLE, detail=unmet, score=None)
            found[criterion.name] = finding
        if getattr(self.client, "explain_failures", False):
            # The judge model writes its reasons for each failure (ModelJudgeClient).
            explainer = cast("FailureExplainer", self.client)
            questions = {c.name: c.question for c in plan.send}
            found, response = await explain_failed(
                explainer, plan.input.state(), questions, found, response
            )
        findings = tuple(found[c.name] for c in self.criteria)
        counted = tuple(f for f in findings if self._counts_as_failed(f.outcome))
        verdict = Verdict(not counted, findings, response, "", counted)
        if verdict.passed:
            return verdict
        feedback = self.feedback_renderer(verdict) or verdict.summary()
        return Verdict(False, findings, response, feedback, counted)

    async def _escalate(
        self, plan: JudgePlan, decided: dict[str, Finding], response: SystemOneResponse
    ) -> SystemOneResponse:
        """Re-decide the unsure criteria in `decided` with `escalate_to`; the response to keep."""
        if self.escalate_to is None:
            return response
        unsure = [c for c in plan.send if needs_escalation(c, decided[c.name], self.escalate_below)]
        if not unsure:
            return response
        updated, second = await escalate(
            self.escalate_to,
            plan.input.state(),
            unsure,
            decided,
            model=self.escalate_model,
            min_confidence=self.min_confidence,
        )
        decided.update(updated)
        if second is None:
            return response
        # The verdict's usage is what judging cost: the stronger client's tokens count too.
        return replace(response, usage=response.usage + second.usage)

    def _counts_as_failed(self, outcome: Outcome) -> bool:
        return (
            outcome is Outcome.FAILED
            or (outcome is Outcome.INCONCLUSIVE and self.fail_on_inconclusive)
            # An unjudged criterion never reads as a pass.
            or outcome is Outcome.ERROR
        )

    def __repr__(self) -> str:
        names = ", ".join(c.name for c in self.criteria)
        escalation = "" if self.escalate_to is None else f", escalate_to={self.escalate_to!r}"
        return f"Judge({self.client!r}, criteria=[{names}]{escalation})"


def _not_applicable(name: str, reason: str) -> Finding:
    return Finding(name, None, Outcome.NOT_APPLICABLE, f"{name}: not applicable, {reason}")


async def _call(predicate: Predicate, judge_input: JudgeInput) -> bool:
    result = predicate(judge_input)
    if inspect.isawaitable(result):
        result = await result
    return bool(result)


RATING_LEVELS: Final = (
    "1 - Unhelpful: the answer ignores the question, is wrong, or covers only a sliver of it.",
    "2 - Weak: the answer touches the question but misses key parts or gets some facts wrong.",
    "3 - Helpful: the answer addresses the question correctly; it could be clearer or fuller.",
    "4 - Excellent: the answer is relevant, direct, correct and addresses every concern raised.",
)
"""The 1-4 helpfulness rubric of `rating_judge` (our wording of seed 003's scale); the judge
model is shown these lines as written and answers 1-4."""

RATING_QUESTION: Final = (
    "Rate how well `assistant_answer` answers the concerns expressed in `user_question`, on the "
    "scale below. Judge what is actually said, not its length or tone."
)
"""The instructions of `rating_judge`'s helpfulness score."""


def rating_judge(
    chat_model: ChatModel, *, success_rating: int = 3, explain_failures: bool = False
) -> Judge:
    """Seed 003's LLM-as-a-judge in one line: a 1-4 helpfulness rating by a separate model.

    A `Judge` with one 4-level `Score` named `helpfulness` (level index = rating - 1), answered by
    `ModelJudgeClient(chat_model, score_starts_at=1)`: the judge model sees the levels as
    "1 - Unhelpful" ... "4 - Excellent" and answers 1-4, as in the seed, so rating 4 is
    Excellent. It passes exactly when the rating reaches `success_rating` (seed 003:
    `rating >= successRating`): the rating is the most likely one, so the log probabilities
    decide between two ratings, never a pass below the bar or a failure at it. A failure's
    detail and feedback speak in the 1-4 numbers ("reached '2 - Weak: ...' (rating 2.31),
    needed '3 - Helpful: ...' (minimum 3.00; ...)").

    With `explain_failures=True` a failed rating also gets the judge model's written feedback
    (one sentence of what to change, seed 003's `feedback` field), which reaches the retry
    prompt: one extra judge request per failed attempt.

    ```python
    advisor = SelfRefineAdvisor(rating_judge(judge_model, success_rating=4), max_repeat_attempts=15)
    ```

    Use a different model from the one being judged, to avoid self-preference.
    """
    from .model_judge import ModelJudgeClient

    success_rating = _validate.integer(
        "success_rating", success_rating, minimum=1, maximum=4, example=3, error=JudgeUsageError
    )
    rubric = Score(RATING_QUESTION, levels=list(RATING_LEVELS))
    client = ModelJudgeClient(chat_model, score_starts_at=1, explain_failures=explain_failures)
    # Seed 003 passes when `rating >= successRating`: the rating given decides, not the mass.
    criterion = score("helpfulness", rubric, minimum=success_rating - 1, decide_by="level")
    return Judge(client, [criterion])


REFERENCE_QUESTION: Final = Noul(
    "Does assistant_answer give the answer that expected_output gives to user_question? Other "
    "wording and more or less detail are fine. It does not when it states a different fact, "
    "number or cause, or when it gives no answer at all (it only repeats the question or says "
    "something vague).",
    when_true="It gives the correct answer",
    when_false="The answer does not give a correct answer to the question: a wrong fact, "
    "number or cause, or no real answer",
)
"""The question of `reference_judge`. Its `when_false` is the feedback a failed answer gets: it
says what is wrong (the answer disagrees with a correct one), never what the right answer is."""

REFERENCE_MINIMUM: Final = 0.47
"""The least P(yes) `reference_judge` passes. Qwen2.5-Coder-1.5B under the grammar constraint
says "yes" with little conviction (right answers got 0.44-0.63, wrong or empty ones 0.14-0.46
on 28 known pairs, docs/guide/judge.md): the bar sits between the two, below 0.5. A higher one
fails right answers, and a retry of a right answer can only make it worse."""

REFERENCE_GRAMMAR_SYSTEM: Final = "You judge answers. Reply yes or no."
"""`reference_judge`'s system message under the grammar constraint, where the answer is the
first token: it separated right from wrong answers more widely than the default evaluator
prompt did (docs/guide/judge.md)."""


def reference_judge(
    chat_model: ChatModel,
    *,
    minimum: float = REFERENCE_MINIMUM,
    constraint: Literal["json_schema", "grammar"] = "json_schema",
) -> Judge:
    """A correctness judge a small local model can run: it answers first, then compares.

    A `Judge` with one noul, `agrees_with_reference` (`REFERENCE_QUESTION`), answered by
    `ModelJudgeClient(chat_model, reference_answers=True)`: the judge model writes its own answer
    to the question (once per prompt, shared by its retries), then says whether the answer
    judged agrees with it. This is the offline default judge of `jevrefine run` / `judge`, on
    the strongest local model; on the built-in calibration pairs it tells right from wrong
    where asking "is this correct?" does not (docs/guide/judge.md). Use a model other than
    the one being judged. `constraint="grammar"` is for llama.cpp servers.

    ```python
    advisor = SelfRefineAdvisor(reference_judge(judge_model), max_repeat_attempts=2)
    ```
    """
    from .model_judge import DEFAULT_SYSTEM_PROMPT, ModelJudgeClient

    least = _validate.number(
        "minimum", minimum, minimum=0, maximum=1, example=0.5, error=JudgeUsageError
    )
    system = REFERENCE_GRAMMAR_SYSTEM if constraint == "grammar" else DEFAULT_SYSTEM_PROMPT
    client = ModelJudgeClient(
        chat_model, constraint=constraint, system_prompt=system, reference_answers=True
    )
    return Judge(client, [noul("agrees_with_reference", REFERENCE_QUESTION, minimum=least)])
