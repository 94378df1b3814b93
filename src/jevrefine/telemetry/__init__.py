"""OpenTelemetry GenAI spans, metrics and events for model, Jev and tool calls.

jevrefine depends on `opentelemetry-api` only. Give a `ChatClient`, `JudgeClient` or
`ModelJudgeClient` an `InstrumentationSettings` (`instrumentation=`; the older
`tracer_provider=` / `meter_provider=` / `logger_provider=` arguments build the same value), set
the default for all of them once with `configure(...)`, or install an SDK globally; with none of
these, every call here is a cheap no-op.

One concept per module: `_settings` (the frozen settings value), `_runtime` (`Telemetry`, the
instruments built once from it), `_fastpath` (is anything listening?), `_calls` (one call's
span and metrics, error naming), `_content` (opt-in content), `_events`, `_names`. The wrapper
that records every model call with these is a model: `jevrefine.models.InstrumentedModel`
(`instrument_model(model, telemetry)`); nothing here knows a model type or the advisor chain.

Message content is recorded only on opt-in:
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only|event_only|span_and_event`, or
`capture_content=True`. API keys and authorization headers are never recorded.
"""

from __future__ import annotations

from ._calls import (
    CallRecorder as CallRecorder,
)
from ._calls import (
    ModelCallRecorder,
    ServedModel,
    error_type_of,
    same_call,
)
from ._calls import (
    call_attributes as call_attributes,
)
from ._calls import (
    clear_last_call as clear_last_call,
)
from ._calls import (
    joined_span as joined_span,
)
from ._calls import (
    last_call as last_call,
)
from ._calls import (
    mark_failed as mark_failed,
)
from ._calls import record_time_to_first_chunk as record_time_to_first_chunk
from ._calls import (
    status_code_of as status_code_of,
)
from ._calls import (
    usage_attributes as usage_attributes,
)
from ._content import finish_reason_of as finish_reason_of
from ._events import emit_event, emit_log_event
from ._names import (
    CHAT as CHAT,
)
from ._names import (
    ERROR_TYPE as ERROR_TYPE,
)
from ._names import (
    GEN_AI_CONVERSATION_ID as GEN_AI_CONVERSATION_ID,
)
from ._names import (
    GEN_AI_INPUT_MESSAGES as GEN_AI_INPUT_MESSAGES,
)
from ._names import (
    GEN_AI_OPERATION_NAME as GEN_AI_OPERATION_NAME,
)
from ._names import (
    GEN_AI_OUTPUT_MESSAGES as GEN_AI_OUTPUT_MESSAGES,
)
from ._names import (
    GEN_AI_PROVIDER_NAME as GEN_AI_PROVIDER_NAME,
)
from ._names import (
    GEN_AI_REQUEST_MODEL as GEN_AI_REQUEST_MODEL,
)
from ._names import (
    GEN_AI_RESPONSE_FINISH_REASONS as GEN_AI_RESPONSE_FINISH_REASONS,
)
from ._names import (
    GEN_AI_RESPONSE_ID as GEN_AI_RESPONSE_ID,
)
from ._names import (
    GEN_AI_RESPONSE_MODEL as GEN_AI_RESPONSE_MODEL,
)
from ._names import (
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK as GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
)
from ._names import (
    GEN_AI_SYSTEM as GEN_AI_SYSTEM,
)
from ._names import (
    GEN_AI_SYSTEM_INSTRUCTIONS as GEN_AI_SYSTEM_INSTRUCTIONS,
)
from ._names import (
    GEN_AI_TOKEN_TYPE as GEN_AI_TOKEN_TYPE,
)
from ._names import (
    GEN_AI_TOOL_CALL_ARGUMENTS as GEN_AI_TOOL_CALL_ARGUMENTS,
)
from ._names import (
    GEN_AI_TOOL_CALL_ID as GEN_AI_TOOL_CALL_ID,
)
from ._names import (
    GEN_AI_TOOL_CALL_RESULT as GEN_AI_TOOL_CALL_RESULT,
)
from ._names import (
    GEN_AI_TOOL_DEFINITIONS as GEN_AI_TOOL_DEFINITIONS,
)
from ._names import (
    GEN_AI_TOOL_DESCRIPTION as GEN_AI_TOOL_DESCRIPTION,
)
from ._names import (
    GEN_AI_TOOL_NAME as GEN_AI_TOOL_NAME,
)
from ._names import (
    GEN_AI_TOOL_TYPE as GEN_AI_TOOL_TYPE,
)
from ._names import (
    GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS as GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
)
from ._names import (
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS as GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
)
from ._names import (
    GEN_AI_USAGE_INPUT_TOKENS as GEN_AI_USAGE_INPUT_TOKENS,
)
from ._names import (
    GEN_AI_USAGE_OUTPUT_TOKENS as GEN_AI_USAGE_OUTPUT_TOKENS,
)
from ._names import (
    GEN_AI_USAGE_TOTAL_TOKENS as GEN_AI_USAGE_TOTAL_TOKENS,
)
from ._names import (
    GEN_AI_WORKFLOW_NAME as GEN_AI_WORKFLOW_NAME,
)
from ._names import (
    HTTP_RESPONSE_STATUS_CODE as HTTP_RESPONSE_STATUS_CODE,
)
from ._names import (
    INFERENCE_DETAILS_EVENT as INFERENCE_DETAILS_EVENT,
)
from ._names import (
    LATEST_NAMES as LATEST_NAMES,
)
from ._names import (
    METRIC_OPERATION_DURATION as METRIC_OPERATION_DURATION,
)
from ._names import (
    METRIC_REFINE_ATTEMPTS as METRIC_REFINE_ATTEMPTS,
)
from ._names import (
    METRIC_REFINE_OUTCOME as METRIC_REFINE_OUTCOME,
)
from ._names import (
    METRIC_TIME_PER_OUTPUT_CHUNK as METRIC_TIME_PER_OUTPUT_CHUNK,
)
from ._names import (
    METRIC_TIME_TO_FIRST_CHUNK as METRIC_TIME_TO_FIRST_CHUNK,
)
from ._names import (
    METRIC_TOKEN_USAGE as METRIC_TOKEN_USAGE,
)
from ._names import (
    METRIC_TOOL_DURATION as METRIC_TOOL_DURATION,
)
from ._names import (
    METRIC_WORKFLOW_DURATION as METRIC_WORKFLOW_DURATION,
)
from ._names import (
    REFINE_OUTCOME as REFINE_OUTCOME,
)
from ._names import (
    RELEASED_NAMES as RELEASED_NAMES,
)
from ._names import (
    SERVER_ADDRESS as SERVER_ADDRESS,
)
from ._names import (
    SERVER_PORT as SERVER_PORT,
)
from ._names import (
    STABILITY_OPT_IN_ENV as STABILITY_OPT_IN_ENV,
)
from ._names import (
    SYSTEM_ONE as SYSTEM_ONE,
)
from ._names import (
    MetricNames,
)
from ._names import (
    metric_names_from_env as metric_names_from_env,
)
from ._runtime import (
    ATTEMPT_BUCKETS,
    DURATION_BUCKETS,
    TOKEN_BUCKETS,
    WORKFLOW_BUCKETS,
    Telemetry,
)
from ._runtime import (
    INSTRUMENTATION_NAME as INSTRUMENTATION_NAME,
)
from ._runtime import (
    WORKFLOW_SPAN_NAME as WORKFLOW_SPAN_NAME,
)
from ._settings import (
    CAPTURE_CONTENT_ENV as CAPTURE_CONTENT_ENV,
)
from ._settings import (
    CaptureMode,
    InstrumentationSettings,
    TelemetryDefaults,
    capture_mode_from_env,
    configure,
    defaults,
    restore,
)
from ._settings import (
    settings_of as settings_of,
)

# The `X as X` names are for the rest of the package; `__all__` is the public surface.
__all__ = [
    "ATTEMPT_BUCKETS",
    "DURATION_BUCKETS",
    "TOKEN_BUCKETS",
    "WORKFLOW_BUCKETS",
    "CaptureMode",
    "InstrumentationSettings",
    "MetricNames",
    "ModelCallRecorder",
    "ServedModel",
    "Telemetry",
    "TelemetryDefaults",
    "capture_mode_from_env",
    "configure",
    "defaults",
    "emit_event",
    "emit_log_event",
    "error_type_of",
    "record_time_to_first_chunk",
    "restore",
    "same_call",
]
