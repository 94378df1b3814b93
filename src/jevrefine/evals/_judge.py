"""`judge="asserts"`: the refine loop's `Judge`, built from a case's own assertions.

Code-checkable assertions (every type but `llm-rubric`) become `check` criteria; a failed one's
finding detail, and so the retry's feedback, is the oracle's sentence for the current answer
("The answer has 31 words; use at most 15."). `llm-rubric` assertions become nouls asked of the
grader. Assertions of weight 0 are informational and not part of the loop judge.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError
from ..jev.questions import Noul
from ..judge._judge import Judge, JudgeInput, JudgePlan
from ..judge.criteria import Criterion, check, noul
from ..judge.verdict import Outcome
from ._asserts import AssertionResult, Memo, check_one, rubric_question
from ._cases import Assertion, Case

if TYPE_CHECKING:
    from ..jev.protocol import SystemOneClient
    from ..jev.responses import SystemOneResponse

__all__ = ["asserts_judge"]


class _NoGrader:
    """Stands in for the grader of a judge with no question: it is never asked."""

    async def system_one(
        self,
        state: Any,
        questions: Any,
        *,
        model: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - pinned by the protocol
    ) -> SystemOneResponse:
        raise UserError("this judge has no llm-rubric criterion; nothing should ask a grader")


class _AssertionCheck:
    """A check criterion's predicate: one assertion on the attempt's answer.

    Results go through the case's `Memo`, so the defect sentence, and the oracle's scoring of the
    same answer, need no second evaluation.
    """

    __slots__ = ("assertion", "case", "memo")

    def __init__(self, case: Case, assertion: Assertion, memo: Memo) -> None:
        self.case = case
        self.assertion = assertion
        self.memo = memo

    async def result(self, answer: str) -> AssertionResult:
        return await check_one(self.assertion, answer, self.case, self.memo)

    async def __call__(self, judged: JudgeInput) -> bool:
        return (await self.result(judged.assistant_answer)).passed


class _AssertsJudge(Judge):
    """A `Judge` whose failed checks say what is wrong with this very answer."""

    def __init__(self, client: SystemOneClient, criteria: list[Criterion]) -> None:
        super().__init__(client, criteria)
        self._checks: dict[str, _AssertionCheck] = {}
        for criterion in self.criteria:
            predicate = getattr(criterion, "predicate", None)
            if isinstance(predicate, _AssertionCheck):
                self._checks[criterion.name] = predicate

    async def prepare(self, judge_input: JudgeInput) -> JudgePlan:
        """Run the checks; a failed one's detail is its sentence for the current answer."""
        plan = await super().prepare(judge_input)
        local = dict(plan.local)
        for name, finding in plan.local.items():
            predicate = self._checks.get(name)
            if predicate is None or finding.outcome is not Outcome.FAILED:
                continue
            found = await predicate.result(judge_input.assistant_answer)
            local[name] = replace(finding, detail=found.defect)
        return JudgePlan(plan.input, MappingProxyType(local), plan.send)


def criterion_name(assertion: Assertion) -> str:
    """The loop judge's criterion (and question id) for an assertion: `a<index>_<type>`."""
    return f"a{assertion.index}_{assertion.type.replace('-', '_')}"


def asserts_judge(case: Case, grader: SystemOneClient | None, memo: Memo | None = None) -> Judge:
    """The loop judge of one case: its assertions of weight above 0 as criteria.

    `memo` is shared with the oracle's scoring of the same case (a fresh one when `None`).

    Raises:
        UserError: the case has an `llm-rubric` and `grader` is `None`.
    """
    criteria: list[Criterion] = []
    memo = memo if memo is not None else Memo()
    for assertion in case.assertions:
        if not assertion.counts:
            continue
        name = criterion_name(assertion)
        if assertion.base != "llm-rubric":
            predicate = _AssertionCheck(case, assertion, memo)
            criteria.append(check(name, predicate, f"assertion {assertion.index} failed"))
            continue
        if grader is None:
            raise UserError(f"case {case.id!r} has an llm-rubric assertion: pass grader=")
        rubric = assertion.value
        if assertion.negated:
            # A noul passes on a high P(yes): ask the opposite question, with the mirrored bar.
            question = Noul(
                f"Does `assistant_answer` fail this rubric: {rubric}",
                when_false=f"The answer must not meet the rubric {rubric!r}",
            )
            criteria.append(noul(name, question, 1.0 - assertion.pass_bar))
        else:
            question = Noul(
                rubric_question(rubric), when_false=f"The answer must meet the rubric {rubric!r}"
            )
            criteria.append(noul(name, question, assertion.pass_bar))
    client: Any = grader if grader is not None else _NoGrader()
    return _AssertsJudge(client, criteria)
