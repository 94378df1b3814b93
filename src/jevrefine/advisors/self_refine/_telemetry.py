"""Spans and events of the self-refine loop.

One INTERNAL `invoke_workflow self_refine` span around the loop (attempt count, limit, outcome),
one INTERNAL `self_refine.attempt` span per attempt (the model call and the judging call nest
under it), and one `gen_ai.evaluation.result` event per criterion on the attempt it judged.

When nothing listens (`Telemetry.listening()` false: no tracer, meter or logger provider records,
no content is captured), `start_loop` hands out `QUIET_SPAN` and every helper here does nothing
for it: a refinement then builds no spans, contexts, events or metric points that would be thrown
away (`bench_chain_overhead`, and `bench_adapter_cpu`'s `refine_many` rows; figures in
docs/benchmarks.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan, SpanKind

from ...telemetry import (
    ERROR_TYPE,
    GEN_AI_OPERATION_NAME,
    GEN_AI_RESPONSE_ID,
    GEN_AI_WORKFLOW_NAME,
    emit_event,
    error_type_of,
)
from ...telemetry import mark_failed as _mark_failed

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextvars import Token
    from types import TracebackType

    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from ...judge.verdict import Verdict
    from ...telemetry import Telemetry

__all__ = [
    "ATTEMPT_SPAN_NAME",
    "EVALUATION_ESCALATED",
    "EVALUATION_EVENT",
    "LOOP_SPAN_NAME",
    "QUIET_SPAN",
    "end_loop",
    "mark_failed",
    "record_evaluator_error",
    "record_verdict",
    "start_attempt",
    "start_loop",
]

WORKFLOW_NAME: Final = "self_refine"
LOOP_SPAN_NAME: Final = f"invoke_workflow {WORKFLOW_NAME}"
ATTEMPT_SPAN_NAME: Final = "self_refine.attempt"
EVALUATION_EVENT: Final = "gen_ai.evaluation.result"

REFINE_ATTEMPTS: Final = "jevrefine.refine.attempts"
REFINE_MAX_REPEAT_ATTEMPTS: Final = "jevrefine.refine.max_repeat_attempts"
REFINE_OUTCOME: Final = "jevrefine.refine.outcome"
REFINE_ATTEMPT: Final = "jevrefine.refine.attempt"
REFINE_PASSED: Final = "jevrefine.refine.passed"
EVALUATION_ESCALATED: Final = "jevrefine.evaluation.escalated"
"""On a criterion's evaluation event: true when the judge's stronger client decided it, false
when that escalation failed (the first client's finding stands); absent otherwise."""
EVALUATION_NAME: Final = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"


QUIET_SPAN: Final[Span] = NonRecordingSpan(INVALID_SPAN_CONTEXT)
"""The loop's (and its attempts') span when nothing listens: its own object, never one a tracer
returns, so the helpers here can tell "skip everything" from a no-op tracer's span (whose
evaluation log events may still reach a logger provider)."""


def start_loop(telemetry: Telemetry, max_repeat_attempts: int, parent: Context | None) -> Span:
    """Start (not make current) the loop span; `QUIET_SPAN` when nothing listens."""
    if not telemetry.listening():
        return QUIET_SPAN
    return telemetry.tracer.start_span(
        LOOP_SPAN_NAME,
        context=parent,
        kind=SpanKind.INTERNAL,
        attributes={
            GEN_AI_OPERATION_NAME: "invoke_workflow",
            GEN_AI_WORKFLOW_NAME: WORKFLOW_NAME,
            REFINE_MAX_REPEAT_ATTEMPTS: max_repeat_attempts,
        },
    )


def end_loop(
    telemetry: Telemetry,
    span: Span,
    attempts: int,
    outcome: str | None,
    error: BaseException | None = None,
    *,
    elapsed: float | None = None,
) -> None:
    """Record the attempt count and outcome (and the error, if any), count it, end the span.

    `elapsed` (seconds since `start_loop`) goes to the workflow duration metric.
    """
    if span is QUIET_SPAN:
        return
    span.set_attribute(REFINE_ATTEMPTS, attempts)
    if outcome is not None:
        span.set_attribute(REFINE_OUTCOME, outcome)
        metric_attributes = {REFINE_OUTCOME: outcome}
        telemetry.refine_outcome.add(1, metric_attributes)
        telemetry.refine_attempts.record(attempts, metric_attributes)
    error_type = None if error is None else mark_failed(span, error)
    span.end()
    if elapsed is not None:
        telemetry.record_workflow(elapsed, WORKFLOW_NAME, error_type)


def mark_failed(span: Span, error: BaseException) -> str:
    """Status ERROR and `error.type`; never the exception's text (it may quote content)."""
    return _mark_failed(span, error, describe=False)


class CurrentSpan:
    """`span` made current for a block, as `trace.use_span` (recording nothing itself) does.

    `mark_failure` marks the span failed when the block raises (any `BaseException`, while the
    span is still current); `end_on_exit` ends it when the block is left.

    A slotted class rather than a generator context manager: a refinement keeps two of these
    (the loop's and the attempt's) for as long as it runs, and `use_span`'s generator frame
    holds about twice this one's memory (measured with tracemalloc; docs/benchmarks.md).
    """

    __slots__ = ("_end_on_exit", "_mark_failure", "_span", "_token")

    _token: Token[Context]  # set on entry

    def __init__(
        self, span: Span, *, end_on_exit: bool = False, mark_failure: bool = False
    ) -> None:
        self._span = span
        self._end_on_exit = end_on_exit
        self._mark_failure = mark_failure

    def __enter__(self) -> Span:
        if self._span is not QUIET_SPAN:
            self._token = context_api.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._span is QUIET_SPAN:
            return
        try:
            if exc is not None and self._mark_failure:
                mark_failed(self._span, exc)
            context_api.detach(self._token)
        finally:
            if self._end_on_exit:
                self._span.end()


def start_attempt(
    telemetry: Telemetry, number: int, parent: Context | None = None, *, loop: Span | None = None
) -> Span:
    """Start (not make current) the span of attempt `number` (1 for the first).

    `parent`: the loop span's context for a stream; `None` takes the current context. `loop`:
    the loop's span, when at hand (`QUIET_SPAN` there means nothing listens: quiet here too).
    """
    if loop is QUIET_SPAN:
        return QUIET_SPAN
    return telemetry.tracer.start_span(
        ATTEMPT_SPAN_NAME,
        context=parent,
        kind=SpanKind.INTERNAL,
        attributes={REFINE_ATTEMPT: number},
    )


def record_verdict(
    telemetry: Telemetry,
    span: Span,
    verdict: Verdict,
    response_id: str | None,
    evaluated: Span | None = None,
) -> None:
    """One `gen_ai.evaluation.result` event per criterion, on the judged attempt's span.

    Each is a span event on the attempt (trace viewers) and a log event (logs API) parented to
    `evaluated`, the `chat` span of the answer it judges, as the conventions ask (the attempt's
    span when that is not known). An explanation is sent whenever the finding has one, passes
    included.
    """
    if span is QUIET_SPAN:
        return
    parent = evaluated if evaluated is not None else span
    span.set_attribute(REFINE_PASSED, verdict.passed)
    for finding in verdict.findings:
        attributes: dict[str, Any] = {
            EVALUATION_NAME: finding.criterion,
            EVALUATION_SCORE_LABEL: finding.outcome.label,
        }
        if finding.score is not None:
            attributes[EVALUATION_SCORE_VALUE] = float(finding.score)
        if finding.detail:
            attributes[EVALUATION_EXPLANATION] = finding.detail
        if finding.escalated or finding.escalation_failed:
            attributes[EVALUATION_ESCALATED] = finding.escalated
        if response_id:
            attributes[GEN_AI_RESPONSE_ID] = response_id
        emit_event(telemetry.events, span, EVALUATION_EVENT, attributes, log_parent=parent)


def record_evaluator_error(
    telemetry: Telemetry,
    span: Span,
    criteria: Sequence[str],
    error: BaseException,
    response_id: str | None,
) -> None:
    """One `gen_ai.evaluation.result` per criterion the failed judging call should have answered.

    The conventions' way to say the evaluator itself failed: the criterion's name and
    `error.type`, with no score.
    """
    if span is QUIET_SPAN:
        return
    for name in criteria:
        attributes: dict[str, Any] = {EVALUATION_NAME: name, ERROR_TYPE: error_type_of(error)}
        if response_id:
            attributes[GEN_AI_RESPONSE_ID] = response_id
        emit_event(telemetry.events, span, EVALUATION_EVENT, attributes)
