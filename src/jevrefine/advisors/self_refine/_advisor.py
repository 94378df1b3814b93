"""`SelfRefineAdvisor`: judge every answer; when it falls short, say why and ask again.

```python
judge = Judge(JudgeClient(), criteria=[noul("is_grounded", Noul("...", when_false="..."), 0.7)])
client = ChatClient(model, tools=[weather],
                    advisors=[SelfRefineAdvisor(judge, max_repeat_attempts=3)])
response = await client.prompt("What is the weather in Paris?").call()
report = RefineReport.of(response)      # attempts, outcome, usage
```

Each attempt calls the rest of the chain once and judges the answer. A failed verdict's feedback
is appended to the **original** request's last user message for the next attempt, so feedback
never compounds. When attempts run out the best attempt is returned (most criteria passed net of
failed, the later one on a tie), or `SelfRefineFailedError` is raised. Where it sits decides what
the judge sees and what a retry re-runs: see `SelfRefineAdvisor.DEFAULT_ORDER` and
`SelfRefineAdvisor.BEFORE_TOOLS_ORDER`.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, TypeAlias

from ... import _validate
from ..._request import ChatClientRequest, ChatClientResponse
from ...exceptions import UserError
from ...judge._judge import Judge
from .._guardrail_policy import GuardrailOutcome
from ..chain import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
from ..tool_calling import ToolCallingAdvisor
from ._engine import Finished, Refinement, Settings
from ._strategy import DEFAULT_FEEDBACK_TEMPLATE, RetryStrategy
from ._stream import check_stream_mode, check_streams, refine_stream
from ._telemetry import CurrentSpan, end_loop, start_loop

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..chain import CallAdvisorChain

__all__ = [
    "JudgeErrorPolicy",
    "SelfRefineAdvisor",
    "SkipPredicate",
    "default_skip_evaluation",
]

_log = logging.getLogger("jevrefine.self_refine")

SkipPredicate: TypeAlias = Callable[[ChatClientRequest, ChatClientResponse], bool]
"""`(attempt request, response) -> True` to return the response unjudged."""


class JudgeErrorPolicy(enum.Enum):
    """What to do when the judging call itself fails."""

    FAIL_OPEN = "fail_open"
    """On a transient failure (connection error, timeout, 408, 429, 5xx) log a warning and return
    the response unjudged. Client errors (400, 401, 403, 404, 422, ...) are still raised."""
    FAIL_CLOSED = "fail_closed"
    """Raise every judging error: an unjudged answer never ships."""


def default_skip_evaluation(request: ChatClientRequest, response: ChatClientResponse) -> bool:
    """Skip what is not the model's answer: tool calls, return-direct results, guardrail refusals.

    A guardrail refusal (context `jev.guardrail.outcome`) is not judged: retrying does not make an
    unsafe request safe. Seed 000 describes the older behaviour, where the refusal is judged and
    retried; pass `skip_evaluation=` without the guardrail test to get it back.
    """
    if ToolCallingAdvisor.returned_direct(response) or GuardrailOutcome.of(response) is not None:
        return True
    return any(g.output.tool_calls for g in response.chat_response.results)


class SelfRefineAdvisor:
    """Judges every answer and retries with the judge's feedback, a bounded number of times.

    Args:
        judge: What each answer is evaluated against.
        max_repeat_attempts: Retries after the first attempt, 1 to `MAX_REPEAT_ATTEMPTS_LIMIT`.
        fail_on_exhausted_attempts: Raise `SelfRefineFailedError` instead of returning the best
            attempt when attempts run out.
        skip_evaluation: `(request, response) -> bool`; true returns the response unjudged
            (default: `default_skip_evaluation`).
        judge_error_policy: What to do when the judging call fails (`JudgeErrorPolicy`).
        order: The position in the chain: `DEFAULT_ORDER` or `BEFORE_TOOLS_ORDER`.
        feedback_template: Appended to the original last user message on a retry; must contain
            `{feedback}`; may contain `{answer}` (the rejected answer).
        token_budget: Stop retrying once model and judge tokens together reach this.
        stream_mode: What streaming through the advisor does. `None` refuses it (a verdict needs
            the whole answer; `StreamingNotSupportedError` names the advisor). `"buffered"`:
            each attempt is streamed from the model and held until judged; only the returned
            answer's text is streamed (`stream()` works). `"live"`: every attempt's text is
            shown as generated and a rejected one is followed by `AttemptRejected`; only
            `spec.stream_events()` can show that, so `stream()` raises `UserError`. See
            `jevrefine.streaming` and docs/guide/streaming.md.
        strategy: How the attempts after the first are asked for and what counts as an answer
            (`RetryStrategy`: retry temperature and seeds, an identical retry, repeats and
            echoes of the feedback, where the feedback goes, best-of-N); `DEFAULT_STRATEGY`
            when `None`.
    """

    name: str = "self_refine"
    DEFAULT_ORDER: ClassVar[int] = LOWEST_PRECEDENCE - 2000
    """Inside everything else: the judge sees retrieval and the tool calls in the prompt; a retry
    re-asks the model without re-running retrieval or tools."""
    BEFORE_TOOLS_ORDER: ClassVar[int] = HIGHEST_PRECEDENCE + 250
    """Between memory and the tool loop: tool calls are recorded per attempt and a retry re-runs
    the tools (and retrieval at order 0, with the feedback in its query)."""
    MAX_REPEAT_ATTEMPTS_LIMIT: ClassVar[int] = 100
    """The cap on `max_repeat_attempts`: a criterion the model cannot meet must not loop forever."""

    def __init__(
        self,
        judge: Judge,
        *,
        max_repeat_attempts: int = 3,
        fail_on_exhausted_attempts: bool = False,
        skip_evaluation: SkipPredicate = default_skip_evaluation,
        judge_error_policy: JudgeErrorPolicy = JudgeErrorPolicy.FAIL_OPEN,
        order: int = DEFAULT_ORDER,
        feedback_template: str = DEFAULT_FEEDBACK_TEMPLATE,
        token_budget: int | None = None,
        stream_mode: str | None = None,
        strategy: RetryStrategy | None = None,
    ) -> None:
        if not isinstance(judge, Judge):
            raise UserError(f"SelfRefineAdvisor needs a Judge, got {type(judge).__name__}")
        limit = self.MAX_REPEAT_ATTEMPTS_LIMIT
        # Bounded above: retrying until an answer passes is not supported.
        max_repeat_attempts = _validate.integer(
            "max_repeat_attempts", max_repeat_attempts, minimum=1, maximum=limit, example=3
        )
        fail_on_exhausted_attempts = _validate.boolean(
            "fail_on_exhausted_attempts", fail_on_exhausted_attempts
        )
        if not callable(skip_evaluation):
            raise UserError(
                f"skip_evaluation={_validate.shown(skip_evaluation)} is not callable: pass a "
                "function (request, response) -> bool"
            )
        if not isinstance(judge_error_policy, JudgeErrorPolicy):
            raise UserError(
                f"judge_error_policy={_validate.shown(judge_error_policy)} is not a "
                "JudgeErrorPolicy: pass e.g. JudgeErrorPolicy.FAIL_OPEN"
            )
        order = _validate.order(order, example=self.DEFAULT_ORDER)
        _validate.text("feedback_template", feedback_template, example="Fix this: {feedback}")
        if "{feedback}" not in feedback_template:
            raise UserError(
                f"feedback_template={_validate.shown(feedback_template)} has no {{feedback}}: "
                "pass a template with {feedback} where the judge's feedback goes, e.g. "
                "'Fix this: {feedback}'"
            )
        token_budget = _validate.integer(
            "token_budget", token_budget, minimum=1, optional=True, example=4000
        )
        stream_mode = check_stream_mode(stream_mode)
        strategy = _validate.instance(
            "strategy",
            DEFAULT_STRATEGY if strategy is None else strategy,
            RetryStrategy,
            example="RetryStrategy(temperature=0.7)",
        )
        if strategy.samples > 1 and stream_mode is not None:
            raise UserError(
                f"RetryStrategy(samples={strategy.samples}) asks for concurrent samples, which "
                "cannot stream as one answer: use stream_mode=None, or samples=1"
            )
        self.judge = judge
        """What each answer is evaluated against."""
        self.max_repeat_attempts = max_repeat_attempts
        """Retries after the first attempt."""
        self.fail_on_exhausted_attempts = fail_on_exhausted_attempts
        """Raise instead of returning the best attempt."""
        self.skip_evaluation = skip_evaluation
        """Which responses are returned unjudged."""
        self.judge_error_policy = judge_error_policy
        """What a failing judging call does."""
        self.order = order
        """Position in the chain."""
        self.feedback_template = feedback_template
        """The retry section appended to the original last user message."""
        self.token_budget = token_budget
        """Model + judge tokens after which no further attempt is made."""
        self.stream_mode = stream_mode
        """`None` (streaming refused), `"buffered"` or `"live"`."""
        self.strategy = strategy
        """How retries are asked for and judged (`RetryStrategy`)."""
        self._settings = Settings(
            judge=judge,
            max_repeat_attempts=max_repeat_attempts,
            fail_on_exhausted_attempts=fail_on_exhausted_attempts,
            skip_evaluation=skip_evaluation,
            fails_open=judge_error_policy is JudgeErrorPolicy.FAIL_OPEN,
            feedback_template=feedback_template,
            token_budget=token_budget,
            strategy=strategy,
        )

    def with_judge(self, judge: Judge) -> SelfRefineAdvisor:
        """This advisor judging with `judge` instead: every other setting, its name and order kept.

        How `refine_many(..., judge_limit=...)` puts a batch's limit on the judge's calls
        without touching this advisor.

        Raises:
            UserError: `judge` is not a `Judge`.
        """
        if not isinstance(judge, Judge):
            raise UserError(f"SelfRefineAdvisor needs a Judge, got {type(judge).__name__}")
        other = copy.copy(self)
        other.judge = judge
        other._settings = dataclasses.replace(self._settings, judge=judge)
        return other

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Run attempts until one passes, attempts run out, or the answer is not to be judged."""
        telemetry = chain.telemetry
        refinement = Refinement(self._settings, self, request, chain.copy(self), telemetry)
        span = start_loop(telemetry, self.max_repeat_attempts, chain.trace_parent)
        started = time.perf_counter()
        try:
            with CurrentSpan(span):
                # Run to the end, not left at `Finished`: a generator left suspended is closed
                # later by a task of the loop's finalizer, one more task per call.
                async for step in refinement.steps(loop=span):
                    if type(step) is Finished:
                        response = step.response
        except BaseException as exc:
            elapsed = time.perf_counter() - started
            attempts = len(refinement.attempts)
            end_loop(telemetry, span, attempts, refinement.outcome, exc, elapsed=elapsed)
            raise
        elapsed = time.perf_counter() - started
        end_loop(telemetry, span, len(refinement.attempts), refinement.outcome, elapsed=elapsed)
        return response

    def advise_stream(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Stream as `stream_mode` says; with `None`, refused when iterated (use `call()`)."""
        check_streams(self.stream_mode, request)
        refinement = Refinement(self._settings, self, request, chain.copy(self), chain.telemetry)
        return refine_stream(self.stream_mode, refinement, self.max_repeat_attempts, chain)

    def __repr__(self) -> str:
        return (
            f"SelfRefineAdvisor({self.judge!r}, max_repeat_attempts={self.max_repeat_attempts}, "
            f"order={self.order})"
        )


DEFAULT_STRATEGY: RetryStrategy = RetryStrategy()
"""The strategy of an advisor given none (its options as measured best: refinement-value.md)."""
