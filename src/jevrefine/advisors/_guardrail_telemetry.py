"""The guardrail's telemetry: the verdict on the `apply_guardrail` span, and its result events."""

from __future__ import annotations

from typing import Any, Final

from opentelemetry import trace
from opentelemetry._logs import Logger

from ..telemetry import GEN_AI_PROVIDER_NAME, emit_event
from ._guardrail_policy import SEVERITY_QUESTION, GuardrailOutcome, GuardrailVerdict, Hazard

__all__ = ["COMPONENT", "GUARDRAIL_RESULT_EVENT", "SOURCE", "record_verdict"]

GUARDRAIL_RESULT_EVENT: Final = "gen_ai.guardrail.result"
"""The event describing one guardrail result (a span event and a log event)."""
COMPONENT: Final = "gen_ai.guardrail.component.name"
"""Which guardrail screened: `jev_guardrail.input` or `jev_guardrail.output`."""
SOURCE: Final = "gen_ai.guardrail.source"
"""What was screened: `input` or `output`."""
_RESULT_TYPE: Final = "gen_ai.guardrail.result.type"
_RESULT_VALUE: Final = "gen_ai.guardrail.result.value"
_RESULT_REASON: Final = "gen_ai.guardrail.result.reason"
_RISK_CATEGORY: Final = "gen_ai.guardrail.risk.category"
_RISK_SCORE: Final = "gen_ai.guardrail.risk.score"
_RULE_ID: Final = "gen_ai.guardrail.policy.rule.id"


def record_verdict(
    span: trace.Span,
    events: Logger,
    component: str,
    verdict: GuardrailVerdict,
    hazards: tuple[Hazard, ...],
) -> None:
    """The verdict on the span; one `gen_ai.guardrail.result` event per hazard and one overall.

    Each event goes on the span and, through the logs API, to the logger provider (parented to
    the span), through the helper every jevrefine event uses.
    """
    results: list[dict[str, Any]] = []
    if span.is_recording():
        span.set_attributes(
            {
                _RESULT_TYPE: "outcome",
                _RESULT_VALUE: verdict.outcome.name,
                _RESULT_REASON: verdict.summary(),
            }
        )
    common = {COMPONENT: component, SOURCE: verdict.direction, GEN_AI_PROVIDER_NAME: "typesafe"}
    for hazard in hazards:
        if hazard.name in verdict.triggered:
            posture = hazard.action.name
        elif hazard.name in verdict.flagged:
            posture = GuardrailOutcome.REVIEW.name
        else:
            posture = GuardrailOutcome.PASS.name
        results.append(
            {
                **common,
                _RULE_ID: hazard.name,
                _RISK_CATEGORY: hazard.name,
                _RISK_SCORE: verdict.scores[hazard.name],
                _RESULT_TYPE: "hazard",
                _RESULT_VALUE: posture,
            }
        )
    results.append(
        {
            **common,
            _RISK_CATEGORY: SEVERITY_QUESTION,
            _RISK_SCORE: verdict.severity,
            _RESULT_TYPE: "outcome",
            _RESULT_VALUE: verdict.outcome.name,
            _RESULT_REASON: verdict.summary(),
        }
    )
    for attributes in results:
        emit_event(events, span, GUARDRAIL_RESULT_EVENT, attributes)
