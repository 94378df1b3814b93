"""`Telemetry`: the tracer, instruments and event logger of one client, built once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from opentelemetry import _logs, metrics, trace
from opentelemetry.trace import SpanKind

from .._version import __version__
from . import _fastpath
from ._names import (
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOKEN_TYPE,
    GEN_AI_WORKFLOW_NAME,
    METRIC_REFINE_ATTEMPTS,
    METRIC_REFINE_OUTCOME,
    METRIC_TOOL_DURATION,
    METRIC_WORKFLOW_DURATION,
)
from ._settings import CaptureMode, InstrumentationSettings, settings_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from opentelemetry.metrics import Histogram, Meter

    from ..messages import Usage

__all__ = [
    "ATTEMPT_BUCKETS",
    "DURATION_BUCKETS",
    "TOKEN_BUCKETS",
    "WORKFLOW_BUCKETS",
    "Telemetry",
]

INSTRUMENTATION_NAME: Final = "jevrefine"
WORKFLOW_SPAN_NAME: Final = "invoke_workflow jevrefine.chat_client"

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

WORKFLOW_BUCKETS: Final = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200)
"""Bucket boundaries (seconds) of `gen_ai.workflow.duration`, as the conventions give."""

ATTEMPT_BUCKETS: Final = (1, 2, 3, 4, 5, 6, 8, 11, 16, 21, 51, 101)
"""Bucket boundaries of `jevrefine.refine.attempts` (1 to 101 attempts: the refine loop's cap)."""


class Telemetry:
    """The tracer, meter instruments, event logger and content-capture switch of one client.

    Built once per client from its `InstrumentationSettings`: instruments are created here, not on
    each call. `Telemetry(tracer_provider=...)` (the settings' fields) builds the settings too.
    """

    __slots__ = (
        "_follows_global_logger",
        "_follows_global_meter",
        "_follows_global_tracer",
        "_logs_record",
        "_records",
        "capture",
        "events",
        "input_tokens",
        "legacy_attributes",
        "operation_duration",
        "output_tokens",
        "refine_attempts",
        "refine_outcome",
        "settings",
        "time_per_output_chunk",
        "time_to_first_chunk",
        "token_usage",
        "tool_duration",
        "tracer",
        "workflow_duration",
    )

    def __init__(self, settings: InstrumentationSettings | None = None, /, **fields: Any) -> None:
        settings = settings_of(settings, **fields)
        self.settings = settings
        """The settings this was built from."""
        tracer_provider = settings.tracer_provider
        meter_provider = settings.meter_provider
        # What `active()` needs: whether a provider given here records, or which of them stand
        # for the global ones (a proxy is the global's stand-in, even when passed in explicitly).
        self._follows_global_tracer = _fastpath.follows_global_tracer(tracer_provider)
        self._follows_global_meter = _fastpath.follows_global_meter(meter_provider)
        self._records = not (
            self._follows_global_tracer or _fastpath.is_no_op_tracer(tracer_provider)
        ) or not (self._follows_global_meter or _fastpath.is_no_op_meter(meter_provider))
        logger_provider = settings.logger_provider
        self._follows_global_logger = _fastpath.follows_global_logger(logger_provider)
        self._logs_record = not (
            self._follows_global_logger or _fastpath.is_no_op_logger(logger_provider)
        )
        self.tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider)
        self.events: _logs.Logger = _logs.get_logger(
            INSTRUMENTATION_NAME, __version__, logger_provider
        )
        names = settings.names
        self.operation_duration = meter.create_histogram(
            names.inference_duration,
            unit="s",
            description="Duration of GenAI operations",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.time_to_first_chunk = meter.create_histogram(
            names.time_to_first_chunk,
            unit="s",
            description="Time from the request to the first streamed chunk",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.time_per_output_chunk = meter.create_histogram(
            names.time_per_output_chunk,
            unit="s",
            description="Time between streamed chunks, after the first",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.token_usage = meter.create_histogram(
            names.token_usage,
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.input_tokens = _token_histogram(
            meter, names.input_tokens, "Input tokens per inference operation"
        )
        self.output_tokens = _token_histogram(
            meter, names.output_tokens, "Output tokens per inference operation"
        )
        self.tool_duration = meter.create_histogram(
            METRIC_TOOL_DURATION,
            unit="s",
            description="Duration of tool executions",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.workflow_duration = meter.create_histogram(
            METRIC_WORKFLOW_DURATION,
            unit="s",
            description="Duration of GenAI workflows",
            explicit_bucket_boundaries_advisory=WORKFLOW_BUCKETS,
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
        self.capture: CaptureMode = settings.capture
        self.legacy_attributes = settings.legacy_attributes

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
            or (self._follows_global_tracer and _fastpath.global_tracer_set())
            or (self._follows_global_meter and _fastpath.global_meter_set())
        )

    def listening(self) -> bool:
        """Whether anything could receive a loop's spans, metrics or result events.

        `active()`, or a logger provider records: the self-refine loop's result events
        (`gen_ai.evaluation.result`) also go to the logs API, with no tracer needed. Checked once
        per refinement: when nothing listens at all, the loop skips its spans, events and metrics
        (`bench_chain_overhead`, `bench_adapter_cpu`'s `refine_many`).
        """
        return (
            self.active()
            or self._logs_record
            or (self._follows_global_logger and _fastpath.global_logger_set())
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

    def record_workflow(self, elapsed: float, name: str, error_type: str | None) -> None:
        """Record one `invoke_workflow` span's duration (`gen_ai.workflow.duration`)."""
        attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: "invoke_workflow",
            GEN_AI_WORKFLOW_NAME: name,
        }
        if error_type is not None:
            attributes["error.type"] = error_type
        self.workflow_duration.record(elapsed, attributes)

    def record_usage(self, usage: Usage, attributes: Mapping[str, Any]) -> None:
        """Record a call's token counts, under the names the settings chose."""
        input_tokens = self.input_tokens
        output_tokens = self.output_tokens
        if input_tokens is not None and output_tokens is not None:
            # The newest conventions: one histogram per direction, no token type.
            input_tokens.record(usage.input_tokens, attributes)
            output_tokens.record(usage.output_tokens, attributes)
            return
        self.token_usage.record(usage.input_tokens, {**attributes, GEN_AI_TOKEN_TYPE: "input"})
        self.token_usage.record(usage.output_tokens, {**attributes, GEN_AI_TOKEN_TYPE: "output"})
        if self.legacy_attributes:
            self.token_usage.record(usage.total_tokens, {**attributes, GEN_AI_TOKEN_TYPE: "total"})


def _token_histogram(meter: Meter, name: str | None, description: str) -> Histogram | None:
    """A token histogram under `name`, or `None` when the naming scheme has no such metric."""
    if name is None:
        return None
    return meter.create_histogram(
        name,
        unit="{token}",
        description=description,
        explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
    )
