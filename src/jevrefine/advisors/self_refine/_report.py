"""What a refinement did: its attempts, their verdicts and usage, and how it ended."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ... import context_keys
from ..._request import ChatClientRequest, ChatClientResponse, context_entry
from ...exceptions import JevrefineError
from ...messages import Usage

if TYPE_CHECKING:
    from ...judge.verdict import Verdict

__all__ = ["OUTCOMES", "Attempt", "Outcome", "RefineReport", "SelfRefineFailedError"]

Outcome: TypeAlias = Literal["passed", "best_attempt", "failed", "unjudged", "skipped"]
"""How a refinement ended: an attempt passed; none did and the best one was returned; none did
and `SelfRefineFailedError` was raised; the judging call failed and the answer went unjudged
(`JudgeErrorPolicy.FAIL_OPEN`); the answer was not to be judged (`skip_evaluation`)."""

OUTCOMES: tuple[Outcome, ...] = ("passed", "best_attempt", "failed", "unjudged", "skipped")
"""Every `Outcome`, in that order."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt: the answer, its verdict (`None` when unjudged) and the model's usage."""

    index: int
    """1 for the first attempt."""
    answer: str
    """The attempt's answer text."""
    verdict: Verdict | None
    """The judge's verdict; `None` when the answer was skipped or could not be judged."""
    usage: Usage = field(default_factory=Usage)
    """The model's tokens for this attempt (tool rounds and a resampled repeat included)."""
    repeat_of: int | None = field(default=None, kw_only=True)
    """The earlier attempt whose answer this retry repeats word for word (its verdict is that
    attempt's, asked of no judge), or `None`."""
    echo: bool = field(default=False, kw_only=True)
    """The answer quotes the feedback it was given instead of answering: it is never returned
    as a pass (`RetryStrategy`'s echo guard)."""

    @property
    def judge_usage(self) -> Usage:
        """The judging call's tokens (zero when nothing was sent)."""
        if self.repeat_of is not None:
            return Usage()  # the verdict is an earlier attempt's: no call was made for it
        response = self.verdict.response if self.verdict is not None else None
        return response.usage if response is not None else Usage()

    @property
    def counts_as_answer(self) -> bool:
        """Whether the attempt is an answer of its own (neither a repeat nor an echo)."""
        return self.repeat_of is None and not self.echo


@dataclass(frozen=True, slots=True)
class RefineReport:
    """What one refinement did; stored under `context_keys.REFINE_REPORT` for every outcome."""

    attempts: list[Attempt]
    """Every attempt, in order."""
    outcome: Outcome
    """How the refinement ended (see `Outcome`)."""
    model_usage: Usage = field(default_factory=Usage)
    """The model's tokens, summed over the attempts."""
    judge_usage: Usage = field(default_factory=Usage)
    """The judge's tokens, summed over the judging calls."""
    chosen: int | None = field(default=None, kw_only=True)
    """The `index` of the attempt returned (`None` when none was: `failed`)."""
    stopped_early: str | None = field(default=None, kw_only=True)
    """Why the loop stopped before its attempts ran out, when it did (the token budget, a retry
    that would have been sent exactly as an earlier attempt), else `None`."""

    @classmethod
    def of(
        cls, source: ChatClientResponse | ChatClientRequest | Mapping[str, Any]
    ) -> RefineReport | None:
        """The report self-refine left in a response's context (`None`: no self-refine ran).

        `source` is the `ChatClientResponse` from `spec.call()`, a request, or a context dict;
        reads `context_keys.REFINE_REPORT`.

        Raises:
            UserError: something other than a `RefineReport` is stored under the key.
        """
        return context_entry(source, context_keys.REFINE_REPORT, cls)

    @property
    def total_usage(self) -> Usage:
        """Model and judge tokens together (what a `token_budget` counts)."""
        return self.model_usage + self.judge_usage

    @property
    def passed(self) -> bool:
        """Whether an attempt passed the judge."""
        return self.outcome == "passed"


class SelfRefineFailedError(JevrefineError):
    """Attempts ran out without a passing verdict and `fail_on_exhausted_attempts` was set.

    `verdict` is the best attempt's verdict (`.summary()`, `.failures()` with each `.detail`): the
    attempt that would have been returned without the flag (most passed net of failed, the later
    one on a tie), which is `best`. `attempts` holds every attempt's answer, verdict and usage;
    `report` the whole report.
    """

    def __init__(
        self,
        verdict: Verdict,
        attempts: Sequence[Attempt],
        report: RefineReport,
        *,
        best: Attempt | None = None,
    ):
        self.verdict = verdict
        """The best attempt's verdict (the one `best_attempt` would have returned)."""
        self.best = best
        """The best attempt: what would have been returned without `fail_on_exhausted_attempts`."""
        self.attempts = list(attempts)
        """Every attempt, in order."""
        self.report = report
        """The refinement's report (outcome `failed`)."""
        super().__init__(
            f"self-refine gave up after {len(self.attempts)} attempt(s): {verdict.summary()}"
        )
