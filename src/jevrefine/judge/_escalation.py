"""Escalation: the criteria the first client was unsure about, re-asked of a stronger one.

Low confidence is where a judge's mistakes are: a cascade that keeps the first client's sure
verdicts and re-asks only the rest keeps most of the stronger judge's accuracy for a fraction
of its cost. All the unsure criteria go to the stronger client in **one** more call, and the
criteria's own thresholds judge its answers, so a criterion has one definition of passing
whoever answers it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from ..jev.responses import check_answers
from .verdict import Finding, Outcome

if TYPE_CHECKING:
    from ..jev.protocol import SystemOneClient
    from ..jev.questions import State
    from ..jev.responses import SystemOneResponse
    from .criteria import QuestionCriterion

__all__ = ["DEFAULT_ESCALATE_BELOW", "escalate", "needs_escalation"]

DEFAULT_ESCALATE_BELOW: Final = 0.9
"""The least support of a verdict the first client keeps (the seed library's default)."""
_UNDECIDED: Final = (Outcome.INCONCLUSIVE, Outcome.ERROR)
_log = logging.getLogger("jevrefine.judge")


def needs_escalation(criterion: QuestionCriterion, finding: Finding, below: float) -> bool:
    """Whether the stronger client should decide `criterion`.

    When its finding is INCONCLUSIVE or ERROR, or less than `below` of its answer's probability
    supports the label it lands on (`QuestionCriterion.support`): a noul at 0.55 is escalated,
    one at 0.03 is not. A score answered without probabilities has no support to read and is
    kept.
    """
    if finding.outcome in _UNDECIDED:
        return True
    support = criterion.support(finding.answer)
    return support is not None and support < below


async def escalate(
    client: SystemOneClient,
    state: State,
    criteria: Sequence[QuestionCriterion],
    first: Mapping[str, Finding],
    *,
    model: str | None,
    min_confidence: float | None,
) -> tuple[dict[str, Finding], SystemOneResponse | None]:
    """Ask `criteria` of `client` in one call; their new findings, marked `escalated`.

    A call that fails, or answers that do not fit the questions, leave the first client's
    findings in place, marked `escalation_failed`, with one warning logged (the error's type
    only: an error's text may hold what a log must not). The response is `None` then.
    """
    questions = {c.name: c.question for c in criteria}
    try:
        response = await client.system_one(state, questions, model=model)
        check_answers(response, questions)
    except Exception as exc:  # a fallback's outage must not fail the judging itself
        _log.warning(
            "escalating %d criteria failed (%s); the first judge's findings stand",
            len(criteria),
            type(exc).__name__,
        )
        return {c.name: replace(first[c.name], escalation_failed=True) for c in criteria}, None
    decided = {
        c.name: replace(c.decide(response.answers[c.name], min_confidence), escalated=True)
        for c in criteria
    }
    return decided, response
