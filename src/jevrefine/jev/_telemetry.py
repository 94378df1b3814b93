"""The `system_one {model}` CLIENT span and metrics of one Jev call (provider `typesafe`).

A Jev call is recorded under its own operation, `system_one` (`jevrefine.telemetry.SYSTEM_ONE`):
it classifies, it does not chat, so it reports no finish reason. Under a `JevChatModel` the call
is the chain's `chat` span itself (`jevrefine.telemetry.same_call`), and records its retries there.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Final

from opentelemetry._logs import SeverityNumber
from opentelemetry.trace import SpanKind

from ..telemetry import (
    ERROR_TYPE,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
    HTTP_RESPONSE_STATUS_CODE,
    INFERENCE_DETAILS_EVENT,
    SYSTEM_ONE,
    CallRecorder,
    Telemetry,
    call_attributes,
    emit_log_event,
    error_type_of,
    mark_failed,
    status_code_of,
    usage_attributes,
)
from .errors import JudgeAPIError
from .responses import ChoiceAnswer, NoulAnswer, ScoreAnswer

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from .responses import SystemOneResponse

PROVIDER: Final = "typesafe"
"""The `gen_ai.provider.name` of Jev calls."""
RETRY_EVENT: Final = "jevrefine.retry"
"""The span event recorded before each retry of a Jev call."""
RETRY_ATTEMPT: Final = "jevrefine.retry.attempt"
RETRY_DELAY: Final = "jevrefine.retry.delay_s"
HTTP_STATUS: Final = HTTP_RESPONSE_STATUS_CODE


def record_retry(span: Span, retry: int, delay: float, error: BaseException) -> None:
    """Add the retry event: which retry, how long we wait, what failed."""
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {
        RETRY_ATTEMPT: retry,
        RETRY_DELAY: round(delay, 6),
        ERROR_TYPE: error_type_of(error),
    }
    status = status_code_of(error)
    if status is not None:
        attributes[HTTP_STATUS] = status
    span.add_event(RETRY_EVENT, attributes)


class JudgeCallRecorder(CallRecorder):
    """Opens the span at `start`, closes it with `finish(response)` or `fail(error)`.

    With content capture on, the request body (state and questions; never the headers, so never
    the key) is the input message and the answers the output message.
    """

    __slots__ = ("_body", "_metric_attributes", "_started", "_telemetry", "span")

    def __init__(
        self,
        telemetry: Telemetry,
        model: str,
        address: str | None,
        port: int | None,
        body: bytes | None = None,
    ) -> None:
        self._telemetry = telemetry
        self._body = body
        attributes = call_attributes(
            telemetry,
            operation=SYSTEM_ONE,
            provider=PROVIDER,
            request_model=model,
            address=address,
            port=port,
        )
        self._metric_attributes = attributes
        self.span = telemetry.tracer.start_span(
            f"{SYSTEM_ONE} {model}", kind=SpanKind.CLIENT, attributes=attributes
        )
        if body is not None and telemetry.capture.on_spans and self.span.is_recording():
            self.span.set_attribute(
                GEN_AI_INPUT_MESSAGES, json.dumps(_input_messages(body), ensure_ascii=False)
            )
        self._started = time.perf_counter()

    def finish(self, response: SystemOneResponse) -> None:
        """Record the response id (the request id header), model, usage; end the span."""
        elapsed = time.perf_counter() - self._started
        span = self.span
        usage = response.usage
        if span.is_recording():
            attributes: dict[str, Any] = {
                GEN_AI_RESPONSE_MODEL: response.model,
                **usage_attributes(usage, legacy=self._telemetry.legacy_attributes),
            }
            if response.request_id is not None:
                attributes[GEN_AI_RESPONSE_ID] = response.request_id
            if self._body is not None and self._telemetry.capture.on_spans:
                attributes[GEN_AI_OUTPUT_MESSAGES] = json.dumps(
                    _output_messages(response), ensure_ascii=False
                )
            span.set_attributes(attributes)
        if self._body is not None and self._telemetry.capture.on_events:
            details: dict[str, Any] = {
                **self._metric_attributes,
                GEN_AI_RESPONSE_MODEL: response.model,
                GEN_AI_INPUT_MESSAGES: _input_messages(self._body),
                GEN_AI_OUTPUT_MESSAGES: _output_messages(response),
            }
            if response.request_id is not None:
                details[GEN_AI_RESPONSE_ID] = response.request_id
            emit_log_event(
                self._telemetry.events,
                span,
                INFERENCE_DETAILS_EVENT,
                details,
                severity=SeverityNumber.DEBUG,
            )
        span.end()
        metric_attributes = {**self._metric_attributes, GEN_AI_RESPONSE_MODEL: response.model}
        telemetry = self._telemetry
        telemetry.operation_duration.record(elapsed, metric_attributes)
        telemetry.record_usage(usage, metric_attributes)

    def fail(self, error: BaseException) -> None:
        """Record a failure (status ERROR, `error.type`, the HTTP status) and end the span."""
        elapsed = time.perf_counter() - self._started
        span = self.span
        # Our messages carry the status, the server's text and the request id, never the key.
        error_type = mark_failed(span, error)
        if isinstance(error, JudgeAPIError) and error.request_id is not None:
            span.set_attribute(GEN_AI_RESPONSE_ID, error.request_id)
        span.end()
        self._telemetry.operation_duration.record(
            elapsed, {**self._metric_attributes, ERROR_TYPE: error_type}
        )


def _input_messages(body: bytes) -> list[dict[str, Any]]:
    # The JSON body we send (state, model, questions): content only, the headers are elsewhere.
    return [{"role": "user", "parts": [{"type": "text", "content": body.decode("utf-8")}]}]


def _output_messages(response: SystemOneResponse) -> list[dict[str, Any]]:
    values: dict[str, Any] = {}
    for name, answer in response.answers.items():
        if isinstance(answer, NoulAnswer):
            values[name] = answer.noul
        elif isinstance(answer, ChoiceAnswer):
            values[name] = answer.choice
        elif isinstance(answer, ScoreAnswer):
            values[name] = answer.score
    text = json.dumps(values, ensure_ascii=False)
    return [
        {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}
    ]
