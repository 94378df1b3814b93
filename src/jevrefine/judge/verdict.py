"""What a `Judge` concludes: one `Finding` per criterion, gathered in a `Verdict`.

```python
verdict = await judge.evaluate(judge_input)
if not verdict.passed:
    print(verdict.summary())          # passed=false [helpfulness=PASSED, is_grounded=FAILED]
    for finding in verdict.failures():
        print(finding.detail)
    print(verdict.feedback)           # "- ..." lines, ready to show the model
```
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from ..jev.responses import SystemOneResponse

__all__ = ["FeedbackRenderer", "Finding", "Outcome", "Verdict", "render_feedback"]


class Outcome(enum.Enum):
    """How one criterion came out."""

    PASSED = "passed"
    """The answer meets the criterion."""
    FAILED = "failed"
    """The answer falls short; the finding's detail says how."""
    INCONCLUSIVE = "inconclusive"
    """The judge's answer was too evenly split to count (below `min_confidence`)."""
    ERROR = "error"
    """The judge gave no usable answer for this criterion."""
    NOT_APPLICABLE = "not_applicable"
    """The criterion did not apply (its condition or dependency was unmet, or it was skipped)."""

    @property
    def label(self) -> str:
        """The low-cardinality label used on telemetry (`pass`, `fail`, ...)."""
        return _LABELS[self]


_LABELS = {
    Outcome.PASSED: "pass",
    Outcome.FAILED: "fail",
    Outcome.INCONCLUSIVE: "inconclusive",
    Outcome.ERROR: "error",
    Outcome.NOT_APPLICABLE: "not_applicable",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """How one criterion came out for one answer."""

    criterion: str
    """The criterion's name (also the question id on the wire)."""
    answer: Any
    """What decided it: the typed answer (`NoulAnswer`, ...), a code check's `bool`, or `None`."""
    outcome: Outcome
    """PASSED, FAILED, INCONCLUSIVE, ERROR or NOT_APPLICABLE."""
    detail: str = ""
    """One sentence naming the criterion and why it came out so; empty when it passed."""
    score: float | None = None
    """The number behind the outcome (P(yes), the accepted share, the score, 1/0 for a check)."""
    escalated: bool = False
    """Decided by the judge's stronger client (`Judge(escalate_to=...)`): the first client's
    answer was not sure enough, and `answer` is the stronger client's."""
    escalation_failed: bool = False
    """Meant for the stronger client, whose call failed: the first client's finding stands."""

    @property
    def mark(self) -> str:
        """`(escalated)`, `(escalation failed)` or empty: how the summary tags this finding."""
        if self.escalated:
            return "(escalated)"
        return "(escalation failed)" if self.escalation_failed else ""


FeedbackRenderer: TypeAlias = Callable[["Verdict"], str]
"""Turns a verdict that did not pass into the feedback the model is shown."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Every criterion's finding for one answer, in declaration order."""

    passed: bool
    """True when no finding counts as failed (see `Judge` for INCONCLUSIVE and ERROR)."""
    findings: tuple[Finding, ...]
    """One finding per criterion, in declaration order."""
    response: SystemOneResponse | None = None
    """The raw answer of the one judging call, or `None` when nothing was sent."""
    feedback: str = ""
    """What to tell the model: one `- <detail>` line per failure; empty when passed."""
    counted_failures: tuple[Finding, ...] = field(default=(), repr=False)
    """The findings that made the verdict fail (FAILED, plus INCONCLUSIVE / ERROR when the judge
    counts them as failures)."""

    def failures(self) -> list[Finding]:
        """The FAILED findings."""
        return self._with(Outcome.FAILED)

    def inconclusive(self) -> list[Finding]:
        """The INCONCLUSIVE findings."""
        return self._with(Outcome.INCONCLUSIVE)

    def errors(self) -> list[Finding]:
        """The ERROR findings."""
        return self._with(Outcome.ERROR)

    def not_applicable(self) -> list[Finding]:
        """The NOT_APPLICABLE findings."""
        return self._with(Outcome.NOT_APPLICABLE)

    def escalated(self) -> list[Finding]:
        """The findings the stronger client decided (`Judge(escalate_to=...)`)."""
        return [f for f in self.findings if f.escalated]

    def passed_findings(self) -> list[Finding]:
        """The PASSED findings."""
        return self._with(Outcome.PASSED)

    def _with(self, outcome: Outcome) -> list[Finding]:
        return [f for f in self.findings if f.outcome is outcome]

    @property
    def net_score(self) -> int:
        """Criteria passed minus criteria counted as failed: how the best attempt is picked."""
        return len(self.passed_findings()) - len(self.counted_failures)

    def finding(self, criterion: str) -> Finding:
        """The finding of the criterion named `criterion` (`KeyError` when there is none)."""
        for f in self.findings:
            if f.criterion == criterion:
                return f
        raise KeyError(f"no criterion named {criterion!r}; the verdict has: {self._names()}")

    def _names(self) -> str:
        return ", ".join(f.criterion for f in self.findings) or "none"

    def summary(self) -> str:
        """One line: `passed=false [helpfulness=PASSED, is_grounded=FAILED(escalated)]`.

        A finding the stronger client decided reads `(escalated)`; one whose escalation failed,
        `(escalation failed)`.
        """
        parts = ", ".join(f"{f.criterion}={f.outcome.name}{f.mark}" for f in self.findings)
        return f"passed={'true' if self.passed else 'false'} [{parts}]"


def render_feedback(verdict: Verdict) -> str:
    """The default feedback: a `- <detail>` line per failure, then the inconclusive ones.

    Empty when the verdict passed.
    """
    if verdict.passed:
        return ""
    lines = [
        f"- {f.detail}" for f in verdict.counted_failures if f.outcome is not Outcome.INCONCLUSIVE
    ]
    unsure = verdict.inconclusive()
    if unsure:
        lines.append("Not sure about these either:")
        lines.extend(f"- {f.detail}" for f in unsure)
    return "\n".join(lines)
