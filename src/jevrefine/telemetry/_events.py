"""Events: on the span they describe and as log events parented to it (the logs API)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber

if TYPE_CHECKING:
    from collections.abc import Mapping

    from opentelemetry import _logs

__all__ = ["emit_event", "emit_log_event"]


def emit_event(
    events: _logs.Logger,
    span: trace.Span,
    name: str,
    attributes: Mapping[str, Any],
    *,
    severity: SeverityNumber = SeverityNumber.INFO,
    log_parent: trace.Span | None = None,
) -> None:
    """Record event `name` on `span` and as a log event (the logs API).

    The log event is parented to `span`, or to `log_parent` when the event describes another
    (already ended) span.

    The helper behind the result events (`gen_ai.evaluation.result`, `gen_ai.guardrail.result`):
    the span event for trace viewers, the log event for log pipelines. Without a logger provider
    the log side is the API's no-op. Content never goes through here (see `emit_log_event`).
    """
    if span.is_recording():
        span.add_event(name, _flat(attributes))
    emit_log_event(events, log_parent or span, name, attributes, severity=severity)


def emit_log_event(
    events: _logs.Logger,
    span: trace.Span,
    name: str,
    attributes: Mapping[str, Any],
    *,
    severity: SeverityNumber = SeverityNumber.INFO,
) -> None:
    """Record event `name` as a log event only, parented to `span`, attributes structured.

    For `gen_ai.client.inference.operation.details`, which carries message content: content
    belongs on span attributes (`span_only`) or log events (`event_only`), never on span events,
    where `event_only` users asked it not to be.
    """
    events.emit(
        event_name=name,
        attributes=attributes,
        context=trace.set_span_in_context(span),
        severity_number=severity,
    )


def _flat(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    # Span event attributes must be primitives or lists of them; log attributes may be structured.
    if all(isinstance(v, (str, bool, int, float, list, tuple)) for v in attributes.values()):
        return attributes
    return {
        k: v if isinstance(v, (str, bool, int, float)) else json.dumps(v, ensure_ascii=False)
        for k, v in attributes.items()
    }
