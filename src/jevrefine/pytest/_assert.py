"""`assert_answer`: judge an answer in a test; a failure names every criterion that fell short."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .. import _validate
from .._request import ChatClientResponse
from ..exceptions import UserError
from ..jev.protocol import SystemOneClient
from ..jev.questions import Noul
from ..jev.responses import ChoiceAnswer, NoulAnswer, ScoreAnswer
from ..judge import Judge, JudgeInput
from ..judge.criteria import CheckCriterion, Criterion, QuestionCriterion, noul
from ..judge.verdict import Finding, Outcome, Verdict
from ..messages import ChatResponse

__all__ = ["DEFAULT_MINIMUM", "assert_answer", "criterion_name", "failure_message"]

DEFAULT_MINIMUM: Final = 0.7
"""The least P(yes) of a criterion given as plain text (the seed library's default)."""
_NOT_PASSING: Final = (Outcome.FAILED, Outcome.INCONCLUSIVE, Outcome.ERROR)
_MAX_NAME: Final = 60
_MAX_ANSWER_SHOWN: Final = 200


def criterion_name(text: str) -> str:
    """The name of a criterion given as plain text: its words, lower case, joined by `_`.

    `"Is it polite?"` -> `is_it_polite`; cut to 60 characters.
    """
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "_".join(words)[:_MAX_NAME].rstrip("_") or "criterion"


def _criterion(item: object, minimum: float) -> Criterion:
    if isinstance(item, QuestionCriterion | CheckCriterion):
        return item
    if isinstance(item, str) and item.strip():
        return noul(criterion_name(item), Noul(item), minimum)
    raise UserError(
        f"assert_answer criteria are plain-language yes/no questions (str) or criteria built "
        f"with noul(), score(), choice() or check(); got {_validate.shown(item)}"
    )


def _judge_of(judge: object, criteria: tuple[object, ...], minimum: float) -> Judge:
    if isinstance(judge, Judge):
        if criteria:
            raise UserError(
                "assert_answer takes criteria with a client (judge=JudgeClient(...)), or a Judge "
                "that holds its own criteria, not both: add the criteria to the Judge"
            )
        return judge
    if not isinstance(judge, SystemOneClient):
        raise UserError(
            f"assert_answer(judge=...) needs a Judge, or a SystemOneClient (JudgeClient, "
            f"ModelJudgeClient) to ask the criteria; got {type(judge).__name__}"
        )
    if not criteria:
        raise UserError(
            "assert_answer with a client needs at least one criterion, e.g. "
            "'Does `assistant_answer` answer `user_question`?'; with none it could never fail"
        )
    return Judge(judge, [_criterion(item, minimum) for item in criteria])


def _input_of(
    answer: object,
    question: str,
    context: Sequence[Any],
    tool_calls: Sequence[Mapping[str, Any]],
    expected: str | None,
) -> JudgeInput:
    if isinstance(answer, JudgeInput):
        if question or context or tool_calls or expected is not None:
            raise UserError(
                "assert_answer got a JudgeInput and question/context/tool_calls/expected too: "
                "put them in the JudgeInput"
            )
        return answer
    if isinstance(answer, ChatClientResponse):
        answer = answer.content
    elif isinstance(answer, ChatResponse):
        answer = answer.text
    if not isinstance(answer, str):
        raise UserError(
            "assert_answer judges a str, a ChatClientResponse, a ChatResponse or a JudgeInput; "
            f"got {type(answer).__name__}"
        )
    _validate.text("question", question)
    return JudgeInput(
        question,
        answer,
        expected_output=expected,
        supporting_context=context,
        tool_calls=tool_calls,
    )


def _number(finding: Finding) -> str:
    if finding.score is None:
        return "no answer"
    if isinstance(finding.answer, NoulAnswer):
        return f"P(yes) {finding.score:.2f}"
    if isinstance(finding.answer, ChoiceAnswer):
        return f"P(accepted) {finding.score:.2f}"
    if isinstance(finding.answer, ScoreAnswer):
        return f"score {finding.score:.2f}"
    return f"check {'passed' if finding.score else 'failed'}"


def _detail(finding: Finding) -> str:
    # Details start with the criterion's name, which the line already shows.
    detail = finding.detail.removeprefix(f"{finding.criterion}: ")
    return detail or "no detail"


def failure_message(verdict: Verdict, answer: str) -> str | None:
    """What `assert_answer` fails with for `verdict`, or `None` when every criterion held.

    Every FAILED, INCONCLUSIVE and ERROR finding counts (stricter than `Verdict.passed`: in a
    test an undecided criterion must not pass silently), plus any the judge counted as failed.
    """
    bad = [
        f for f in verdict.findings if f.outcome in _NOT_PASSING or f in verdict.counted_failures
    ]
    if not bad and verdict.passed:
        return None
    shown = answer if len(answer) <= _MAX_ANSWER_SHOWN else answer[: _MAX_ANSWER_SHOWN - 3] + "..."
    lines = [
        f"the answer did not pass {len(bad)} of {len(verdict.findings)} criteria:",
        *(f"  - [{f.outcome.name}] {f.criterion} ({_number(f)}): {_detail(f)}" for f in bad),
        f"  {verdict.summary()}",
        f"  answer: {shown!r}",
    ]
    return "\n".join(lines)


async def assert_answer(
    answer: str | ChatClientResponse | ChatResponse | JudgeInput,
    *criteria: Criterion | str,
    judge: Judge | SystemOneClient,
    question: str = "",
    context: Sequence[Any] = (),
    tool_calls: Sequence[Mapping[str, Any]] = (),
    expected: str | None = None,
    minimum: float = DEFAULT_MINIMUM,
) -> Verdict:
    """Judge `answer`; raise an `AssertionError` naming every criterion that did not pass.

    ```python
    await assert_answer(answer, "Does `assistant_answer` name Paris?", judge=jev_client,
                        question="Capital of France?")
    verdict = await assert_answer(answer, judge=my_judge)   # a Judge brings its criteria
    ```

    Args:
        answer: The text to judge, a `ChatClientResponse` (what `.call()` returns) or a
            `ChatResponse` (their text), or a whole `JudgeInput`.
        *criteria: With a client: each a plain-language yes/no question about
            `assistant_answer` (a noul passing at `minimum`, named after its words) or a
            criterion built with `noul`, `score`, `choice` or `check`. None with a `Judge`.
        judge: A `Judge`, or a `SystemOneClient` (`JudgeClient`, `ModelJudgeClient`) that a
            `Judge` of `criteria` is built on.
        question: The question answered (`user_question`).
        context: Retrieved documents (`supporting_context`).
        tool_calls: Tool calls and their results, `{name, arguments, result}` each.
        expected: A reference answer (`expected_output`).
        minimum: The least P(yes) of a plain-language criterion.

    Returns:
        The verdict, when every criterion passed (for further assertions).

    Raises:
        AssertionError: a criterion FAILED, was INCONCLUSIVE or ERROR; the message lists each
            one with its detail and its number, then the verdict's summary.
        UserError: the arguments do not fit (see the message for what to pass).
        JudgeError: the judging call itself failed.
    """
    __tracebackhide__ = True
    least = _validate.number("minimum", minimum, minimum=0, maximum=1, example=DEFAULT_MINIMUM)
    judge_input = _input_of(answer, question, context, tool_calls, expected)
    verdict = await _judge_of(judge, criteria, least).evaluate(judge_input)
    message = failure_message(verdict, judge_input.assistant_answer)
    if message is not None:
        raise AssertionError(message)
    return verdict
