"""`Evaluator`: a `Judge` behind a one-method evaluation interface, with one score.

```python
evaluator = Evaluator(judge)
result = await evaluator.evaluate(user_question, assistant_answer, documents=retrieved)
if not result.passed:
    log.warning("%s (score %.2f)", result.feedback, result.score)
```

For code written against a plain "evaluate -> pass, score, feedback" interface (Spring AI's
`Evaluator`). The score is the fraction of the criteria that applied which passed: lossy on
purpose, as one number cannot hold one threshold per criterion; the whole verdict is kept on the
result. An INCONCLUSIVE criterion counts as not passed, so it lowers the score without failing
the verdict, the stance `Verdict.passed` takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _validate
from ..exceptions import UserError
from ._input import JudgeInput
from ._judge import Judge
from .verdict import Outcome, Verdict

__all__ = ["EvaluationResult", "Evaluator", "applicable_pass_rate"]


def applicable_pass_rate(verdict: Verdict) -> float:
    """PASSED findings / findings that are not NOT_APPLICABLE; 1.0 when none applied."""
    applied = [f for f in verdict.findings if f.outcome is not Outcome.NOT_APPLICABLE]
    if not applied:
        return 1.0
    return sum(f.outcome is Outcome.PASSED for f in applied) / len(applied)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationResult:
    """An evaluation: pass or not, one score, the feedback, and the verdict behind them."""

    passed: bool
    """`verdict.passed`."""
    score: float
    """The fraction of the applicable criteria (all but NOT_APPLICABLE) that passed, 0 to 1."""
    feedback: str
    """`verdict.feedback`: empty when passed."""
    verdict: Verdict
    """The full verdict."""

    @property
    def findings(self) -> Mapping[str, str]:
        """Criterion -> outcome name (`{"helpfulness": "PASSED", "is_plausible": "FAILED"}`)."""
        return {f.criterion: f.outcome.name for f in self.verdict.findings}


class Evaluator:
    """Evaluates (question, answer, documents) with a `Judge`.

    Args:
        judge: The judge whose criteria are applied.
    """

    def __init__(self, judge: Judge) -> None:
        if not isinstance(judge, Judge):
            raise UserError(f"Evaluator needs a Judge, got {type(judge).__name__}")
        self.judge = judge
        """The judge applied."""

    async def evaluate(
        self, user_text: str, response_content: str, *, documents: Sequence[Any] = ()
    ) -> EvaluationResult:
        """Judge `response_content` as the answer to `user_text`, with the retrieved documents.

        The documents (texts, or objects with `.text`) reach the state as `supporting_context`,
        one entry per document, left out when there are none.

        Raises:
            JudgeError: the judging call failed.
        """
        _validate.text("user_text", user_text)
        _validate.text("response_content", response_content)
        if isinstance(documents, str) or not isinstance(documents, Sequence):
            raise UserError("documents must be a list of texts or documents, not a single str")
        verdict = await self.judge.evaluate(
            JudgeInput(user_text, response_content, supporting_context=documents)
        )
        return EvaluationResult(
            passed=verdict.passed,
            score=applicable_pass_rate(verdict),
            feedback=verdict.feedback,
            verdict=verdict,
        )

    def __repr__(self) -> str:
        return f"Evaluator({self.judge!r})"
