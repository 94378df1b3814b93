"""OpenTelemetry GenAI spans, metrics and events for model, Jev and tool calls.

jevrefine depends on `opentelemetry-api` only. Pass `tracer_provider=` / `meter_provider=` /
`logger_provider=` to a `ChatClient`, `JudgeClient` or `ModelJudgeClient`, set defaults for all of
them once with `configure(...)`, or install an SDK globally; with none of these, every call here is
a cheap no-op.

Attribute names are our own constants (the semantic-conventions package marks its `gen_ai`
constants as moved to a repository that has no release yet). Message content is recorded only on
opt-in: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only|event_only|span_and_event`,
or `capture_content=True`. API keys and authorization headers are never recorded, whatever the
setting.
"""

from __future__ import annotations

import enum
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import _logs, metrics, trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.trace import SpanKind, Status, StatusCode

from ._version import __version__
from .messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    Prompt,
    SystemMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from opentelemetry.context import Context

    from .models.base import ChatModel

__all__ = [
    "ATTEMPT_BUCKETS",
    "DURATION_BUCKETS",
    "TOKEN_BUCKETS",
    "CaptureMode",
    "ModelCallRecorder",
    "Telemetry",
    "TelemetryDefaults",
    "capture_mode_from_env",
    "configure",
    "defaults",
    "emit_event",
    "record_time_to_first_chunk",
    "restore",
]

INSTRUMENTATION_NAME: Final = "jevrefine"

# Attribute names (OpenTelemetry GenAI semantic conventions, development status).
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_SYSTEM: Final = "gen_ai.system"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_OUTPUT_TYPE: Final = "gen_ai.output.type"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_WORKFLOW_NAME: Final = "gen_ai.workflow.name"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"

METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
METRIC_REFINE_OUTCOME: Final = "jevrefine.refine.outcome"
METRIC_REFINE_ATTEMPTS: Final = "jevrefine.refine.attempts"
REFINE_OUTCOME: Final = "jevrefine.refine.outcome"
INFERENCE_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"

DURATION_BUCKETS: Final = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
"""Bucket boundaries (seconds) of `gen_ai.client.operation.duration`, as the conventions give."""

TOKEN_BUCKETS: Final = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
"""Bucket boundaries of `gen_ai.client.token.usage`, as the conventions give."""

ATTEMPT_BUCKETS: Final = (1, 2, 3, 4, 5, 6, 8, 11, 16, 21, 51, 101)
"""Bucket boundaries of `jevrefine.refine.attempts` (1 to 101 attempts: the refine loop's cap)."""

WORKFLOW_SPAN_NAME: Final = "invoke_workflow jevrefine.chat_client"
CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class CaptureMode(enum.Enum):
    """Where message content is recorded (never by default)."""

    NO_CONTENT = "no_content"
    SPAN_ONLY = "span_only"
    EVENT_ONLY = "event_only"
    SPAN_AND_EVENT = "span_and_event"

    @property
    def on_spans(self) -> bool:
        """Whether content goes on span attributes."""
        return self in (CaptureMode.SPAN_ONLY, CaptureMode.SPAN_AND_EVENT)

    @property
    def on_events(self) -> bool:
        """Whether content goes on `gen_ai.client.inference.operation.details` log events."""
        return self in (CaptureMode.EVENT_ONLY, CaptureMode.SPAN_AND_EVENT)


def capture_mode_from_env() -> CaptureMode:
    """The content-capture mode the environment asks for; `NO_CONTENT` when unset or unknown."""
    raw = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower()
    if raw == "true":  # the older instrumentations' boolean form
        return CaptureMode.SPAN_ONLY
    try:
        return CaptureMode(raw)
    except ValueError:
        return CaptureMode.NO_CONTENT


@dataclass(frozen=True, slots=True)
class TelemetryDefaults:
    """What `configure(...)` set: used by every client built afterwards that is given none."""

    tracer_provider: trace.TracerProvider | None = None
    """Where spans go; `None`: the global provider."""
    meter_provider: metrics.MeterProvider | None = None
    """Where metrics go; `None`: the global provider."""
    logger_provider: _logs.LoggerProvider | None = None
    """Where log events go; `None`: the global provider (a no-op unless one is set)."""
    capture_content: bool | CaptureMode | None = None
    """Content capture; `None`: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`."""
    legacy_attributes: bool = False
    """Also emit seed 004's older attributes."""


_defaults = TelemetryDefaults()


def configure(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    logger_provider: _logs.LoggerProvider | None = None,
    capture_content: bool | CaptureMode | None = None,
    legacy_attributes: bool = False,
) -> TelemetryDefaults:
    """Set the telemetry defaults of every `ChatClient`, `JudgeClient` and `ModelJudgeClient`.

    Applies to clients built after the call; an argument given to a client's constructor wins.
    Each call replaces all defaults (`configure()` restores the global providers and the
    environment's content setting).

    ```python
    jevrefine.telemetry.configure(tracer_provider=provider, meter_provider=meters)
    ```

    Returns:
        The previous defaults, for `restore(...)`.
    """
    global _defaults
    previous = _defaults
    _defaults = TelemetryDefaults(
        tracer_provider, meter_provider, logger_provider, capture_content, legacy_attributes
    )
    return previous


def restore(saved: TelemetryDefaults) -> None:
    """Put back defaults that `configure(...)` returned."""
    global _defaults
    _defaults = saved


def defaults() -> TelemetryDefaults:
    """The defaults `configure(...)` set last."""
    return _defaults


def _capture_of(capture_content: bool | CaptureMode | None) -> CaptureMode:
    if capture_content is None:
        return capture_mode_from_env()
    if isinstance(capture_content, CaptureMode):
        return capture_content
    return CaptureMode.SPAN_ONLY if capture_content else CaptureMode.NO_CONTENT


class Telemetry:
    """The tracer, meter instruments, event logger and content-capture switch of one client.

    Build it once per client: instruments are created here, not on each call.
    """

    __slots__ = (
        "_follows_global_meter",
        "_follows_global_tracer",
        "_records",
        "capture",
        "events",
        "legacy_attributes",
        "operation_duration",
        "refine_attempts",
        "refine_outcome",
        "token_usage",
        "tool_duration",
        "tracer",
    )

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        logger_provider: _logs.LoggerProvider | None = None,
        capture_content: bool | CaptureMode | None = None,
        legacy_attributes: bool | None = None,
    ) -> None:
        configured = _defaults
        if tracer_provider is None:
            tracer_provider = configured.tracer_provider
        if meter_provider is None:
            meter_provider = configured.meter_provider
        # What `active()` needs: whether a provider given here records, or which of them stand
        # for the global ones (a proxy is the global's stand-in, even when passed in explicitly).
        self._follows_global_tracer = tracer_provider is None or isinstance(
            tracer_provider, trace.ProxyTracerProvider
        )
        self._follows_global_meter = meter_provider is None or isinstance(
            meter_provider, _PROXY_METER_PROVIDERS
        )
        self._records = not (
            self._follows_global_tracer or isinstance(tracer_provider, trace.NoOpTracerProvider)
        ) or not (
            self._follows_global_meter or isinstance(meter_provider, metrics.NoOpMeterProvider)
        )
        self.tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider)
        self.events: _logs.Logger = _logs.get_logger(
            INSTRUMENTATION_NAME,
            __version__,
            configured.logger_provider if logger_provider is None else logger_provider,
        )
        self.operation_duration = meter.create_histogram(
            METRIC_OPERATION_DURATION,
            unit="s",
            description="Duration of GenAI operations",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.token_usage = meter.create_histogram(
            METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.tool_duration = meter.create_histogram(
            METRIC_TOOL_DURATION,
            unit="s",
            description="Duration of tool executions",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.refine_outcome = meter.create_counter(
            METRIC_REFINE_OUTCOME,
            unit="{refinement}",
            description="Self-refine loops by outcome (passed, best_attempt, failed, unjudged, "
            "skipped)",
        )
        self.refine_attempts = meter.create_histogram(
            METRIC_REFINE_ATTEMPTS,
            unit="{attempt}",
            description="Attempts per self-refine loop",
            explicit_bucket_boundaries_advisory=ATTEMPT_BUCKETS,
        )
        self.capture = _capture_of(
            configured.capture_content if capture_content is None else capture_content
        )
        self.legacy_attributes = (
            configured.legacy_attributes if legacy_attributes is None else legacy_attributes
        )

    def active(self) -> bool:
        """Whether a call's spans, metrics or content could reach anything, checked per call.

        `False` while the tracer and meter providers are the OpenTelemetry API's no-ops (no SDK
        installed, or `NoOp*Provider`s given) and no content is captured: the call then skips its
        span and metric bookkeeping, which would be thrown away. The global providers are looked
        up on every call, so an SDK installed after the client was built is used from then on.
        """
        return (
            self._records
            or self.capture is not CaptureMode.NO_CONTENT
            or (
                self._follows_global_tracer
                and _global_provider_set(
                    trace, "_TRACER_PROVIDER", trace.get_tracer_provider, _NO_OP_TRACER_PROVIDERS
                )
            )
            or (
                self._follows_global_meter
                and _global_provider_set(
                    _metrics_api,
                    "_METER_PROVIDER",
                    metrics.get_meter_provider,
                    _NO_OP_METER_PROVIDERS,
                )
            )
        )

    def start_workflow_span(self) -> trace.Span:
        """Start the INTERNAL root span of one `ChatClient` call (not made current)."""
        return self.tracer.start_span(
            WORKFLOW_SPAN_NAME,
            kind=SpanKind.INTERNAL,
            attributes={
                GEN_AI_OPERATION_NAME: "invoke_workflow",
                GEN_AI_WORKFLOW_NAME: "jevrefine.chat_client",
            },
        )


def _global_provider_set(
    module: object, name: str, getter: Callable[[], object], no_ops: tuple[type, ...]
) -> bool:
    """Whether a global provider other than the API's no-ops is set.

    `get_tracer_provider()` and `get_meter_provider()` look the environment up on every call
    while no provider is set (an exception raised and caught inside `os.environ`): 2.5 µs each,
    twice per model call. The module globals they return say the same for nothing; they are the
    names OpenTelemetry's own test utilities reset. Should they move, the public getters are used.
    (The environment's provider, `OTEL_PYTHON_*_PROVIDER`, is loaded when `Telemetry` is built.)
    """
    provider = getattr(module, name, _MISSING)
    if provider is _MISSING:
        provider = getter()
    return provider is not None and not isinstance(provider, no_ops)


_MISSING: Final = object()
_NO_OP_TRACER_PROVIDERS: Final = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
# The meter API's module globals and its stand-in for an unset global provider have no public
# names. Should they move, the public getter is used and only `NoOpMeterProvider` counts as off:
# metrics are recorded when in doubt, never lost.
_metrics_api: Final = sys.modules.get("opentelemetry.metrics._internal")
_PROXY_METER_PROVIDERS: Final[tuple[type[metrics.MeterProvider], ...]] = tuple(
    kind
    for kind in (getattr(_metrics_api, "_ProxyMeterProvider", None),)
    if isinstance(kind, type) and issubclass(kind, metrics.MeterProvider)
)
_NO_OP_METER_PROVIDERS: Final[tuple[type[metrics.MeterProvider], ...]] = (
    *_PROXY_METER_PROVIDERS,
    metrics.NoOpMeterProvider,
)


def emit_event(
    events: _logs.Logger,
    span: trace.Span,
    name: str,
    attributes: Mapping[str, Any],
    *,
    severity: SeverityNumber = SeverityNumber.INFO,
) -> None:
    """Record event `name` on `span` and as a log event parented to `span` (the logs API).

    The one helper behind every event jevrefine emits (`gen_ai.evaluation.result`,
    `gen_ai.guardrail.result`, `gen_ai.client.inference.operation.details`): the span event for
    trace viewers, the log event for log pipelines. Without a logger provider the log side is the
    API's no-op.
    """
    if span.is_recording():
        span.add_event(name, _flat(attributes))
    events.emit(
        event_name=name,
        attributes=attributes,
        context=trace.set_span_in_context(span),
        severity_number=severity,
    )


def record_time_to_first_chunk(span: trace.Span, seconds: float) -> None:
    """Record on `span` how long a stream took to deliver its first chunk, in seconds.

    The one place the attribute is written (`gen_ai.response.time_to_first_chunk`), for model
    streams and for each self-refine attempt alike.
    """
    span.set_attribute(GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, seconds)


def _flat(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    # Span event attributes must be primitives or lists of them; log attributes may be structured.
    if all(isinstance(v, (str, bool, int, float, list, tuple)) for v in attributes.values()):
        return attributes
    return {
        k: v if isinstance(v, (str, bool, int, float)) else json.dumps(v, ensure_ascii=False)
        for k, v in attributes.items()
    }


def _legacy_finish_reason(reason: str) -> str:
    return reason.upper()


class ModelCallRecorder:
    """Records one model call as a `chat {model}` CLIENT span plus duration and token metrics.

    Used by the chain's terminal link for every `ChatModel`, for `call` and `stream` alike:
    `start()`, then `finish(response)` or `fail(exc)`.
    """

    __slots__ = (
        "_attributes",
        "_input",
        "_metric_attributes",
        "_started",
        "_telemetry",
        "prompt",
        "span",
    )

    def __init__(
        self,
        telemetry: Telemetry,
        model: ChatModel,
        prompt: Prompt,
        *,
        stream: bool = False,
        conversation_id: str | None = None,
        parent: Context | None = None,
    ) -> None:
        self._telemetry = telemetry
        self.prompt = prompt
        options = prompt.options
        request_model = options.model or model.model_name
        provider = model.provider
        metric_attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: "chat",
            GEN_AI_PROVIDER_NAME: provider,
            GEN_AI_REQUEST_MODEL: request_model,
        }
        if telemetry.legacy_attributes:
            metric_attributes[GEN_AI_SYSTEM] = provider
        address = model.server_address
        if address is not None:
            metric_attributes[SERVER_ADDRESS] = address
            port = model.server_port
            if port is not None:
                metric_attributes[SERVER_PORT] = port
        attributes = dict(metric_attributes)
        if options.temperature is not None:
            attributes[GEN_AI_REQUEST_TEMPERATURE] = options.temperature
        if options.top_p is not None:
            attributes[GEN_AI_REQUEST_TOP_P] = options.top_p
        if options.max_tokens is not None:
            attributes[GEN_AI_REQUEST_MAX_TOKENS] = options.max_tokens
        if options.stop:
            attributes[GEN_AI_REQUEST_STOP_SEQUENCES] = list(options.stop)
        if options.seed is not None:
            attributes[GEN_AI_REQUEST_SEED] = options.seed
        if options.response_format is not None and options.response_format.type != "text":
            attributes[GEN_AI_OUTPUT_TYPE] = "json"
        if stream:
            attributes[GEN_AI_REQUEST_STREAM] = True
        if conversation_id is not None:
            attributes[GEN_AI_CONVERSATION_ID] = conversation_id
        self._metric_attributes = metric_attributes
        self._attributes = attributes
        self.span = telemetry.tracer.start_span(
            f"chat {request_model}", context=parent, kind=SpanKind.CLIENT, attributes=attributes
        )
        # Built once for both the span and the event (span_and_event), and only on opt-in.
        self._input = (
            None if telemetry.capture is CaptureMode.NO_CONTENT else _input_content(prompt)
        )
        if self._input is not None and telemetry.capture.on_spans and self.span.is_recording():
            self.span.set_attributes(_as_json(self._input))
        self._started = time.perf_counter()

    def finish(self, response: ChatResponse) -> None:
        """Record a successful response and end the span."""
        elapsed = time.perf_counter() - self._started
        meta = response.metadata
        span = self.span
        metric_attributes = self._metric_attributes
        if meta.model:
            metric_attributes[GEN_AI_RESPONSE_MODEL] = meta.model
        if span.is_recording():
            legacy = self._telemetry.legacy_attributes
            attributes: dict[str, Any] = {}
            if meta.id:
                attributes[GEN_AI_RESPONSE_ID] = meta.id
            if meta.model:
                attributes[GEN_AI_RESPONSE_MODEL] = meta.model
            reasons = meta.finish_reasons or tuple(
                g.finish_reason for g in response.results if g.finish_reason
            )
            if reasons:
                attributes[GEN_AI_RESPONSE_FINISH_REASONS] = [
                    _legacy_finish_reason(r) if legacy else r for r in reasons
                ]
            attributes[GEN_AI_USAGE_INPUT_TOKENS] = meta.usage.input_tokens
            attributes[GEN_AI_USAGE_OUTPUT_TOKENS] = meta.usage.output_tokens
            if self._telemetry.capture.on_spans:
                attributes[GEN_AI_OUTPUT_MESSAGES] = json.dumps(
                    _output_content(response), ensure_ascii=False
                )
            span.set_attributes(attributes)
        telemetry = self._telemetry
        if telemetry.capture.on_events:
            self._details_event(response)
        span.end()
        telemetry.operation_duration.record(elapsed, metric_attributes)
        usage = meta.usage
        if usage.input_tokens or usage.output_tokens:
            telemetry.token_usage.record(
                usage.input_tokens, {**metric_attributes, GEN_AI_TOKEN_TYPE: "input"}
            )
            telemetry.token_usage.record(
                usage.output_tokens, {**metric_attributes, GEN_AI_TOKEN_TYPE: "output"}
            )
            if telemetry.legacy_attributes:
                telemetry.token_usage.record(
                    usage.total_tokens, {**metric_attributes, GEN_AI_TOKEN_TYPE: "total"}
                )

    def _details_event(self, response: ChatResponse) -> None:
        """The opt-in `gen_ai.client.inference.operation.details` event, content structured."""
        meta = response.metadata
        attributes: dict[str, Any] = {**self._attributes, **(self._input or {})}
        attributes[GEN_AI_OUTPUT_MESSAGES] = _output_content(response)
        if meta.id:
            attributes[GEN_AI_RESPONSE_ID] = meta.id
        if meta.model:
            attributes[GEN_AI_RESPONSE_MODEL] = meta.model
        attributes[GEN_AI_USAGE_INPUT_TOKENS] = meta.usage.input_tokens
        attributes[GEN_AI_USAGE_OUTPUT_TOKENS] = meta.usage.output_tokens
        emit_event(
            self._telemetry.events,
            self.span,
            INFERENCE_DETAILS_EVENT,
            attributes,
            severity=SeverityNumber.DEBUG,
        )

    def fail(self, exc: BaseException) -> None:
        """Record a failure (status ERROR, `error.type`) and end the span."""
        elapsed = time.perf_counter() - self._started
        error_type = error_type_of(exc)
        span = self.span
        span.set_attribute(ERROR_TYPE, error_type)
        span.set_status(Status(StatusCode.ERROR, _status_description(exc)))
        span.end()
        self._telemetry.operation_duration.record(
            elapsed, {**self._metric_attributes, ERROR_TYPE: error_type}
        )


def error_type_of(exc: BaseException) -> str:
    """The low-cardinality `error.type` of an exception: its class's qualified name."""
    return type(exc).__qualname__


def _status_description(exc: BaseException) -> str:
    # Exception texts are ours or the providers' error messages; neither carries API keys.
    return f"{type(exc).__qualname__}: {exc}"[:1000]


def _parts_of(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, (SystemMessage, UserMessage)):
        return [{"type": "text", "content": message.text}]
    if isinstance(message, AssistantMessage):
        parts: list[dict[str, Any]] = []
        if message.text:
            parts.append({"type": "text", "content": message.text})
        parts.extend(
            {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.parsed_arguments()}
            for c in message.tool_calls
        )
        return parts
    return [
        {"type": "tool_call_response", "id": r.id, "response": r.data} for r in message.responses
    ]


def _input_content(prompt: Prompt) -> dict[str, list[dict[str, Any]]]:
    """`gen_ai.input.messages` and `gen_ai.system_instructions` in the conventions' shape."""
    system = [
        {"type": "text", "content": m.text} for m in prompt.messages if isinstance(m, SystemMessage)
    ]
    messages: list[dict[str, Any]] = [
        {"role": m.role, "parts": _parts_of(m)}
        for m in prompt.messages
        if not isinstance(m, SystemMessage)
    ]
    attributes: dict[str, list[dict[str, Any]]] = {GEN_AI_INPUT_MESSAGES: messages}
    if system:
        attributes[GEN_AI_SYSTEM_INSTRUCTIONS] = system
    return attributes


def _as_json(structured: Mapping[str, Any]) -> dict[str, str]:
    # Span attributes cannot hold objects: the conventions let spans store the JSON text.
    return {k: json.dumps(v, ensure_ascii=False) for k, v in structured.items()}


def _output_content(response: ChatResponse) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "parts": _parts_of(g.output), "finish_reason": g.finish_reason}
        for g in response.results
    ]
